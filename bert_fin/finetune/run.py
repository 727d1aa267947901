"""run_classifier's orchestration: flags -> checks -> Estimator train / eval / predict.

`preflight(values, dist)` reads and checks everything (config, vocab, checkpoint, every needed
data file, the labels) before anything is written, raising ValueError (tasks.DataError for bad
data) with a one-line message. `run(values, dist, plan)` then, as run_pretraining:
  train    on every rank, each on its share of the training examples; rank 0 owns output_dir
           (checkpoints, labels.txt), the others use a private temporary model_dir and start
           from rank 0's weights (broadcast hook);
  eval     rank 0, the whole dev set: google's eval block + macro-F1, per-class P/R/F1 and the
           confusion matrix -> eval_results.txt;
  predict  rank 0: test_results.tsv, one line a test example in file order, the class
           probabilities tab-separated in the order of labels.txt (google's format).
"""
import collections
import json
import os
import shutil
import tempfile

import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin import tokenization
from bert_fin.finetune import classifier
from bert_fin.finetune import features as features_lib
from bert_fin.finetune import finetuned
from bert_fin.finetune import flags as finetune_flags
from bert_fin.finetune import metrics
from bert_fin.finetune import tasks
from bert_fin.interop import init_checkpoint as init_lib
from bert_fin.modeling import config as config_lib
from bert_fin.training import distributed
from bert_fin.training import estimator as estimator_lib
from bert_fin.training import eval_results
from bert_fin.training import settings as train_settings
from bert_fin.training import step


Plan = collections.namedtuple("Plan", [
    "bert_config", "labels", "data", "num_train_steps", "num_warmup_steps", "pooling"])
Plan.__doc__ = """data: {split: features.Encoded} of the splits the run needs; pooling: the
--pooling the model is built with (a saved model's own when the flag is not given)."""


def _say(dist, line):
  """A start-up line on stdout, once (rank 0 under Horovod: every rank runs preflight)."""
  if dist.is_chief:
    print("[run_classifier] " + line, flush=True)


def resolve_init_folder(values, dist, say):
  """--init_checkpoint naming a transformers folder: the chief imports it into
  --output_dir/imported_init (interop/init_checkpoint.py, one line refusals), the ranks all
  switch --init_checkpoint to the import (a rank on a host that does not see it imports its own
  into a private temporary directory), and --bert_config_file / --vocab_file left out to its
  config and vocab. Other values of the flag are left alone."""
  if not init_lib.is_transformers_folder(values.init_checkpoint):
    return
  text = ""
  if dist.is_chief:
    try:
      resolved = init_lib.resolve(
          values.init_checkpoint, os.path.join(values.output_dir, init_lib.IMPORT_DIR),
          values.bert_config_file, values.vocab_file)
      text = json.dumps(resolved._asdict())
    except ValueError as e:
      text = json.dumps({"error": str(e)})
  decided = json.loads(dist.broadcast_bytes(text.encode("utf-8")).decode("utf-8"))
  if "error" in decided:
    raise ValueError(decided["error"])
  if not dist.is_chief and not os.path.isfile(decided["checkpoint"] + ".index"):
    # a host that does not see the chief's output dir: this rank imports the folder privately
    resolved = init_lib.resolve(values.init_checkpoint, tempfile.mkdtemp(
        prefix="bert_fin_imported_init_rank%d_" % dist.rank), values.bert_config_file,
                                values.vocab_file)
    decided = dict(resolved._asdict(), lines=[])
  for line in decided["lines"]:
    say(line)
  if decided["do_lower_case"] not in (None, values.do_lower_case):
    say("note: the folder's tokenizer has do_lower_case=%s, this run --do_lower_case=%s" % (
        str(decided["do_lower_case"]).lower(), str(values.do_lower_case).lower()))
  values.init_checkpoint = decided["checkpoint"]
  values.bert_config_file = decided["bert_config_file"]
  values.vocab_file = decided["vocab_file"]


