"""Packed records end to end: tiny records -> tools/pack_records -> run_pretraining under
`mpirun -np 2` (Horovod, CPU), detected without a flag; the log says how many sequences a pack
and an update hold and reports sentences/s; rank 0 evaluates with google's eval block.
(That every rank ends with rank 0's weights is tests/test_run_pretraining_mpi.py's subject.)"""
import json
import re
import subprocess

import pytest

from bert_fin.cli import pack_records
from bert_fin.launch import mpirun_command, python_command

from helpers import pretraining_runs as pt  # the mpirun tests' flags: SEQ 32, P 5, 4 steps
import tiny_data

SEQ, P, STEPS = pt.SEQ, pt.P, pt.MPI_STEPS


@pytest.mark.mpi
@pytest.mark.slow
def test_pack_then_train_under_mpirun_np2(tmp_path):
  tiny_data.write_records(str(tmp_path / "data"), num_files=2, per_file=24, seq_len=SEQ,
                          max_predictions=P, seed=3, min_len=6)
  prefix = str(tmp_path / "packed" / "train")
  assert pack_records.main(["--input_file", str(tmp_path / "data" / "part-*"), "--output_file",
                            prefix, "--num_output_files", "2", "--max_sequences_per_pack",
                            "3"]) == 0
  stats = json.load(open(prefix + ".stats.json"))
  assert stats["sequences_out"] == 48 and stats["average_sequences_per_pack"] > 1.3
  flags = pt.mpi_flags(tmp_path, prefix + "-*.tfrecord")
  env = pt.mpi_env(tmp_path)
  proc = subprocess.run(mpirun_command(2, python_command(pt.RUN_PRETRAINING, *flags)),
                        capture_output=True, text=True, timeout=900, env=env)
  assert proc.returncode == 0, "mpirun failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-5000:])
  # start-up: sequences per pack and per update (2 packs x 2 workers)
  match = re.search(r"packed records: ([\d.]+) sequences a pack on average .*: 4 packs = "
                    r"~(\d+) sequences per update", proc.stdout)
  assert match, proc.stdout[-3000:]
  assert float(match.group(1)) > 1.3 and int(match.group(2)) >= 5
  assert re.search(r"step \d+: .*sentences/s = ", proc.stdout), proc.stdout[-3000:]
  assert proc.stdout.count("***** Eval results *****") == 1
  # quiet mode: rank 1's INFO lines (the same as rank 0's) are not printed
  log = proc.stdout + proc.stderr
  assert log.count("***** Running training *****") == 1, log[-3000:]
  with open(str(tmp_path / "out" / "eval_results.txt"), encoding="utf-8") as f:
    text = f.read()
  assert "global_step = %d\n" % STEPS in text
  accuracy = float(re.search(r"next_sentence_accuracy = ([\d.]+)", text).group(1))
  assert 0.0 <= accuracy <= 1.0
