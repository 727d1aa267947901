"""The environment doctor: topology parsing, the DALI input_fn probe, the 2-rank allreduce probe
(run for real on CPU ranks, GPU-host decisions with patched detection) and the full report."""
import json
import os
import re
import subprocess
import sys
import uuid

import numpy as np
import pytest

from bert_fin import doctor
from bert_fin import doctor_probes
from bert_fin import launch

# `nvidia-smi topo -m` of a dual-socket box: GPU0-1 on NVLink, GPU2-3 on one PCIe switch,
# everything else across the host bridge or the socket interconnect.
TOPOLOGY = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV2\tNODE\tSYS\t0-15\t0
GPU1\tNV2\t X \tNODE\tSYS\t0-15\t0
GPU2\tNODE\tNODE\t X \tPIX\t16-31\t1
GPU3\tSYS\tSYS\tPIX\t X \t16-31\t1

Legend:
  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
"""


def test_parse_topology_reads_every_gpu_pair():
  links = doctor.parse_topology(TOPOLOGY)
  assert links[("GPU0", "GPU1")] == "NV2"
  assert links[("GPU2", "GPU3")] == "PIX"
  assert links[("GPU3", "GPU0")] == "SYS"
  assert len(links) == 12  # 4 GPUs, ordered pairs without self


def test_slow_pairs_respect_the_gpus_in_use():
  links = doctor.parse_topology(TOPOLOGY)
  assert doctor.slow_gpu_pairs(links, {"GPU0", "GPU1"}) == []
  assert doctor.slow_gpu_pairs(links, {"GPU2", "GPU3"}) == []
  slow = doctor.slow_gpu_pairs(links, {"GPU0", "GPU3"})
  assert slow == [("GPU0", "GPU3", "SYS")]
  assert len(doctor.slow_gpu_pairs(links)) == 4  # 0-2, 0-3, 1-2, 1-3


def test_format_table_shows_fix_lines():
  rows = [doctor.Row("horovod", doctor.FAIL, "import failed", "make install")]
  text = doctor.format_table(rows)
  assert "FAIL" in text and "-> make install" in text


def test_doctor_passes_on_this_machine():
  """The installed environment must have TF, estimator, XLA, Horovod (TF, MPI, Gloo) and DALI."""
  proc = subprocess.run([sys.executable, "-m", "bert_fin.doctor"], capture_output=True, text=True,
                        timeout=600)
  out = proc.stdout
  assert proc.returncode == 0, out + proc.stderr[-2000:]
  assert "tensorflow" in out and "2.15.1" in out
  for line_start, must_have in (("  frameworks", "tensorflow"), ("  controllers", "MPI, Gloo"),
                                ("DALI + TF plugin", "run_pretraining's input_fn"),
                                ("XLA JIT", "compiled"),
                                ("data kernel (C)", "built")):
    line = next(l for l in out.splitlines() if l.startswith(line_start))
    assert must_have in line and " ok " in line, line
  # The allreduce row follows the GPUs the report found: skipped below 2 GPUs (CPU hosts, CI),
  # the NCCL probe run and passed on a GPU host whose Horovod has NCCL.
  allreduce = next(l for l in out.splitlines() if l.startswith(doctor.ALLREDUCE_CHECK))
  num_gpus = _gpus_reported(out)
  device, skipped = doctor.allreduce_plan(
      num_gpus, doctor.horovod_nccl_built() if num_gpus >= doctor.ALLREDUCE_RANKS else None)
  if device is None:
    assert " info " in allreduce and skipped in allreduce, allreduce
  else:
    assert " ok " in allreduce and "NCCL" in allreduce and "ran)" in allreduce, allreduce


def _gpus_reported(report):
  """The GPU count of the report's "GPUs (TensorFlow)" row ("none: ..." or "2: /physical...")."""
  line = next(l for l in report.splitlines() if l.startswith("GPUs (TensorFlow)"))
  counted = re.search(r"\s(\d+): /physical_device", line)
  return int(counted.group(1)) if counted else 0


def test_core_packages_come_from_the_constraints_and_all_import_here():
  rows = doctor.check_core_dependencies()
  names = [r.check.strip() for r in rows[1:]]
  assert names == [name for name, _ in doctor.pinned_group("core")]
  assert {"numpy", "jieba", "tokenizers", "beautifulsoup4", "tqdm"} <= set(names)
  assert rows[0].status == doctor.OK and all(r.status != doctor.FAIL for r in rows)


def test_a_missing_core_package_is_a_fail_row_with_the_fix_not_a_traceback(monkeypatch):
  """jieba made unimportable (sys.modules entry None): the doctor reports, it does not crash."""
  for name in [m for m in sys.modules if m == "jieba" or m.startswith(("jieba.", "bert_fin.data",
                                                                        "bert_fin.text"))]:
    monkeypatch.delitem(sys.modules, name)
  monkeypatch.setitem(sys.modules, "jieba", None)
  rows = {r.check.strip(): r for r in doctor.check_core_dependencies()}
  assert rows["core packages"].status == doctor.FAIL
  assert rows["jieba"].status == doctor.FAIL
  assert "pip install 'jieba==%s'" % doctor.pinned_version("jieba") in rows["jieba"].fix
  assert rows["numpy"].status == doctor.OK
  monkeypatch.setitem(sys.modules, "bert_fin.data", None)  # a package whose import fails
  kernel_row = doctor.check_data_kernel()
  assert kernel_row.status == doctor.FAIL and "cannot be imported" in kernel_row.detail
  text = doctor.format_table(list(rows.values()) + [kernel_row])
  assert "FAIL" in text and "-> pip install 'jieba==" in text


