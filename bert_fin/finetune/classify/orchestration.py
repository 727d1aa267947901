"""run_classifier's orchestration: settings -> checks -> Estimator train / eval / predict.

`preflight(settings, dist)` (settings: flags.Settings, checked by flags.settings_of) reads and
checks everything (config, vocab, checkpoint, every needed data file, the labels) before anything
is written, raising ValueError (tasks.DataError for bad
data) with a one-line message. `run(settings, dist, plan)` then, as run_pretraining:
  train    on every rank, each on its share of the training examples (estimator_skeleton.py:
           rank 0 owns output_dir, checkpoints, labels.txt; the others use a private temporary
           model_dir and start from rank 0's weights, broadcast hook);
  eval     rank 0, the whole dev set: google's eval block + macro-F1, per-class P/R/F1 and the
           confusion matrix -> eval_results.txt;
  predict  rank 0: test_results.tsv, one line a test example in file order, the class
           probabilities tab-separated in the order of labels.txt (google's format).
"""
import collections
import os

import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin import tokenization
from bert_fin.finetune import batches
from bert_fin.finetune import estimator_skeleton
from bert_fin.finetune import finetuned
from bert_fin.finetune import label_lists
from bert_fin.finetune import model_inputs
from bert_fin.finetune.classify import features as features_lib
from bert_fin.finetune.classify import metrics
from bert_fin.finetune.classify import model as classifier
from bert_fin.finetune.classify import tasks
from bert_fin.training.monitor import eval_results


Plan = collections.namedtuple("Plan", [
    "settings", "bert_config", "labels", "data", "num_train_steps", "num_warmup_steps", "pooling"])
Plan.__doc__ = """settings: the run's (an imported --init_checkpoint folder resolved); data:
{split: features.Encoded} of the splits the run needs; pooling: the --pooling the model is built
with (a saved model's own when the flag is not given)."""


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


def _read_data(settings, dist, data_format, saved_labels, where):
  """({split: Examples}, labels) for the splits the flags need."""
  splits = label_lists.wanted_splits(settings.mode)
  flag_labels = settings.task.labels or tasks.format_labels(data_format)
  raw = {}
  if settings.mode.do_train:
    raw["train"] = tasks.read_split(settings.data.data_dir, "train", data_format,
                                    labels=flag_labels or None)
  train_labels = tasks.labels_from(raw["train"].examples) if "train" in raw else None
  labels = label_lists.choose_labels(flag_labels, train_labels, saved_labels, where)
  for split in splits:
    if split != "train":
      raw[split] = tasks.read_split(settings.data.data_dir, split, data_format, labels=labels)
    tf.logging.info(tasks.describe(raw[split]))
    _say(dist, tasks.describe(raw[split]))
  for split in ("train", "dev"):
    if split in raw and not raw[split].examples:
      raise tasks.DataError("%s: no usable example" % raw[split].path)
  return raw, labels


def _check_weights(settings, dist, bert_config, labels, pooling, checkpoint):
  """The restore report of --init_checkpoint (printed), or the fine-tuned model's fit."""
  if checkpoint is not None:
    finetuned.check_model(checkpoint, labels, pooling)
    _say(dist, "evaluating / predicting with %s (--pooling=%s)" % (checkpoint, pooling))
    return
  model_inputs.check_init_checkpoint(
      settings, lambda line: _say(dist, line),
      lambda: classifier.variable_shapes(bert_config, len(labels), settings.data.max_seq_length,
                                         pooling))


def preflight(settings, dist):
  """Everything checked and tokenized before the first graph; returns a Plan."""
  settings, bert_config = model_inputs.check_model_inputs(settings, dist,
                                                          lambda line: _say(dist, line))
  checkpoint, saved_dir, where = finetuned.saved_model(settings)
  pooling = _pooling(settings, finetuned.read_pooling(saved_dir), where)
  raw, labels = _read_data(settings, dist, settings.task.task_name.lower(),
                           finetuned.read_labels(saved_dir), where)
  _check_weights(settings, dist, bert_config, labels, pooling, checkpoint)
  tokenizer = tokenization.make_tokenizer(settings.model.vocab_file,
                                         do_lower_case=settings.model.do_lower_case)
  data = {}
  for split, examples in raw.items():
    data[split] = features_lib.encode(examples.examples, labels, tokenizer,
                                      settings.data.max_seq_length)
    if data[split].truncated:
      tf.logging.info("%s: %d of %d examples truncated to --max_seq_length %d", examples.path,
                      data[split].truncated, len(examples.examples), settings.data.max_seq_length)
  num_train_steps, num_warmup_steps = estimator_skeleton.train_steps(
      settings, len(raw["train"].examples) if settings.mode.do_train else 0, dist, "examples")
  settings = model_inputs.settle_init_folder(settings, dist)  # checked: the import moves in
  return Plan(settings, bert_config, labels, data, num_train_steps, num_warmup_steps, pooling)


def _evaluate(estimator, settings, plan):
  tf.logging.info("***** Running evaluation *****")
  result = estimator.evaluate(input_fn=batches.input_fn_builder(
      plan.data["dev"].arrays, settings.data.eval_batch_size, False))
  confusion = result.pop(classifier.CONFUSION_MATRIX)
  result.update(metrics.classification_report(confusion, plan.labels))
  result["eval_confusion_matrix"] = confusion.tolist()
  eval_results.write_eval_results(settings.output.output_dir, result)
  return result


def _predict(estimator, settings, plan):
  tf.logging.info("***** Running prediction *****")
  path = os.path.join(settings.output.output_dir, tasks.TEST_RESULTS_FILE)
  rows = 0
  with io_utils.atomic_output(path) as f:
    for prediction in estimator.predict(input_fn=batches.input_fn_builder(
        plan.data["test"].arrays, settings.data.predict_batch_size, False)):
      f.write("\t".join(str(p) for p in prediction["probabilities"]) + "\n")
      rows += 1
  expected = len(plan.data["test"].arrays[batches.LABEL_IDS])
  if rows != expected:
    raise RuntimeError("predicted %d rows for %d test examples" % (rows, expected))
  print("[run_classifier] wrote %d predictions (columns: %s) to %s" % (
      rows, ", ".join(plan.labels), path), flush=True)
  return path


def _build_model_fn(plan, dist, setup):
  return classifier.model_fn_builder(plan.bert_config, len(plan.labels),
                                     plan.settings.model.init_checkpoint, dist, setup,
                                     plan.pooling)


PROGRAM = estimator_skeleton.Program(
    name="classifier", preflight=preflight, build_model_fn=_build_model_fn,
    train_arrays=lambda plan: plan.data["train"].arrays,
    write_run_files=lambda output_dir, plan: finetuned.write_run_files(output_dir, plan.labels,
                                                                       plan.pooling),
    evaluate=_evaluate, predict=_predict)


def run(settings, dist=None, plan=None):
  """Trains / evaluates / predicts as the settings (flags.Settings, checked) say, with the
  settings of `plan` (preflight's when not given): estimator_skeleton.run of PROGRAM. Returns the
  eval result dict or None."""
  return estimator_skeleton.run(PROGRAM, settings, dist, plan)
