"""run_ner's orchestration: settings -> checks -> Estimator train / eval / predict, as
run_classifier's (classify/orchestration.py), on the shared estimator_skeleton.py and
model_inputs.py.

`preflight(settings, dist)` (settings: flags.Settings, checked by flags.settings_of) reads and
checks everything (config, vocab, checkpoint, every needed data file, the tag list) before
anything is written, raising ValueError (ner_data.DataError for bad data) with a one-line
message. `run(settings, dist, plan)` then, top to bottom as run_squad's:
  train    the optimizer of the flags (estimator_skeleton.train_setup -> model.model_fn_builder
           -> train_op), in worker_estimator; on every rank, each on its share of the training
           windows (estimator_skeleton.train: rank 0 owns output_dir, checkpoints and
           labels.txt; Horovod broadcasts rank 0's weights);
  eval     rank 0: the dev windows are predicted, joined back per sentence (ner_features.join)
           and scored by ner_metrics: entity P/R/F1 per type, micro, macro, token accuracy,
           eval_loss (mean cross-entropy of the units), global_step -> eval_results.txt and a
           table on the console;
  predict  rank 0: the test windows, joined, -> test_predictions.txt / .json in the input's
           format (ner_data.prediction_lines); when the test file is tagged, its figures (same
           keys) -> test_results.txt.
A run without --do_train reads the fine-tuned model from --output_dir's latest checkpoint, else
--init_checkpoint; it must have the tagger head (ner/output_weights) for the run's tag list.
"""
import collections
import functools
import os

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin import tokenization
from bert_fin.finetune import batches
from bert_fin.finetune import estimator_skeleton
from bert_fin.finetune import finetuned
from bert_fin.finetune import label_lists
from bert_fin.finetune import model_inputs
from bert_fin.finetune.ner import data as ner_data
from bert_fin.finetune.ner import features as ner_features
from bert_fin.finetune.ner import metrics as ner_metrics
from bert_fin.finetune.ner import model as ner_model
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.training.monitor import eval_results

TEST_RESULTS_FILE = "test_results.txt"

Plan = collections.namedtuple("Plan", [
    "settings", "bert_config", "labels", "data_format", "splits", "encoded", "num_train_steps",
    "num_warmup_steps", "use_crf"])
Plan.__doc__ = """settings: the run's (an imported --init_checkpoint folder resolved); splits:
{split: ner_data.Split}; encoded: {split: ner_features.Encoded} of the splits the run needs; use_crf: the model's (--use_crf, or the saved model's)."""


def _say(dist, line):
  if dist.is_chief:
    print("[run_ner] " + line, flush=True)


def _read_data(settings, dist, saved_labels, where):
  """(format, {split: Split}, tag list) for the splits the flags need."""
  wanted = label_lists.wanted_splits(settings.mode)
  data_format = ner_data.resolve_format(settings.data.data_dir, settings.task.task_name, wanted)
  splits = {}
  if settings.mode.do_train:
    splits["train"] = ner_data.read_split(settings.data.data_dir, "train", data_format,
                                          labels=settings.task.labels or None)
  train_labels = (ner_data.labels_from(splits["train"].sentences, data_format)
                  if "train" in splits else None)
  labels = ner_data.choose_labels(settings.task.labels, train_labels, saved_labels, where)
  for split in wanted:
    if split != "train":
      splits[split] = ner_data.read_split(settings.data.data_dir, split, data_format, labels=labels)
    _say(dist, ner_data.describe(splits[split]))
  if "dev" in splits and any(s.tags is None for s in splits["dev"].sentences):
    raise ner_data.DataError("%s: untagged: --do_eval needs the dev tags" % splits["dev"].path)
  return data_format, splits, labels


def _use_crf(settings, checkpoint):
  """--use_crf, or the choice of the model the run reads or continues; ValueError when the flag
  contradicts it."""
  if checkpoint is None and os.path.isdir(settings.output.output_dir):
    latest = checkpoint_lib.resolve_checkpoint(settings.output.output_dir)
    checkpoint = latest if latest and ner_model.head_size(latest) is not None else None
  if checkpoint is None:
    return settings.task.use_crf
  saved = ner_model.has_crf(checkpoint)
  if "use_crf" in settings.given and settings.task.use_crf != saved:
    raise ValueError("%s was trained %s --use_crf, this run asks %s: drop the flag or use a new "
                     "--output_dir" % (checkpoint, "with" if saved else "without",
                                       "for it" if settings.task.use_crf else "not to use it"))
  return saved


def _check_saved(checkpoint, labels):
  """The line naming the fine-tuned model the run reads; ValueError when its tagger head is not
  for the run's tag list."""
  rows = ner_model.head_size(checkpoint)
  if rows != len(labels):
    raise ValueError("%s has a tagger head for %d tags, this run has %d (%s): pass the model's "
                     "tags with --labels" % (checkpoint, rows, len(labels), ",".join(labels)))
  return "evaluating / predicting with %s" % checkpoint