def check_model_inputs(values, dist, say):
  """--init_checkpoint's transformers folder imported (resolve_init_folder); config, vocab and
  checkpoint readable and consistent, and a training run's --optimizer the one of --output_dir's
  checkpoint (if any); returns the BertConfig. A config padded past the vocab (vocab_size > its
  tokens) is accepted and say(line)s so, once."""
  resolve_init_folder(values, dist, say)
  bert_config = config_lib.read_config_for(values.bert_config_file, values.max_seq_length)
  if not os.path.isfile(values.vocab_file):
    raise ValueError("--vocab_file %s: no such file" % values.vocab_file)
  padding = tokenization.check_vocab_size(values.vocab_file, bert_config.vocab_size)
  if padding:
    say(padding)
  tokenization.validate_case_matches_checkpoint(values.do_lower_case, values.init_checkpoint)
  if values.init_checkpoint:
    try:
      tf.train.list_variables(values.init_checkpoint)
    except (tf.errors.OpError, ValueError) as e:
      raise ValueError("--init_checkpoint %s: cannot read checkpoint (%s)" % (
          values.init_checkpoint, str(e).splitlines()[0]))
  if values.do_train:
    finetuned.check_optimizer(values.output_dir, values.optimizer)
  return bert_config


def _saved_model(values):
  """(fine-tuned checkpoint an eval/predict-only run reads or None, the directory of its saved
  labels.txt / classifier_config.json)."""
  if values.do_train:
    return None, values.output_dir
  return finetuned.model_to_read(values.output_dir, values.init_checkpoint)


def _pooling(values, saved_pooling, where):
  """--pooling, or the saved model's pooling when the flag is not given."""
  if saved_pooling is None:
    return values.pooling
  if not values["pooling"].present:
    return saved_pooling
  if values.pooling != saved_pooling:
    raise ValueError("the model in %s was trained with --pooling=%s, this run asks for "
                     "--pooling=%s: drop the flag or use a new --output_dir" % (
                         where, saved_pooling, values.pooling))
  return values.pooling


def _read_data(values, dist, data_format, saved_labels, where):
  """({split: Examples}, labels) for the splits the flags need."""
  splits = [split for split, wanted in zip(tasks.SPLITS, (
      values.do_train, values.do_eval, values.do_predict)) if wanted]
  flag_labels = values.labels or tasks.format_labels(data_format)
  raw = {}
  if values.do_train:
    raw["train"] = tasks.read_split(values.data_dir, "train", data_format,
                                    labels=flag_labels or None)
  train_labels = tasks.labels_from(raw["train"].examples) if "train" in raw else None
  labels = tasks.choose_labels(flag_labels, train_labels, saved_labels, where)
  for split in splits:
    if split != "train":
      raw[split] = tasks.read_split(values.data_dir, split, data_format, labels=labels)
    tf.logging.info(tasks.describe(raw[split]))
    _say(dist, tasks.describe(raw[split]))
  for split in ("train", "dev"):
    if split in raw and not raw[split].examples:
      raise tasks.DataError("%s: no usable example" % raw[split].path)
  return raw, labels


def _check_weights(values, dist, bert_config, labels, pooling, checkpoint):
  """The restore report of --init_checkpoint (printed), or the fine-tuned model's fit."""
  if checkpoint is not None:
    finetuned.check_model(checkpoint, labels, pooling)
    _say(dist, "evaluating / predicting with %s (--pooling=%s)" % (checkpoint, pooling))
    return
  check_init_checkpoint(
      values, lambda line: _say(dist, line),
      lambda: classifier.variable_shapes(bert_config, len(labels), values.max_seq_length, pooling),
      classifier.ENCODER_SCOPE)


