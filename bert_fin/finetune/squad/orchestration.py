"""run_squad's orchestration: checked inputs -> windows -> Estimator train / predict -> answers,
EM / F1. Reads top to bottom: preflight() builds the Plan, run() trains and predicts.

`preflight(settings, dist, inputs)` (settings: flags.Settings, checked; inputs: data.Inputs, the
JSON files read and checked before TensorFlow was imported) checks the model inputs (config,
vocab, --init_checkpoint, or the fine-tuned model a predict-only run reads) and cuts every question
into windows (features.py), saying how the training answers map to tokens; raises ValueError with
one line. `run(plan, dist)` then, top to bottom:
  train    the optimizer of the flags (estimator_skeleton.train_setup -> model.model_fn_builder
           -> train_op), in estimator_skeleton.worker_estimator; on every rank, each on its share
           of the training windows (estimator_skeleton.train: rank 0 owns --output_dir and the
           checkpoints; Horovod broadcasts rank 0's weights; the other ranks train in a private
           temporary model_dir);
  predict  rank 0: the windows of --predict_file -> start / end logits -> postprocess.predict ->
           predictions.json, nbest_predictions.json (and null_odds.json with
           --version_2_with_negative), google's files, written atomically;
  score    rank 0, when every question of --predict_file has answers (always with --do_eval):
           evaluate.py's EM / F1 (--eval_metric) -> google's eval block and eval_results.txt.
A run without --do_train reads the fine-tuned model from --output_dir's latest checkpoint, else
--init_checkpoint; it must have the span head (cls/squad/output_weights).
"""
import collections
import functools
import json
import os

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin import tokenization
from bert_fin.finetune import batches
from bert_fin.finetune import estimator_skeleton
from bert_fin.finetune import finetuned
from bert_fin.finetune import model_inputs
from bert_fin.finetune.squad import data
from bert_fin.finetune.squad import evaluate
from bert_fin.finetune.squad import features
from bert_fin.finetune.squad import model as squad_model
from bert_fin.finetune.squad import postprocess
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.records import schema as records
from bert_fin.training.monitor import eval_results

PREDICTIONS_FILE, NBEST_FILE, NULL_ODDS_FILE = (
    "predictions.json", "nbest_predictions.json", "null_odds.json")  # google's names

Plan = collections.namedtuple("Plan", [
    "settings", "bert_config", "train", "predict", "num_train_steps", "num_warmup_steps",
    "metric"])
Plan.__doc__ = """settings: the run's (an imported --init_checkpoint folder resolved); train,
predict: (data.SquadFile, features.Encoded) of --train_file / --predict_file, or None; metric:
how the predictions are scored (evaluate.SQUAD / CMRC), None when they are not (unanswered
questions)."""


def _say(dist, line):
  """A start-up line on stdout, once (rank 0 under Horovod: every rank runs preflight)."""
  if dist.is_chief:
    print("[run_squad] " + line, flush=True)


def describe(squad_file, encoded, settings):
  """One line: questions -> windows, and for training how the answers map to tokens."""
  line = "%s: %d questions -> %d windows (--max_seq_length %d, --doc_stride %d)" % (
      squad_file.path, len(squad_file.questions), len(encoded.windows),
      settings.data.max_seq_length, settings.data.doc_stride)
  if encoded.windowless:
    line += "; %d question(s) whose context has no token get no window (predicted empty): %s" % (
        len(encoded.windowless), ", ".join(encoded.windowless[:3]))
  alignment = encoded.alignment
  if alignment is None:
    return line
  line += "; answers: %d of %d map to tokens exactly" % (alignment.exact, alignment.answers)
  if alignment.enclosing:
    line += ", %d do not align to token boundaries: trained on the enclosing tokens" % (
        alignment.enclosing)
  if alignment.skipped:
    line += ", %d skipped (no token holds the answer, or google's 'Could not find answer')" % (
        alignment.skipped)
  if alignment.examples:
    line += " (e.g. %s)" % "; ".join("question %s: %r -> %r" % example
                                     for example in alignment.examples[:3])
  return line


def _encode(squad_file, tokenizer, settings, training, dist):
  encoded = features.encode(squad_file, tokenizer, settings.data.max_seq_length,
                            settings.data.doc_stride, settings.data.max_query_length, training)
  _say(dist, describe(squad_file, encoded, settings))
  return squad_file, encoded


def preflight(settings, dist, inputs):
  """Everything checked and cut into windows before the first graph; returns a Plan."""
  say = functools.partial(_say, dist)
  settings, bert_config = model_inputs.check_model_inputs(settings, dist, say)
  checkpoint, _, _ = finetuned.saved_model(settings, squad_model.HEAD, squad_model.WHAT)
  model_inputs.check_weights(
      settings, say, checkpoint,
      lambda: squad_model.variable_shapes(bert_config, settings.data.max_seq_length),
      lambda path: "predicting with %s" % path)
  tokenizer = tokenization.make_tokenizer(settings.model.vocab_file,
                                         do_lower_case=settings.model.do_lower_case)
  train = predict = metric = None
  if inputs.train is not None:
    train = _encode(inputs.train, tokenizer, settings, True, dist)
    if not train[1].windows:
      raise ValueError("%s: no training window (every answer was skipped)" % inputs.train.path)
  if inputs.predict is not None:
    predict = _encode(inputs.predict, tokenizer, settings, False, dist)
    missing = data.unanswered(inputs.predict)
    if missing:
      _say(dist, "%s: %d question(s) without answers: predictions only, no EM / F1" % (
          inputs.predict.path, missing))
    else:
      metric = evaluate.choose_metric(settings.task.eval_metric, inputs.predict.contexts)
  kept = len(train[0].questions) - train[1].alignment.skipped if train else 0
  num_train_steps, num_warmup_steps = estimator_skeleton.train_steps(settings, kept, dist,
                                                                     "questions")
  settings = model_inputs.settle_init_folder(settings, dist)  # checked: the import moves in
  return Plan(settings, bert_config, train, predict, num_train_steps, num_warmup_steps, metric)