def preflight(settings, dist):
  """Everything checked and tokenized before the first graph; returns a Plan."""
  say = functools.partial(_say, dist)
  settings, bert_config = model_inputs.check_model_inputs(settings, dist, say)
  checkpoint, saved_dir, where = finetuned.saved_model(
      settings, (ner_model.HEAD_WEIGHTS, ner_model.HEAD_BIAS), "tagger")
  data_format, splits, labels = _read_data(settings, dist, finetuned.read_labels(saved_dir), where)
  use_crf = _use_crf(settings, checkpoint)
  model_inputs.check_weights(
      settings, say, checkpoint,
      lambda: ner_model.variable_shapes(bert_config, len(labels), settings.data.max_seq_length,
                                        use_crf),
      lambda path: _check_saved(path, labels))
  tokenizer = tokenization.make_tokenizer(settings.model.vocab_file,
                                         do_lower_case=settings.model.do_lower_case)
  encoded = {}
  for split, data in splits.items():
    encoded[split] = ner_features.encode(data.sentences, labels, tokenizer,
                                         settings.data.max_seq_length)
    windows = len(encoded[split].windows)
    if windows > len(data.sentences) or encoded[split].cut_units:
      cut = encoded[split].cut_units
      _say(dist, "%s: %d sentences -> %d windows of --max_seq_length %d%s" % (
          data.path, len(data.sentences), windows, settings.data.max_seq_length,
          "; %d unit(s) longer than a window keep their first pieces" % cut if cut else ""))
  num_train_steps, num_warmup_steps = estimator_skeleton.train_steps(
      settings, len(encoded["train"].windows) if settings.mode.do_train else 0, dist, "windows")
  settings = model_inputs.settle_init_folder(settings, dist)  # checked: the import moves in
  return Plan(settings, bert_config, labels, data_format, splits, encoded, num_train_steps,
              num_warmup_steps, use_crf)


def _predict_split(estimator, settings, plan, split, batch_size):
  """(per-sentence predicted tags, per-sentence unit losses) of a split, windows joined."""
  encoded = plan.encoded[split]
  tag_rows, loss_rows = [], []
  for prediction in estimator.predict(input_fn=batches.input_fn_builder(
      encoded.arrays, batch_size, False)):
    tag_rows.append(prediction["tag_ids"])
    loss_rows.append(prediction["token_loss"])
  if len(tag_rows) != len(encoded.windows):
    raise RuntimeError("predicted %d rows for %d windows" % (len(tag_rows), len(encoded.windows)))
  tags = [[plan.labels[i] for i in s] for s in ner_features.join(encoded, tag_rows)]
  return tags, ner_features.join(encoded, loss_rows)


def score(plan, split, predicted, losses=None):
  """The entity report (ner_metrics.entity_report) of a tagged split's predicted tags."""
  gold = [s.tags for s in plan.splits[split].sentences]
  types = sorted({ner_data.parse_tag(t)[1] for t in plan.labels} - {None})
  result = ner_metrics.entity_report(gold, predicted, types)
  if losses is not None:
    result["eval_loss"] = float(np.mean(np.concatenate([np.asarray(l, np.float64)
                                                        for l in losses])))
  return result, types


def evaluate(estimator, settings, plan):
  """dev's entity report (score) with global_step -> eval_results.txt and a table on the
  console; returns it."""
  tf.logging.info("***** Running evaluation *****")
  predicted, losses = _predict_split(estimator, settings, plan, "dev",
                                     settings.data.eval_batch_size)
  result, types = score(plan, "dev", predicted, losses)
  result["global_step"] = int(estimator.get_variable_value(tf.GraphKeys.GLOBAL_STEP))
  eval_results.write_eval_results(settings.output.output_dir, result)
  print(ner_metrics.table(result, types), flush=True)
  return result


def predict(estimator, settings, plan):
  """test's tags -> the predictions file in the input's format (and test_results.txt when the
  test file is tagged); returns its path."""
  tf.logging.info("***** Running prediction *****")
  data = plan.splits["test"]
  predicted, _ = _predict_split(estimator, settings, plan, "test", settings.data.predict_batch_size)
  path = os.path.join(settings.output.output_dir, ner_data.PREDICTIONS_FILE[plan.data_format])
  lines = ner_data.prediction_lines(data, predicted)
  with io_utils.atomic_output(path) as f:
    f.write("".join(line + "\n" for line in lines))
  print("[run_ner] wrote %d lines (%d sentences) to %s" % (len(lines), len(predicted), path),
        flush=True)
  if all(sentence.tags is not None for sentence in data.sentences):
    result, _ = score(plan, "test", predicted)
    eval_results.write_results_file(
        os.path.join(settings.output.output_dir, TEST_RESULTS_FILE), result)
  return path


def run(settings, dist, plan=None):
  """Trains on every rank (labels.txt beside the checkpoints), then the chief evaluates dev
  (entity P/R/F1 -> eval_results.txt) and predicts test (the tags of every test sentence).

  settings: run_ner's checked flags.Settings; dist: distributed.init's process group; plan:
  preflight's Plan, made here when not given. Returns the eval result dict, or None (no
  --do_eval, or a rank other than the chief).
  """
  plan = plan or preflight(settings, dist)
  settings = plan.settings  # an --init_checkpoint folder resolved to its import
  setup = estimator_skeleton.train_setup(settings, dist, plan.num_train_steps,
                                         plan.num_warmup_steps)
  model_fn = ner_model.model_fn_builder(plan.bert_config, len(plan.labels),
                                        settings.model.init_checkpoint, dist, setup, plan.use_crf)
  with estimator_skeleton.worker_estimator("ner", settings, dist, model_fn) as estimator:
    start = estimator_skeleton.training_start(settings, dist, plan.num_train_steps)
    if start is not None:  # --do_train, and steps left
      if dist.is_chief:
        finetuned.write_labels(settings.output.output_dir, plan.labels)
      estimator_skeleton.train(estimator, settings, dist, plan.encoded["train"].arrays,
                               plan.num_train_steps, start)
    if not dist.is_chief:
      return None
    result = evaluate(estimator, settings, plan) if settings.mode.do_eval else None
    if settings.mode.do_predict:
      predict(estimator, settings, plan)
    return result
