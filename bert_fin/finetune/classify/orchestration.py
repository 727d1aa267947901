"""run_classifier's orchestration: settings -> checks -> Estimator train / eval / predict.

`preflight(settings, dist)` (settings: flags.Settings, checked by flags.settings_of) reads and
checks everything (config, vocab, checkpoint, every needed data file, the labels) before anything
is written, raising ValueError (tasks.DataError for bad
data) with a one-line message. `run(settings, dist, plan)` then, top to bottom as run_squad's:
  train    the optimizer of the flags (estimator_skeleton.train_setup -> model.model_fn_builder
           -> train_op), in worker_estimator; on every rank, each on its share of the training
           examples (estimator_skeleton.py:
           rank 0 owns output_dir, checkpoints, labels.txt; the others use a private temporary
           model_dir and start from rank 0's weights, broadcast hook);
  eval     rank 0, the whole dev set: google's eval block + macro-F1, per-class P/R/F1 and the
           confusion matrix -> eval_results.txt, with how many dev examples were longer than fit
           (eval_examples, eval_examples_longer, eval_long_text; eval_windows under chunks);
  predict  rank 0: test_results.tsv, one line a test example in file order, the class
           probabilities tab-separated in the order of labels.txt (google's format).
Texts longer than --max_seq_length are read as --long_text says (long_text.py), and every split's
count of them is said at start-up. Under --long_text=chunks the rows are windows: training reads
every window with its example's label, eval and predict pool each example's windows
(per_document.py): figures per example, one test_results.tsv row an example.
"""
import collections
import dataclasses
import functools
import os

import numpy as np

import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin import tokenization
from bert_fin.records import schema as records
from bert_fin.finetune import batches
from bert_fin.finetune import estimator_skeleton
from bert_fin.finetune import finetuned
from bert_fin.finetune import label_lists
from bert_fin.finetune import model_inputs
from bert_fin.finetune.classify import per_document
from bert_fin.finetune.classify import entity_markers
from bert_fin.finetune.classify import features as features_lib
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.classify import metrics
from bert_fin.finetune.classify import model as classifier
from bert_fin.finetune.classify import multi_label
from bert_fin.finetune.classify import tasks
from bert_fin.training.monitor import eval_results


Plan = collections.namedtuple("Plan", [
    "settings", "bert_config", "labels", "data", "num_train_steps", "num_warmup_steps", "pooling",
    "long_text", "marker_ids"], defaults=[()])
Plan.__doc__ = """settings: the run's (an imported --init_checkpoint folder resolved); data:
{split: features.Encoded} of the splits the run needs; pooling: the --pooling the model is built
with (a saved model's own when the flag is not given); long_text: the long_text.Options the texts
are read with (a saved model's, flag by flag, in a run without --do_train); marker_ids: the vocab
ids of the entity start markers the classifier reads (--entity_markers; () when off)."""


def _say(dist, line):
  """A start-up line on stdout, once (rank 0 under Horovod: every rank runs preflight)."""
  if dist.is_chief:
    print("[run_classifier] " + line, flush=True)


def _pooling(settings, saved_pooling, where):
  """--pooling, or the saved model's pooling when the flag is not given."""
  if saved_pooling is None:
    return settings.task.pooling
  if "pooling" not in settings.given:
    return saved_pooling
  if settings.task.pooling != saved_pooling:
    raise ValueError("the model in %s was trained with --pooling=%s, this run asks for "
                     "--pooling=%s: drop the flag or use a new --output_dir" % (
                         where, saved_pooling, settings.task.pooling))
  return settings.task.pooling


def _long_text(settings, dist, saved, where):
  """long_text.Options of the run: the flags; in a run without --do_train, each flag not given
  takes the saved model's value (`saved`: finetuned.read_long_text, None: a model that read the
  head). ValueError for a flag given that the mode does not read."""
  documents = settings.documents
  values = {key: getattr(documents, key) for key in finetuned.LONG_TEXT_KEYS}
  if not settings.mode.do_train and saved is not None:
    values.update({key: saved[key] for key in finetuned.LONG_TEXT_KEYS
                   if key not in settings.given and saved.get(key) is not None})
    if "long_text" not in settings.given:
      _say(dist, "long texts read as the model in %s was trained: --long_text=%s" % (
          where, values["long_text"]))
  options = long_text.Options(values["long_text"], values["head_tokens"], values["doc_stride"],
                              values["chunk_pooling"])
  for flag, mode in (("head_tokens", long_text.HEAD_TAIL), ("doc_stride", long_text.CHUNKS),
                     ("chunk_pooling", long_text.CHUNKS)):
    if flag in settings.given and options.mode != mode:
      raise ValueError("--%s applies to --long_text=%s, this run reads --long_text=%s: drop "
                       "the flag or pass --long_text=%s" % (flag, mode, options.mode, mode))
  classify_flags.check_documents(dataclasses.replace(settings, documents=dataclasses.replace(
      documents, head_tokens=options.head_tokens, doc_stride=options.doc_stride)))
  return options