# --- DALI probe: run_pretraining's DALI input_fn, checked against records/schema.py ---------------

def written_batch(expected):
  """The decoded batch the records written should give (rows in written order)."""
  wanted = doctor_probes.expected_shapes_and_dtypes(len(expected))
  rows = list(expected.values())
  return {name: np.array([row[name] for row in rows], dtype=dtype).reshape(shape)
          for name, (shape, dtype) in wanted.items()}


def test_dali_batch_check_accepts_the_written_records_and_names_each_difference(tmp_path):
  _, expected = doctor_probes.write_probe_shard(str(tmp_path))
  assert os.path.isfile(str(tmp_path / "probe-00000-of-00001.tfrecord.idx"))
  batch = written_batch(expected)
  assert doctor_probes.feature_problems(batch, expected, len(expected)) == []
  shuffled = {name: value[::-1] for name, value in batch.items()}  # training shuffles: any order
  assert doctor_probes.feature_problems(shuffled, expected, len(expected)) == []
  bad = dict(batch, masked_lm_weights=batch["masked_lm_weights"].astype(np.int32))
  assert doctor_probes.feature_problems(bad, expected, 4) == [
      "masked_lm_weights is int32 (4, 3), expected float32 (4, 3)"]
  bad = dict(batch, input_len=batch["input_len"].reshape(4, 1))
  assert "input_len is int32 (4, 1)" in doctor_probes.feature_problems(bad, expected, 4)[0]
  missing = {k: v for k, v in batch.items() if k != "segment_ids"}
  assert "features" in doctor_probes.feature_problems(missing, expected, 4)[0]
  changed = {k: v.copy() for k, v in batch.items()}
  changed["segment_ids"][2, 0] = 1
  assert doctor_probes.feature_problems(changed, expected, 4) == [
      "row 2: segment_ids = %s, written %s" % (changed["segment_ids"][2].tolist(),
                                               batch["segment_ids"][2].tolist())]


def test_dali_probe_reads_through_the_training_input_fn_and_sees_a_broken_decode(tmp_path,
                                                                                monkeypatch):
  """In-process: the probe passes; with schema.tf_decode_features (what input/dali.py maps over
  DALI's output) made to drop input_len, it fails naming the feature."""
  pytest.importorskip("nvidia.dali.plugin.tf", reason="nvidia-dali TF plugin not installed")
  from bert_fin.records import schema
  (tmp_path / "a").mkdir()
  summary = doctor_probes.run_dali_probe(str(tmp_path / "a"))
  assert "run_pretraining's input_fn" in summary and "batch of 4, 7 features" in summary
  real_decode = schema.tf_decode_features
  monkeypatch.setattr(schema, "tf_decode_features", lambda parsed: {
      k: v for k, v in real_decode(parsed).items() if k != schema.INPUT_LEN})
  (tmp_path / "b").mkdir()
  with pytest.raises(RuntimeError, match="input_len"):
    doctor_probes.run_dali_probe(str(tmp_path / "b"))


# --- allreduce probe ----------------------------------------------------------------------------

def test_allreduce_probe_runs_two_cpu_ranks_under_mpirun():
  """The probe's real path (mpirun from launch.py, distributed.py's Horovod allreduce in a TF1
  session), with CPU tensors instead of GPU ones: MPI moves the data here."""
  row = doctor.run_allreduce_probe("cpu")
  assert row.status == doctor.OK, row
  assert row.detail.startswith("2 ranks on device:CPU:0, via MPI: mean 1.5"), row.detail


def fake_gpus(monkeypatch, count):
  import tensorflow as tf
  real_list = tf.config.list_physical_devices
  monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: (
      [tf.config.PhysicalDevice("/physical_device:GPU:%d" % i, "GPU") for i in range(count)]
      if kind == "GPU" else real_list(kind)))


@pytest.mark.parametrize("num_gpus", [0, 1, 3])
def test_the_report_check_reads_the_gpu_count_of_the_gpu_row(monkeypatch, num_gpus):
  """_gpus_reported (test_doctor_passes_on_this_machine's view of the host) reads check_gpus'
  real row, whatever the host has."""
  fake_gpus(monkeypatch, num_gpus)
  row, detected = doctor.check_gpus()
  assert detected == num_gpus and _gpus_reported(doctor.format_table([row])) == num_gpus


@pytest.mark.parametrize("num_gpus, nccl_built, outcome", [
    (0, True, "skipped (no GPU)"), (1, True, "skipped (1 GPU)"), (2, True, "ran gpu"),
    (8, True, "ran gpu"), (4, False, "skipped (Horovod has no NCCL"),
    (4, None, "skipped (horovod cannot be imported")])
