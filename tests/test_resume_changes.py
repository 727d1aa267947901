"""Resuming a run whose inputs or flags changed, through the command line: a changed --input_file
is refused in one line naming +N/-M files (not read silently from data_order.json), and
--data_order=restart accepts it; a run resumes from another working directory; every resume
refusal is one line with exit status 2; DALI's indexes go to a cache under --output_dir (or
--index_dir), never beside the data. (The step lines and the one training call of a run with many
epochs: tests/test_run_pretraining.py.)"""
import json
import os
import shutil

import pytest

from helpers import pretraining_runs as pt  # noqa: E402
from helpers.pretraining_runs import P, SEQ, tiny_data  # noqa: E402

ORDER_FILE = "data_order.json"


def _argv(base, input_file, output_dir, steps, **extra):
  """Relative paths, as a user types them in `base`."""
  flags = dict(bert_config_file="bert_config.json", input_file=input_file,
               output_dir=output_dir, do_train=True, num_train_steps=steps,
               save_checkpoints_steps=2, seed=7)
  flags.update(extra)
  return pt.tiny_argv(base, **flags)


def _refusal(proc):
  """The one error line of a refused run (asserting exit 2, one line, no traceback)."""
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  lines = [line for line in proc.stderr.splitlines() if "error:" in line]
  assert len(lines) == 1 and lines[0].startswith("run_pretraining.py: error: "), lines
  return lines[0]


def _checkpoints(output_dir):
  return sorted(n for n in os.listdir(output_dir) if n.startswith("model.ckpt"))


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
  """A base directory with records/ (seq 32), wide/ (seq 64) and out/: 2 updates of a 4-update
  run (checkpoint at step 2, mid-epoch), started from `base` with relative paths."""
  base = tmp_path_factory.mktemp("base")
  tiny_data.write_records(str(base / "records"), num_files=2, per_file=16, seq_len=SEQ,
                          max_predictions=P, seed=3)
  tiny_data.write_records(str(base / "wide"), num_files=2, per_file=16, seq_len=64,
                          max_predictions=P, seed=4)
  proc = pt.run_cli(base, _argv(base, "records/*.tfrecord", "out", 2))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return base


def _copy(base, name):
  shutil.copytree(str(base / "out"), str(base / name))
  return str(base / name)


def test_another_input_file_is_refused_naming_the_change_and_restart_accepts_it(two_steps):
  base = two_steps
  out = _copy(base, "out_changed")
  before = (_checkpoints(out), open(os.path.join(out, ORDER_FILE)).read())
  argv = _argv(base, "wide/*.tfrecord", "out_changed", 4, max_seq_length=64)
  line = _refusal(pt.run_cli(base, argv))
  assert "+2/-2" in line and "--data_order=restart" in line
  assert "max_seq_length=32" in line and "max_seq_length=64" in line  # the records' layout
  assert (_checkpoints(out), open(os.path.join(out, ORDER_FILE)).read()) == before
  proc = pt.run_cli(base, argv + ["--data_order=restart"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "model.ckpt-4.index" in _checkpoints(out)
  with open(os.path.join(out, ORDER_FILE), encoding="utf-8") as f:
    order = json.load(f)
  assert order["start_position"] == 2 and order["seed"] == 7
  assert all("/wide/" in path for epoch in order["epochs"] for path in epoch["files"])
  assert os.path.exists(os.path.join(out, "data_order-until-step-2.json"))


def test_a_run_resumes_from_another_working_directory(two_steps):
  base = two_steps
  _copy(base, "out_moved")
  (base / "elsewhere").mkdir()
  argv = _argv(base, "../records/*.tfrecord", "../out_moved", 4,
               bert_config_file="../bert_config.json")
  proc = pt.run_cli(base / "elsewhere", argv)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "model.ckpt-4.index" in _checkpoints(str(base / "out_moved"))
  with open(str(base / "out_moved" / ORDER_FILE), encoding="utf-8") as f:
    files = [path for epoch in json.load(f)["epochs"] for path in epoch["files"]]
  assert files and all(os.path.isabs(path) and os.path.exists(path) for path in files)


def test_a_resume_with_other_data_flags_is_one_line_with_exit_status_2(two_steps):
  base = two_steps
  out = _copy(base, "out_flags")
  line = _refusal(pt.run_cli(base, _argv(base, "records/*.tfrecord", "out_flags", 4, seed=8,
                                         train_batch_size=2)))
  assert "batch_size 4 -> 2" in line and "seed 7 -> 8" in line and "--data_order=restart" in line
  assert _checkpoints(out) == _checkpoints(str(base / "out"))


def test_dali_indexes_go_to_the_output_dirs_cache_not_beside_the_data(two_steps, tmp_path):
  pytest.importorskip("nvidia.dali.plugin.tf", reason="nvidia-dali TF plugin not installed")
  data = tmp_path / "data"
  shutil.copytree(str(two_steps / "records"), str(data))
  before = sorted(os.listdir(str(data)))
  argv = pt.tiny_argv(tmp_path, str(data / "*.tfrecord"), do_train=True, num_train_steps=2,
                      input_pipeline="dali")
  proc = pt.run_cli(tmp_path, argv)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert sorted(os.listdir(str(data))) == before  # nothing written beside the data
  cache = tmp_path / "out" / "dali_index"
  assert sorted(os.listdir(str(cache))) == sorted(
      [name + ".idx" for name in before] + [name + ".crc32c.idx" for name in before])
  run = pt.resolve(tmp_path, str(data / "*.tfrecord"), input_pipeline="dali",
                   output_dir=str(tmp_path / "out2"), index_dir=str(tmp_path / "indexes"))
  assert run.decided.index_dir == str(tmp_path / "indexes")
  assert len(os.listdir(run.decided.index_dir)) == 2 * len(before)
  assert not os.path.exists(str(tmp_path / "out2"))  # resolving writes nothing but the cache
