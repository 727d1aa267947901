"""Continuous evaluation beside a training job, and a kept copy of the best checkpoint.

  run_pretraining.py --do_eval --eval_continuous --output_dir=<the training's> ...   (2nd process)

google-research/bert's TF1 pattern (a checkpoints_iterator + Estimator.evaluate): wait for
the newest checkpoint of --output_dir, evaluate it, repeat. A checkpoint saved while an eval runs
is picked up next; when several were saved meanwhile only the newest is evaluated (as google).
Each evaluated checkpoint gives (for every eval set: --eval_input_file's, each --eval_source):
  output_dir/eval/events...       the Estimator's eval summaries at the checkpoint's step
                                  (TensorBoard shows them beside the training's, under "eval";
                                  an --eval_source NAME's under eval_NAME);
  output_dir/eval_results.jsonl   one JSON line a checkpoint: step, checkpoint, wall time, metrics
                                  (rewritten atomically; a restarted watcher skips steps in it);
  output_dir/eval_results.txt     google's file: the latest block (eval_results.write_eval_results);
  output_dir/best/                the checkpoint with the lowest masked_lm_loss so far (that of
                                  --best_eval_source NAME, NAME/masked_lm_loss; default the
                                  unprefixed set's, else the first --eval_source's): its
                                  model.ckpt-N.* files, a `checkpoint` state file (so
                                  tf.train.latest_checkpoint(output_dir/best) finds it) and its
                                  eval_results.txt.

best/: the candidate's files are hard-linked into best/ before it is evaluated (a copy when links
are impossible, each file written under a temp name and renamed), so the training's rotation
(keep_checkpoint_max) deleting the original mid-eval changes nothing: it only ever deletes files
named in output_dir/checkpoint, never those in best/. The state file is switched atomically to a
complete new set before the old best's files are removed.

It stops after evaluating the checkpoint of step >= --num_train_steps (the training's last), or
after --eval_timeout_secs without a new checkpoint. It never talks to the training ranks: it
only reads files, so they may change under it: a checkpoint that vanishes (rotated away, deleted)
before or while it is evaluated, or an output_dir that is deleted, is said once in one line and the
watch goes on waiting; with --eval_timeout_secs, an output_dir still gone when the time is up
stops it with WatchError (run_pretraining exits 2). A deleted output_dir is never recreated by the
watcher's own writes. Run it with CUDA_VISIBLE_DEVICES set to a GPU the training does not use, or
empty for the CPU; it lowers its own CPU priority (nice +10) so CPU training ranks go first.
"""
import contextlib
import json
import os
import shutil
import time

import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin.training import sources
from bert_fin.training.monitor import eval_results as eval_results_lib

POLL_SECS = 1.0  # google's checkpoints_iterator polls once a second too
RESULTS_JSONL = "eval_results.jsonl"
BEST_DIR = "best"
BEST_METRIC = sources.BEST_METRIC  # lower is better
NICE_INCREMENT = 10


class WatchError(ValueError):
  """The watched output_dir is gone and did not come back in --eval_timeout_secs."""


def _latest(output_dir):
  """(newest checkpoint prefix of output_dir or None, a line saying what is missing or None)."""
  if not os.path.isdir(output_dir):
    return None, "--output_dir %s is gone (deleted?): waiting for it to come back" % output_dir
  state = tf.train.get_checkpoint_state(output_dir)
  if not state or not state.model_checkpoint_path:
    return None, None
  path = state.model_checkpoint_path
  if not os.path.isabs(path):
    path = os.path.join(output_dir, path)
  if not tf.io.gfile.exists(path + ".index"):
    return None, ("checkpoint %s, named in %s, is gone: waiting for the next"
                  % (os.path.basename(path), os.path.join(output_dir, "checkpoint")))
  return path, None