def test_gpu_host_decision(monkeypatch, num_gpus, nccl_built, outcome):
  """GPUs as TensorFlow reports them (patched) decide: no probe below 2 GPUs, the GPU probe with
  NCCL from 2 up."""
  fake_gpus(monkeypatch, num_gpus)
  monkeypatch.setattr(doctor, "horovod_nccl_built", lambda: nccl_built)
  monkeypatch.setattr(doctor, "run_allreduce_probe", lambda device: doctor.Row(
      doctor.ALLREDUCE_CHECK, doctor.OK, "ran " + device, ""))
  _, detected = doctor.check_gpus()
  assert detected == num_gpus
  row = doctor.check_allreduce(detected)
  assert row.detail.startswith(outcome), row
  assert row.status == (doctor.OK if outcome.startswith("ran") else doctor.INFO)


def test_allreduce_command_binds_gpu_ranks_and_asks_nccl_to_log():
  environ = {"PATH": os.environ["PATH"], "NCCL_SOCKET_IFNAME": "eth0"}
  argv, env = doctor.allreduce_command("gpu", environ)
  assert argv[:3] == [launch.mpirun_command(2, [])[0], "-np", "2"]
  assert "--bind-to socket" in " ".join(argv)
  assert env["NCCL_DEBUG"] == "INFO" and "-x NCCL_DEBUG" in " ".join(argv)
  assert "-x NCCL_SOCKET_IFNAME" in " ".join(argv) and "-x PYTHONPATH" in " ".join(argv)
  assert argv[-4:] == ["-m", "bert_fin.doctor_probes", "allreduce", "gpu"]
  argv, env = doctor.allreduce_command("cpu", environ)
  assert "--bind-to none" in " ".join(argv) and "NCCL_DEBUG" not in env
  assert argv[-1] == "cpu"


GPU_SUMMARY = json.dumps({"ranks": 2, "device": "device:GPU:0", "result": 1.5, "expected": 1.5,
                          "operations": "NCCL", "nccl_built": 1})
NCCL_LOG = ("h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
            "h:1:1 [0] NCCL INFO NCCL version 2.16.5+cuda12.2\n")


def test_allreduce_rows_from_the_probe_outcome():
  row = doctor.allreduce_row("gpu", 0, NCCL_LOG + GPU_SUMMARY + "\n", "")
  assert row.status == doctor.OK and "device:GPU:0" in row.detail and "NCCL 2.16.5" in row.detail
  row = doctor.allreduce_row("gpu", 0, GPU_SUMMARY + "\n", "")  # right sum, but no NCCL ran
  assert row.status == doctor.FAIL and "no NCCL" in row.detail and "HOROVOD_GPU" in row.fix
  row = doctor.allreduce_row("cpu", 1, "", "Traceback (most recent call last):\n  ...\n"
                             "RuntimeError: rank 1: allreduce gave [2.], expected 1.5\n"
                             "-----\nmpirun detected that one or more processes exited\n")
  assert row.status == doctor.FAIL and row.detail.endswith("expected 1.5"), row
  row = doctor.allreduce_row("gpu", None, "", "", timeout=7)
  assert row.status == doctor.FAIL and "killed after 7 s" in row.detail
  assert row.fix == doctor.ALLREDUCE_HANG_FIX


def test_a_hung_probe_is_killed_with_its_ranks_and_reported(monkeypatch):
  marker = "bert_fin_hang_" + uuid.uuid4().hex
  hang = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)")
  monkeypatch.setattr(doctor, "allreduce_command", lambda device: (
      launch.mpirun_command(2, [sys.executable, "-c", hang, marker]), dict(os.environ)))
  row = doctor.run_allreduce_probe("cpu", timeout=3)
  assert row.status == doctor.FAIL and "hung: killed after 3 s" in row.detail
  assert "NCCL_DEBUG=INFO" in row.fix
  left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
  assert left == "", "ranks outlived the probe: " + left


def test_horovod_frameworks_are_the_bindings_that_were_built(tmp_path):
  """horovod.torch imports without its library, so asking Horovod names torch for a build made
  with HOROVOD_WITHOUT_PYTORCH=1; the doctor looks for each binding's library file."""
  import sysconfig  # pylint: disable=import-outside-toplevel
  suffix = sysconfig.get_config_var("EXT_SUFFIX")
  for name in ("tensorflow", "torch", "mxnet"):
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
  (tmp_path / "tensorflow" / ("mpi_lib" + suffix)).write_bytes(b"")
  assert doctor.horovod_frameworks(str(tmp_path)) == ["tensorflow"]
  (tmp_path / "torch" / ("mpi_lib_v2" + suffix)).write_bytes(b"")
  assert doctor.horovod_frameworks(str(tmp_path)) == ["tensorflow", "torch"]


def test_torch_is_not_listed_where_it_cannot_even_be_imported():
  try:
    import torch  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    pytest.skip("torch is installed here")
  except ImportError:
    pass
  frameworks = next(row for row in doctor.check_horovod(0) if row.check == "  frameworks")
  assert frameworks.detail == "tensorflow" and frameworks.status == doctor.OK