def check_init_checkpoint(values, say, shapes_fn, encoder_scope):
  """say(line)s what --init_checkpoint restores of the model whose variables shapes_fn() gives
  ({name: shape}), or that there is none (random init); ValueError when it restores nothing of
  the encoder (`encoder_scope`/...). Shared by run_classifier and run_ner."""
  if not values.init_checkpoint:
    say("no --init_checkpoint: every variable starts from its initializer (random init)")
    return
  report = finetuned.restore_report(values.init_checkpoint, shapes_fn())
  say(finetuned.describe_restore(report))
  if not any(name.startswith(encoder_scope + "/") for name in report.mapped):
    raise ValueError("--init_checkpoint %s restores none of the encoder's variables (%s/...): "
                     "not a BERT checkpoint with google's variable names" % (
                         values.init_checkpoint, encoder_scope))


def preflight(values, dist):
  """Everything checked and tokenized before the first graph; returns a Plan."""
  finetune_flags.validate_flags(values)
  bert_config = check_model_inputs(values, dist, lambda line: _say(dist, line))
  checkpoint, saved_dir = _saved_model(values)
  where = checkpoint or "--output_dir %s" % values.output_dir
  pooling = _pooling(values, finetuned.read_pooling(saved_dir), where)
  raw, labels = _read_data(values, dist, values.task_name.lower(),
                           finetuned.read_labels(saved_dir), where)
  _check_weights(values, dist, bert_config, labels, pooling, checkpoint)
  tokenizer = tokenization.make_tokenizer(values.vocab_file, do_lower_case=values.do_lower_case)
  data = {}
  for split, examples in raw.items():
    data[split] = features_lib.encode(examples.examples, labels, tokenizer, values.max_seq_length)
    if data[split].truncated:
      tf.logging.info("%s: %d of %d examples truncated to --max_seq_length %d", examples.path,
                      data[split].truncated, len(examples.examples), values.max_seq_length)
  num_train_steps = num_warmup_steps = 0
  if values.do_train:
    num_train_steps = values.num_train_steps or int(
        len(raw["train"].examples) / (values.train_batch_size * dist.size)
        * values.num_train_epochs)
    if num_train_steps < 1:
      raise ValueError("%d training examples give no full batch of --train_batch_size %d x %d "
                       "workers: lower the batch size or pass --num_train_steps" % (
                           len(raw["train"].examples), values.train_batch_size, dist.size))
    num_warmup_steps = int(num_train_steps * values.warmup_proportion)
  return Plan(bert_config, labels, data, num_train_steps, num_warmup_steps, pooling)


def _train(estimator, values, plan, dist):
  train(estimator, values, dist, plan.data["train"].arrays, plan.num_train_steps,
        lambda: finetuned.write_run_files(values.output_dir, plan.labels, plan.pooling))


def train(estimator, values, dist, arrays, num_train_steps, write_run_files):
  """Trains on this worker's share of `arrays` (rows: examples) up to num_train_steps, unless
  --output_dir's checkpoint is there already; the chief first writes optimizer.json and calls
  write_run_files() (the other files beside the checkpoints). Shared by run_classifier and
  run_ner."""
  start = dist.broadcast_int(estimator_lib.checkpoint_step(values.output_dir)
                             if dist.is_chief else 0)
  if start >= num_train_steps:
    tf.logging.info("Skipping training: %s is at step %d", values.output_dir, start)
    return
  if dist.is_chief:
    finetuned.write_optimizer(values.output_dir, values.optimizer)
    write_run_files()
  arrays = features_lib.shard(arrays, dist.size, dist.rank)
  tf.logging.info("***** Running training *****")
  tf.logging.info("  Num examples = %d on this worker, batch size = %d, num steps = %d",
                  len(arrays[features_lib.LABEL_IDS]), values.train_batch_size, num_train_steps)
  estimator.train(input_fn=features_lib.input_fn_builder(
      arrays, values.train_batch_size, True, seed=values.seed + dist.rank),
                  hooks=dist.broadcast_hooks(), max_steps=num_train_steps)