def new_checkpoints(output_dir, timeout=None, clock=time.time, sleep=time.sleep):
  """Yields the newest checkpoint of output_dir each time it changes (google's
  checkpoints_iterator), saying once in a line what is missing while it waits; ends after
  `timeout` seconds of waiting without a new one (counted from when the caller asks for the next:
  an evaluation longer than the timeout does not end the watch, as in google's), raising
  WatchError when output_dir is gone then."""
  last, since, said = None, clock(), set()
  while True:
    path, missing = _latest(output_dir)
    if missing and missing not in said:
      tf.logging.warning(missing)
      said.add(missing)
    if path and path != last:
      last = path
      said.clear()
      yield path
      since = clock()
      continue
    if timeout is not None and clock() - since >= timeout:
      if not os.path.isdir(output_dir):
        raise WatchError("--output_dir %s was deleted and did not come back within "
                         "--eval_timeout_secs=%g: continuous evaluation stops" % (output_dir,
                                                                                  timeout))
      return
    sleep(POLL_SECS)


def checkpoint_files(checkpoint_path):
  """The files of one checkpoint prefix (model.ckpt-N.index, .data-*, .meta), sorted."""
  return sorted(tf.io.gfile.glob(checkpoint_path + ".*"))


def read_results(output_dir):
  """The records of output_dir/eval_results.jsonl, oldest first ([] when there is none)."""
  path = os.path.join(output_dir, RESULTS_JSONL)
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def append_result(output_dir, record):
  """Adds one record to eval_results.jsonl (the whole file rewritten atomically)."""
  records = read_results(output_dir) + [record]
  with io_utils.atomic_output(os.path.join(output_dir, RESULTS_JSONL)) as f:
    for item in records:
      f.write(json.dumps(item, sort_keys=True) + "\n")


