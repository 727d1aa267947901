"""The environment doctor: topology parsing and the full report on this machine."""
import subprocess
import sys

from bert_fin import doctor

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
                                ("DALI + TF plugin", "read 3 records on CPU"), ("XLA JIT", "compiled"),
                                ("data kernel (C)", "built")):
    line = next(l for l in out.splitlines() if l.startswith(line_start))
    assert must_have in line and " ok " in line, line


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