def _evaluate(estimator, values, plan):
  tf.logging.info("***** Running evaluation *****")
  result = estimator.evaluate(input_fn=features_lib.input_fn_builder(
      plan.data["dev"].arrays, values.eval_batch_size, False))
  confusion = result.pop(classifier.CONFUSION_MATRIX)
  result.update(metrics.classification_report(confusion, plan.labels))
  result["eval_confusion_matrix"] = confusion.tolist()
  eval_results.write_eval_results(values.output_dir, result)
  return result


def _predict(estimator, values, plan):
  tf.logging.info("***** Running prediction *****")
  path = os.path.join(values.output_dir, tasks.TEST_RESULTS_FILE)
  rows = 0
  with io_utils.atomic_output(path) as f:
    for prediction in estimator.predict(input_fn=features_lib.input_fn_builder(
        plan.data["test"].arrays, values.predict_batch_size, False)):
      f.write("\t".join(str(p) for p in prediction["probabilities"]) + "\n")
      rows += 1
  expected = len(plan.data["test"].arrays[features_lib.LABEL_IDS])
  if rows != expected:
    raise RuntimeError("predicted %d rows for %d test examples" % (rows, expected))
  print("[run_classifier] wrote %d predictions (columns: %s) to %s" % (
      rows, ", ".join(plan.labels), path), flush=True)
  return path


def run(values, dist=None, plan=None):
  """Trains / evaluates / predicts as the flags say. Returns the eval result dict or None."""
  dist = dist or distributed.init(values.horovod)
  plan = plan or preflight(values, dist)
  return run_estimator(
      values, dist, "classifier", plan,
      lambda setup: classifier.model_fn_builder(plan.bert_config, len(plan.labels),
                                                values.init_checkpoint, dist, setup, plan.pooling),
      lambda estimator: _train(estimator, values, plan, dist),
      lambda estimator: _evaluate(estimator, values, plan),
      lambda estimator: _predict(estimator, values, plan))


def run_estimator(values, dist, name, plan, model_fn_of, train_fn, evaluate_fn, predict_fn):
  """The Estimator part of a fine-tuning run, shared by run_classifier and run_ner: the model_fn
  is model_fn_of(classifier.TrainSetup from plan.num_train_steps / num_warmup_steps, or None
  without --do_train); then, as the flags say, train_fn(estimator) on every rank and, on the
  chief only, evaluate_fn(estimator) (its result is returned) and predict_fn(estimator). Ranks
  other than the chief train in a private temporary model_dir, removed at the end."""
  tf.logging.set_verbosity(tf.logging.INFO)
  if dist.is_chief:
    tf.io.gfile.makedirs(values.output_dir)
  model_dir = values.output_dir if dist.is_chief else tempfile.mkdtemp(
      prefix="bert_fin_%s_rank%d_" % (name, dist.rank))
  try:
    setup = None
    if values.do_train:
      setup = classifier.TrainSetup(
          values.learning_rate, plan.num_train_steps, plan.num_warmup_steps,
          step.StepConfig(use_loss_scaling=values.amp),
          optimizer_type=finetune_flags.OPTIMIZERS[values.optimizer],
          log_every_n_steps=values.log_every_n_steps,
          global_batch_size=values.train_batch_size * dist.size,
          summary_dir=values.output_dir if dist.is_chief else None)
    estimator = tf.estimator.Estimator(model_fn=model_fn_of(setup),
                                       config=estimator_lib.run_config(
                                           train_settings.EstimatorSettings.of_finetune_flags(
                                               values), dist, model_dir))
    if values.do_train:
      train_fn(estimator)
    if not dist.is_chief:
      return None
    result = evaluate_fn(estimator) if values.do_eval else None
    if values.do_predict:
      predict_fn(estimator)
    return result
  finally:
    if not dist.is_chief:
      shutil.rmtree(model_dir, ignore_errors=True)