def _encode(raw, labels, tokenizer, settings, dist, options):
  """{split: features.Encoded}; says each split's count of examples longer than fit. A pair
  under --long_text=chunks is a DataError naming its file and line."""
  if options.mode == long_text.CHUNKS:
    for examples in raw.values():
      pair = features_lib.first_pair(examples.examples)
      if pair is not None:
        raise tasks.DataError(
            "%s: example %s is a pair (text_b): --long_text=chunks windows single texts; use "
            "--long_text=head_tail (it cuts each side of a pair) or join the pair into one "
            "text" % (examples.path, pair.guid))
  data = {}
  for split, examples in raw.items():
    multi = settings.task.multi_label  # the label sets are laid out after encoding
    data[split] = features_lib.encode(
        [e._replace(label=None) for e in examples.examples] if multi else examples.examples,
        labels, tokenizer, settings.data.max_seq_length, options)
    if multi:
      data[split].arrays[features_lib.LABEL_IDS] = _multi_hot(examples, labels)[
          data[split].doc_index]
    if settings.task.entity_markers:
      missing = entity_markers.rows_missing_a_marker(
          data[split].arrays[records.INPUT_IDS],
          tokenizer.start_ids(settings.task.entity_markers))
      _say(dist, "%s: %d of %d examples lack an entity start marker (not marked in the text, "
                 "or cut by --max_seq_length): their classifier reads [CLS] in its place" % (
                     split, missing, len(examples.examples)))
    _say(dist, long_text.describe(split, data[split].truncated, len(examples.examples),
                                  settings.data.max_seq_length, options,
                                  rows=len(data[split].doc_index)))
  return data


def _multi_hot(examples, labels):
  """int32 [n, L] of a split's label sets (--multi_label); DataError naming FILE (example) for a
  label name not in labels."""
  return multi_label.multi_hot([e.label for e in examples.examples], labels, [
      "%s (%s)" % (examples.path, e.guid) for e in examples.examples])


def check_saved_head(settings, saved_dir, where):
  """ValueError when a run without --do_train asks for another head than the saved model's
  (--multi_label, --entity_markers as recorded in saved_dir/classifier_config.json; a model saved
  before they were recorded is not checked)."""
  if settings.mode.do_train or not saved_dir:
    return
  for key, value in finetuned.read_head(saved_dir).items():
    if value != getattr(settings.task, key):
      raise ValueError("the model in %s was trained with --%s=%s, this run asks for --%s=%s: "
                       "pass --%s=%s" % (where, key, value, key, getattr(settings.task, key),
                                         key, value))


def _read_data(settings, dist, data_format, saved_labels, where):
  """({split: Examples}, labels) for the splits the flags need (--multi_label: the label names
  of the label sets, each set's names checked)."""
  splits = label_lists.wanted_splits(settings.mode)
  flag_labels = settings.task.labels or tasks.format_labels(data_format)
  multi = settings.task.multi_label
  raw = {}
  if settings.mode.do_train:
    raw["train"] = tasks.read_split(settings.data.data_dir, "train", data_format,
                                    labels=None if multi else flag_labels or None)
    _check_usable(raw["train"])  # before its (empty) label list is judged
  train_labels = None
  if "train" in raw:
    train_labels = (multi_label.labels_from(e.label for e in raw["train"].examples) if multi
                    else tasks.labels_from(raw["train"].examples))
  labels = label_lists.choose_labels(flag_labels, train_labels, saved_labels, where)
  for split in splits:
    if split != "train":
      raw[split] = tasks.read_split(settings.data.data_dir, split, data_format,
                                    labels=None if multi else labels)
    if multi:
      _multi_hot(raw[split], labels)
    tf.logging.info(tasks.describe(raw[split]))
    _say(dist, tasks.describe(raw[split]))
  if "dev" in raw:
    _check_usable(raw["dev"])
  return raw, labels