def _shuffled(arrays, seed):
  """The training rows in a seeded random order (google shuffles its examples before writing
  them; the input_fn's shuffle buffer is bounded)."""
  order = np.random.RandomState(seed).permutation(batches.num_rows(arrays))
  return {name: value[order] for name, value in arrays.items()}


def _logits(estimator, settings, encoded):
  """[(start_logits, end_logits, input_len)] of every predicted window, in row order."""
  rows = []
  lengths = encoded.arrays[records.INPUT_LEN]
  for prediction in estimator.predict(input_fn=batches.input_fn_builder(
      encoded.arrays, settings.data.predict_batch_size, False), yield_single_examples=True):
    row = len(rows)
    rows.append(([float(x) for x in prediction["start_logits"]],
                 [float(x) for x in prediction["end_logits"]], int(lengths[row])))
  if len(rows) != len(encoded.windows):
    raise RuntimeError("predicted %d rows for %d windows" % (len(rows), len(encoded.windows)))
  return rows


def write_output_set(output_dir, contents):
  """Writes {file name: JSON value} in google's layout (indent 4, newline at the end) as one set
  (io_utils.write_files_as_set: a value no file could hold writes none). Returns the names."""
  io_utils.write_files_as_set(collections.OrderedDict(
      (os.path.join(output_dir, name), json.dumps(value, indent=4, ensure_ascii=False) + "\n")
      for name, value in contents.items()))
  return list(contents)


def _global_step(settings):
  """The global_step of the checkpoint the predictions came from (None if it has none)."""
  checkpoint = (checkpoint_lib.resolve_checkpoint(settings.output.output_dir)
                or checkpoint_lib.resolve_checkpoint(settings.model.init_checkpoint))
  reader = tf.train.load_checkpoint(checkpoint)
  return (int(reader.get_tensor(tf.GraphKeys.GLOBAL_STEP))
          if reader.has_tensor(tf.GraphKeys.GLOBAL_STEP) else None)


def predict_and_score(estimator, plan):
  """Predicts --predict_file and writes google's files; scores them when it has answers (the
  eval block, eval_results.txt). Returns the eval result dict or None."""
  settings = plan.settings
  squad_file, encoded = plan.predict
  task = settings.task
  tf.logging.info("***** Running predictions *****")
  answers = postprocess.predict(
      squad_file.questions, encoded.windows, _logits(estimator, settings, encoded),
      encoded.paragraphs, postprocess.Settings(
          task.n_best_size, task.max_answer_length, settings.model.do_lower_case,
          task.version_2_with_negative, task.null_score_diff_threshold),
      log=tf.logging.info if task.verbose_logging else None)
  output_dir = settings.output.output_dir
  contents = collections.OrderedDict([(PREDICTIONS_FILE, answers.answers),
                                      (NBEST_FILE, answers.nbest)])
  if task.version_2_with_negative:
    contents[NULL_ODDS_FILE] = answers.null_odds
  written = write_output_set(output_dir, contents)
  print("[run_squad] wrote %d answers to %s (%s)%s" % (
      len(answers.answers), output_dir, ", ".join(written),
      "; %d n-best text(s) kept their whole words (get_final_text could not project them; "
      "--verbose_logging says why)" % answers.unprojected if answers.unprojected else ""),
        flush=True)
  if plan.metric is None:
    return None
  figures = evaluate.evaluate(squad_file.questions, answers.answers, plan.metric,
                              answers.null_odds if task.version_2_with_negative else None)
  result = collections.OrderedDict(("eval_" + key, value) for key, value in figures.items())
  result["eval_metric"] = plan.metric
  result["global_step"] = _global_step(settings)
  eval_results.write_eval_results(output_dir, result)
  return result


def run(plan, dist):
  """Trains (every rank) and predicts / scores (rank 0) as plan.settings say; returns the eval
  result dict, or None (nothing scored, or a rank other than the chief)."""
  settings = plan.settings
  setup = estimator_skeleton.train_setup(settings, dist, plan.num_train_steps,
                                         plan.num_warmup_steps)
  model_fn = squad_model.model_fn_builder(plan.bert_config, settings.model.init_checkpoint, dist,
                                          setup)
  with estimator_skeleton.worker_estimator("squad", settings, dist, model_fn) as estimator:
    start = estimator_skeleton.training_start(settings, dist, plan.num_train_steps)
    if start is not None:  # --do_train, and steps left
      estimator_skeleton.train(estimator, settings, dist,
                               _shuffled(plan.train[1].arrays, settings.execution.seed),
                               plan.num_train_steps, start)
    if not dist.is_chief or plan.predict is None:
      return None
    return predict_and_score(estimator, plan)
