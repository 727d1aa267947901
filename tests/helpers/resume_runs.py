"""Helpers of the exact-resume tests: run_pretraining command lines, SIGKILL after the first
checkpoint, and every variable of a checkpoint."""
import os
import re
import subprocess
import time

import tiny_data  # tests/fixtures/training, on sys.path by conftest.py

from helpers import REPO
from helpers import ranks

RUN_PRETRAINING = os.path.join(REPO, "run_pretraining.py")
SEQ, P = 32, 5
CHECKPOINT_INDEX = re.compile(r"^model\.ckpt-(\d+)\.index$")


def write_dropout_config(path):
  """The tiny config with dropout on: resuming must redraw the same masks."""
  return tiny_data.write_config(path, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


def flags(config, input_glob, output_dir, steps, pipeline="tfdata", save_steps=10, extra=()):
  """input_glob: the --input_file, or a list of input flags (a mixture's --input_source=...)."""
  inputs = input_glob if isinstance(input_glob, list) else ["--input_file=%s" % input_glob]
  return (["--do_train", "--deterministic", "--seed=7", "--input_pipeline=%s" % pipeline,
           "--bert_config_file=%s" % config] + inputs +
          ["--output_dir=%s" % output_dir, "--max_seq_length=%d" % SEQ,
           "--max_predictions_per_seq=%d" % P, "--train_batch_size=4",
           "--num_accumulation_steps=2", "--learning_rate=1e-3", "--num_warmup_steps=0",
           "--num_train_steps=%d" % steps, "--save_checkpoints_steps=%d" % save_steps,
           "--log_every_n_steps=1000", "--intra_op_parallelism_threads=1",
           "--inter_op_parallelism_threads=1"] + list(extra))


def env():
  return dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")


def run(command, timeout=600):
  proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env())
  assert proc.returncode == 0, "%s failed:\n%s\n%s" % (command, proc.stdout[-3000:],
                                                       proc.stderr[-6000:])
  return proc


def checkpoint_steps(output_dir):
  if not os.path.isdir(output_dir):
    return []
  return sorted(int(m.group(1)) for m in map(CHECKPOINT_INDEX.match, os.listdir(output_dir)) if m)


def kill_after_first_checkpoint(command, output_dir, final_step, timeout=600):
  """Starts command in its own session and SIGKILLs every process of the session (mpirun and its
  ranks: Open MPI puts each rank in a process group of its own, so killing mpirun's group would
  leave the ranks training) as soon as a checkpoint after step 0 exists; returns the checkpoint
  steps found after the kill. Fails if the run ended first (then the test would prove nothing)."""
  proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env(),
                          start_new_session=True)
  deadline = time.time() + timeout
  try:
    while not [s for s in checkpoint_steps(output_dir) if s > 0]:
      assert proc.poll() is None, "ended before its first checkpoint: %s" % proc.stderr.read()[-4000:]
      assert time.time() < deadline, "no checkpoint after %d s" % timeout
      time.sleep(0.02)
  finally:
    ranks.kill_session(proc.pid)
    proc.wait()
    proc.stderr.close()
  steps = checkpoint_steps(output_dir)
  assert max(steps) < final_step, "finished before the kill: %s" % steps
  return steps


def checkpoint_variables(output_dir):
  """{name: numpy array} of every variable in the latest checkpoint of output_dir."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def assert_identical(left, right):
  assert sorted(left) == sorted(right)
  different = [n for n in left if left[n].tobytes() != right[n].tobytes()]
  assert not different, "differ: %s" % different
