"""Label lists, splits and data errors that run_classifier and run_ner share, DataError run_squad's too
(pure Python).

  SPLITS       train, dev, test: the files a --data_dir holds, in that order;
  wanted_splits  those a run reads: train (--do_train), dev (--do_eval), test (--do_predict);
  LABELS_FILE  labels.txt, written beside a fine-tuned model: the order of its output rows;
  DataError    bad data (FILE:LINE: what is wrong, what to do), a one-line refusal;
  choose_labels  --labels, else the training set's, else the saved list, checked against the
               saved one (classification labels; run_ner's tags check their syntax on top);
  key_part     a label as it appears in eval_results.txt keys.
"""
import re

SPLITS = ("train", "dev", "test")
LABELS_FILE = "labels.txt"  # written beside the model: the label order of every output


class DataError(ValueError):
  """Bad data: the message starts with FILE:LINE (or FILE) and says what to do."""


def wanted_splits(mode):
  """The SPLITS a run reads, in SPLITS order: train with --do_train, dev with --do_eval, test with
  --do_predict (mode: a fine-tuning program's settings.mode)."""
  return [split for split, wanted in zip(SPLITS, (mode.do_train, mode.do_eval, mode.do_predict))
          if wanted]


def key_part(label):
  """A label as it appears in result keys: whitespace and '=' become '_'."""
  return re.sub(r"[\s=]+", "_", str(label))


def choose_labels(flag_labels, train_labels, saved_labels, saved_where="--output_dir"):
  """The label list: --labels (list of str), else the training set's, else the saved list.

  saved_labels: labels.txt of the model the run continues or reads (None: none saved), found in
  `saved_where` (for the message). Raises DataError when no list is available, when fewer than 2
  labels, and when the list differs from the saved one (a model trained on other labels, or in
  another order: its outputs would be mislabelled).
  """
  if flag_labels:
    labels = [label.strip() for label in flag_labels if label.strip()]
    if len(set(labels)) != len(labels):
      raise DataError("--labels %s repeats a label" % ",".join(flag_labels))
  elif train_labels is not None:
    labels = train_labels
  elif saved_labels is not None:
    labels = saved_labels
  else:
    raise DataError("no label list: pass --labels=a,b,... or --do_train (labels come from "
                    "train), or an --output_dir holding %s from a training run" % LABELS_FILE)
  if saved_labels is not None and saved_labels != labels:
    how = "in another order" if sorted(saved_labels) == sorted(labels) else "another label set"
    source = "--labels or the task's list" if flag_labels else "the training set"
    raise DataError("the labels %s (from %s) differ from %s in %s (%s): that model's outputs "
                    "would be mislabelled; use its labels (--labels=%s) or a new --output_dir" % (
                        labels, source, saved_labels, saved_where, how, ",".join(saved_labels)))
  if len(labels) < 2:
    raise DataError("classification needs at least 2 labels, got %s" % labels)
  return labels