def _check_usable(examples):
  """DataError when a train / dev split (tasks.Examples) kept no example: the file, what was
  skipped and the fix."""
  if not examples.examples:
    skipped = tasks.describe(examples).partition("; ")[2]
    raise tasks.DataError("%s: no usable example%s: each line needs a non-empty text (and a "
                          "label)" % (examples.path, " (%s)" % skipped if skipped else ""))


def _check_saved(checkpoint, labels, pooling):
  """The line naming the fine-tuned model the run reads; ValueError when it does not fit."""
  finetuned.check_model(checkpoint, labels, pooling)
  return "evaluating / predicting with %s (--pooling=%s)" % (checkpoint, pooling)


def preflight(settings, dist):
  """Everything checked and tokenized before the first graph; returns a Plan."""
  say = functools.partial(_say, dist)
  settings, bert_config = model_inputs.check_model_inputs(settings, dist, say)
  checkpoint, saved_dir, where = finetuned.saved_model(settings)
  pooling = _pooling(settings, finetuned.read_pooling(saved_dir), where)
  options = _long_text(settings, dist, finetuned.read_long_text(saved_dir), where)
  check_saved_head(settings, saved_dir, where)
  if settings.task.entity_markers > entity_markers.MAX_ENTITIES:
    raise ValueError("--entity_markers must be at most %d (the reserved markers of %d "
                     "entities), got %d" % (entity_markers.MAX_ENTITIES,
                                            entity_markers.MAX_ENTITIES,
                                            settings.task.entity_markers))
  if settings.task.multi_label and options.mode == long_text.CHUNKS:
    raise ValueError("--multi_label reads one row an example: --long_text=head, tail or "
                     "head_tail, not chunks")
  raw, labels = _read_data(settings, dist, settings.task.task_name.lower(),
                           finetuned.read_labels(saved_dir), where)
  tokenizer = tokenization.make_tokenizer(settings.model.vocab_file,
                                         do_lower_case=settings.model.do_lower_case)
  marker_ids = ()
  if settings.task.entity_markers:
    tokenizer = entity_markers.MarkerTokenizer(tokenizer, settings.model.vocab_file)
    marker_ids = tokenizer.start_ids(settings.task.entity_markers)
  model_inputs.check_weights(
      settings, say, checkpoint,
      lambda: classifier.variable_shapes(bert_config, len(labels), settings.data.max_seq_length,
                                         pooling, marker_ids),
      lambda path: _check_saved(path, labels, pooling))
  data = _encode(raw, labels, tokenizer, settings, dist, options)
  num_train_steps, num_warmup_steps = estimator_skeleton.train_steps(
      settings, len(data["train"].doc_index) if settings.mode.do_train else 0, dist,
      "windows" if options.mode == long_text.CHUNKS else "examples")
  settings = model_inputs.settle_init_folder(settings, dist)  # checked: the import moves in
  return Plan(settings, bert_config, labels, data, num_train_steps, num_warmup_steps, pooling,
              options, marker_ids)


def _long_text_figures(encoded, options):
  """eval_results.txt's record of the dev examples longer than fit (and windows, chunks)."""
  figures = {"eval_examples": encoded.num_examples, "eval_examples_longer": encoded.truncated,
             "eval_long_text": options.mode}
  if options.mode == long_text.CHUNKS:
    figures["eval_windows"] = len(encoded.doc_index)
  return figures


def _evaluate_multi_label(estimator, settings, plan):
  """--multi_label's eval: dev probabilities predicted, thresholds chosen on them
  (multi_label.json), the F1s into eval_results.txt."""
  dev = plan.data["dev"]
  probabilities = np.array([p["probabilities"] for p in estimator.predict(
      input_fn=batches.input_fn_builder(dev.arrays, settings.data.eval_batch_size, False))])
  result, thresholds = multi_label.dev_report(dev.arrays[features_lib.LABEL_IDS], probabilities,
                                              plan.labels)
  result.update(_long_text_figures(dev, plan.long_text))
  result["global_step"] = per_document.checkpoint_step(estimator)
  multi_label.write_thresholds(settings.output.output_dir, thresholds)
  eval_results.write_eval_results(settings.output.output_dir, result)
  return result


