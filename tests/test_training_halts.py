"""The command lines of training that cannot go on (issue 45's cases, end to end): mixture weights
the schedule cannot represent refused before anything is written; a diverging run
(--learning_rate=1e30) stopped in one line, exit 2, its checkpoint kept and no lock left; the
corrected command then trains in the same directory, past the data_order.json and lock file a
crashed start left there; run_classifier's divergence is one line too. (The pure checks: the
tests of progress_guard, mixture, flag_table, fisher_file and run_lock.)"""
import json
import os
import random
import subprocess
import sys

import pytest

from helpers import REPO
from helpers import modeling_toys as mt
from helpers import pretraining_runs as pt
from helpers import tokenizer_vocab
from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_jsonl
import tiny_data

from bert_fin.input import stream
from bert_fin.training import run_lock

pytestmark = pytest.mark.slow  # three TensorFlow programs train (a few seconds each)


def _errors(proc, program):
  """The `PROGRAM: error:` lines of stderr, after asserting no traceback."""
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  return [line for line in proc.stderr.splitlines() if line.startswith(program + ": error: ")]


def _mixture_argv(tmp_path, records, weight, **flags):
  return pt.tiny_argv(tmp_path, None, do_train=True, num_train_steps=3,
                      save_checkpoints_steps=3, log_every_n_steps=1, **flags) + [
                          "--input_source=a=%s:%s" % (records["a"], weight),
                          "--input_source=b=%s:1" % records["b"]]


def test_a_diverging_run_stops_in_one_line_and_the_corrected_command_trains_in_its_directory(
    tmp_path):
  records = {}
  for name, seed in (("a", 1), ("b", 2)):
    tiny_data.write_records(str(tmp_path / name), 2, 8, seq_len=pt.SEQ, max_predictions=pt.P,
                            seed=seed, prefix=name)
    records[name] = str(tmp_path / name / "*.tfrecord")
  out = tmp_path / "out"
  # Weights beyond the schedule: one line, before anything is written.
  proc = pt.run_cli(tmp_path, _mixture_argv(tmp_path, records, "1e308"))
  assert proc.returncode == 2
  assert _errors(proc, "run_pretraining.py") == [
      "run_pretraining.py: error: --input_source a:1e+308, b:1: the largest weight is 1e+308 "
      "times the smallest, more than the 1e+06 a mixture's schedule represents: give weights "
      "within a factor 1e+06 of each other"]
  assert not out.exists()
  # What such a crash left before: its data order and the lock file, no checkpoint.
  out.mkdir()
  (out / stream.ORDER_FILE).write_text(json.dumps({
      "seed": 1234, "num_workers": 1, "batch_size": 4, "sharding": "files", "start_position": 0,
      "sources": [{"name": name, "input_file": records[name], "weight": weight, "seed": 1,
                   "epochs": []} for name, weight in (("a", 1e308), ("b", 1.0))]}))
  (out / run_lock.LOCK_FILE).write_text("4242\n")
  # The weights corrected, the learning rate not: the first update throws the weights out.
  proc = pt.run_cli(tmp_path, _mixture_argv(tmp_path, records, "1", learning_rate=1e30))
  assert proc.returncode == 2, proc.stderr[-3000:]
  errors = _errors(proc, "run_pretraining.py")
  assert len(errors) == 1 and errors[0].startswith(
      "run_pretraining.py: error: training diverged at step 1: the loss is nan; lower "
      "--learning_rate (1e+30)"), errors
  assert os.path.exists(str(out / "model.ckpt-0.index"))  # the checkpoint kept as it was
  assert not os.path.exists(str(out / "model.ckpt-1.index"))
  assert not (out / run_lock.LOCK_FILE).exists()
  # Corrected: trains in that directory (no checkpoint has read data: nothing to resume).
  proc = pt.run_cli(tmp_path, _mixture_argv(tmp_path, records, "1"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert pt.step_lines(proc.stdout) == [1, 2, 3]
  assert not (out / run_lock.LOCK_FILE).exists()
  saved = json.loads((out / stream.ORDER_FILE).read_text())
  assert [s["weight"] for s in saved["sources"]] == [1.0, 1.0]


def test_run_classifier_divergence_is_one_line_not_a_traceback(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  write_jsonl(data / "train.jsonl", toy_rows(random.Random(7), 64))
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=1, intermediate_size=64, max_position_embeddings=32)
  (tmp_path / "bert_config.json").write_text(config.to_json_string())
  command = [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=jsonl",
             "--data_dir=%s" % data, "--bert_config_file=%s" % (tmp_path / "bert_config.json"),
             "--vocab_file=" + tokenizer_vocab.write_vocab(tmp_path),
             "--output_dir=%s" % (tmp_path / "out"), "--do_train", "--max_seq_length=16",
             "--train_batch_size=16", "--num_train_steps=20", "--learning_rate=1e30",
             "--seed=3", "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"]
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1")
  proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
  assert proc.returncode == 2, proc.stderr[-3000:]
  errors = _errors(proc, "run_classifier.py")
  assert len(errors) == 1 and errors[0].startswith(
      "run_classifier.py: error: training diverged at step "), errors
  assert "lower --learning_rate (1e+30)" in errors[0]