def best_value(output_dir, metric=BEST_METRIC):
  """`metric` of the checkpoint in output_dir/best (None when there is none, or it lacks it)."""
  path = os.path.join(output_dir, BEST_DIR, eval_results_lib.EVAL_RESULTS_FILE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    values = dict(line.rstrip("\n").split(" = ", 1) for line in f if " = " in line)
  return float(values[metric]) if metric in values else None


def _link_or_copy(source, target):
  """target appears whole: a hard link, or a copy under a temp name renamed into place."""
  with contextlib.suppress(FileNotFoundError):
    os.remove(target)
  try:
    os.link(source, target)
  except OSError:
    with io_utils.atomic_path(target) as tmp:
      shutil.copyfile(source, tmp)


def stage(checkpoint_path, best_dir):
  """Links (or copies) a checkpoint's files into best_dir; returns the staged prefix there. Raises
  NotFoundError when the checkpoint, or the directory best_dir would be made in, is gone."""
  if not os.path.isdir(os.path.dirname(os.path.abspath(best_dir))):
    raise tf.errors.NotFoundError(None, None, "%s is gone" % os.path.dirname(best_dir))
  os.makedirs(best_dir, exist_ok=True)
  files = checkpoint_files(checkpoint_path)
  if not files:
    raise tf.errors.NotFoundError(None, None, "no files for checkpoint %s" % checkpoint_path)
  for path in files:
    _link_or_copy(path, os.path.join(best_dir, os.path.basename(path)))
  return os.path.join(best_dir, os.path.basename(checkpoint_path))


def _remove_checkpoint(prefix):
  for path in checkpoint_files(prefix):
    with contextlib.suppress(FileNotFoundError):
      os.remove(path)


def promote(staged_prefix, result):
  """Makes the staged checkpoint best/'s: its eval block, then the state file (atomic), then the
  previous best's files go."""
  best_dir = os.path.dirname(staged_prefix)
  previous = tf.train.latest_checkpoint(best_dir)
  eval_results_lib.write_results_file(
      os.path.join(best_dir, eval_results_lib.EVAL_RESULTS_FILE), result)
  with io_utils.atomic_output(os.path.join(best_dir, "checkpoint")) as f:
    name = os.path.basename(staged_prefix)
    f.write('model_checkpoint_path: "%s"\nall_model_checkpoint_paths: "%s"\n' % (name, name))
  if previous and os.path.basename(previous) != os.path.basename(staged_prefix):
    _remove_checkpoint(previous)


def _step_of(checkpoint_path):
  """N of a saver's model.ckpt-N prefix (no file read); otherwise its global_step variable."""
  suffix = checkpoint_path.rsplit("-", 1)[-1]
  if suffix.isdigit():
    return int(suffix)
  return int(tf.train.load_variable(checkpoint_path, tf.GraphKeys.GLOBAL_STEP))


def evaluate_checkpoint(estimator, eval_sets, checkpoint_path, output_dir, max_eval_steps,
                        metric=BEST_METRIC):
  """Stages, evaluates (every eval set: [(name, input_fn)]), records one checkpoint; promotes it
  to best/ when its `metric` is lower. Returns the merged result dict."""
  best_dir = os.path.join(output_dir, BEST_DIR)
  staged = stage(checkpoint_path, best_dir)
  started = time.time()
  try:
    result = eval_results_lib.evaluate_sets(estimator, eval_sets, max_eval_steps, staged)
  except BaseException:
    if tf.train.latest_checkpoint(best_dir) != staged:
      _remove_checkpoint(staged)
    raise
  result = {key: value.item() if hasattr(value, "item") else value
            for key, value in result.items()}
  append_result(output_dir, dict(result, checkpoint=os.path.basename(checkpoint_path),
                                 eval_seconds=round(time.time() - started, 3),
                                 time=round(time.time(), 3)))
  eval_results_lib.write_eval_results(output_dir, result)
  best = best_value(output_dir, metric)
  if best is None or result[metric] < best:
    promote(staged, result)
    tf.logging.info("New best checkpoint (%s = %s): %s", metric, result[metric], staged)
  elif tf.train.latest_checkpoint(best_dir) != staged:
    _remove_checkpoint(staged)
  return result


def run(training_run, estimator, eval_sets, checkpoints=None):
  """Watches the run's output_dir until the final step's checkpoint is evaluated or the timeout.

  training_run: training/run.py TrainingRun (output_dir, num_train_steps, max_eval_steps,
  eval_timeout_secs, eval_sets, best_eval_source); estimator: a tf.estimator.Estimator on
  output_dir; eval_sets: [(name, input_fn)] of the eval sets; checkpoints: iterable of checkpoint
  prefixes (default new_checkpoints on output_dir; tests pass their own). Returns the last result dict (None when nothing was
  evaluated).
  """
  output_dir = training_run.settings.output.output_dir
  with contextlib.suppress(OSError):
    os.nice(NICE_INCREMENT)
  if checkpoints is None:
    checkpoints = new_checkpoints(output_dir, timeout=training_run.settings.mode.eval_timeout_secs)
  done = {record["global_step"] for record in read_results(output_dir)}
  tf.logging.info("***** Continuous evaluation of %s until step %d *****", output_dir,
                  training_run.settings.optimizer.num_train_steps)
  metric = sources.best_metric(training_run.decided.eval_sets,
                              training_run.settings.mode.best_eval_source)
  last = None
  for checkpoint_path in checkpoints:
    try:
      step = _step_of(checkpoint_path)
      if step not in done:
        last = evaluate_checkpoint(estimator, eval_sets, checkpoint_path, output_dir,
                                   training_run.settings.mode.max_eval_steps, metric)
        done.add(step)
    except (tf.errors.OpError, OSError) as e:  # rotated away or deleted before or while read
      tf.logging.warning("Checkpoint %s vanished before or while it was evaluated (%s): waiting "
                         "for the next", checkpoint_path, str(e).splitlines()[0])
      continue
    if step >= training_run.settings.optimizer.num_train_steps:
      tf.logging.info("Evaluated the final step %d: continuous evaluation done", step)
      break
  else:
    tf.logging.info("No new checkpoint for %s s: continuous evaluation stops",
                    training_run.settings.mode.eval_timeout_secs)
  return last