def evaluate(estimator, settings, plan):
  """dev's figures (google's eval block, per-class P/R/F1, the confusion matrix; --multi_label:
  its F1s and thresholds) -> eval_results.txt; returns them."""
  tf.logging.info("***** Running evaluation *****")
  if settings.task.multi_label:
    return _evaluate_multi_label(estimator, settings, plan)
  dev = plan.data["dev"]
  if plan.long_text.mode == long_text.CHUNKS:
    result = per_document.evaluate(estimator, dev, len(plan.labels), settings.data.eval_batch_size,
                                plan.long_text.chunk_pooling)
  else:
    result = estimator.evaluate(input_fn=batches.input_fn_builder(
        dev.arrays, settings.data.eval_batch_size, False))
  result.update(_long_text_figures(dev, plan.long_text))
  confusion = result.pop(classifier.CONFUSION_MATRIX)
  result.update(metrics.classification_report(confusion, plan.labels))
  result["eval_confusion_matrix"] = confusion.tolist()
  eval_results.write_eval_results(settings.output.output_dir, result)
  return result


def write_run_files(settings, plan):
  """labels.txt and classifier_config.json (the pooling, how long texts were read, the head's
  kind: finetuned.HEAD_KEYS, the tokenizing flags: finetuned.TEXT_KEYS) beside the checkpoints:
  what eval / predict runs and exports read back."""
  saved = dict(zip(finetuned.LONG_TEXT_KEYS, plan.long_text))
  saved.update((key, getattr(settings.task, key)) for key in finetuned.HEAD_KEYS)
  saved.update(zip(finetuned.TEXT_KEYS, (settings.data.max_seq_length,
                                          bool(settings.model.do_lower_case))))
  finetuned.write_run_files(settings.output.output_dir, plan.labels, plan.pooling, saved)


def predict(estimator, settings, plan):
  """test's class probabilities -> test_results.tsv (one row an example, google's format);
  returns its path."""
  tf.logging.info("***** Running prediction *****")
  path = os.path.join(settings.output.output_dir, tasks.TEST_RESULTS_FILE)
  test = plan.data["test"]
  if plan.long_text.mode == long_text.CHUNKS:  # one row an example: its windows pooled
    _, probabilities = per_document.document_probabilities(
        estimator, test, settings.data.predict_batch_size, plan.long_text.chunk_pooling)
    predictions = (p.astype(np.float32) for p in probabilities)
  else:
    predictions = (prediction["probabilities"] for prediction in estimator.predict(
        input_fn=batches.input_fn_builder(test.arrays, settings.data.predict_batch_size, False)))
  rows = 0
  with io_utils.atomic_output(path) as f:
    for probabilities in predictions:
      f.write("\t".join(str(p) for p in probabilities) + "\n")
      rows += 1
  expected = test.num_examples
  if rows != expected:
    raise RuntimeError("predicted %d rows for %d test examples" % (rows, expected))
  print("[run_classifier] wrote %d predictions (columns: %s) to %s" % (
      rows, ", ".join(plan.labels), path), flush=True)
  return path


def run(settings, dist, plan=None):
  """Trains on every rank (labels.txt and classifier_config.json beside the checkpoints), then
  the chief evaluates dev (google's eval block, per-class P/R/F1 -> eval_results.txt) and
  predicts test (test_results.tsv).

  Args:
    settings: run_classifier's checked flags.Settings.
    dist: distributed.init's process group.
    plan: preflight's Plan (made here when None).

  Returns:
    evaluate's figures, or None (no --do_eval, or a rank other than the chief).
  """
  plan = plan or preflight(settings, dist)
  settings = plan.settings  # an --init_checkpoint folder resolved to its import
  setup = estimator_skeleton.train_setup(settings, dist, plan.num_train_steps,
                                         plan.num_warmup_steps)
  model_fn = classifier.model_fn_builder(plan.bert_config, len(plan.labels),
                                         settings.model.init_checkpoint, dist, setup,
                                         plan.pooling, settings.task.multi_label, plan.marker_ids)
  with estimator_skeleton.worker_estimator("classifier", settings, dist, model_fn) as estimator:
    start = estimator_skeleton.training_start(settings, dist, plan.num_train_steps)
    if start is not None:  # --do_train, and steps left
      if dist.is_chief:
        write_run_files(settings, plan)
      estimator_skeleton.train(estimator, settings, dist, plan.data["train"].arrays,
                               plan.num_train_steps, start)
    if not dist.is_chief:
      return None  # the chief alone evaluates and predicts
    result = None
    if settings.mode.do_eval:
      result = evaluate(estimator, settings, plan)
    if settings.mode.do_predict:
      predict(estimator, settings, plan)
    return result
