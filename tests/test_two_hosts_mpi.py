"""Several hosts, faked on this machine: two network + UTS namespaces joined by a veth pair, Open
MPI starting the second host's daemon through an rsh agent that enters its namespace instead of ssh
(tests/helpers/fake_cluster.py). Horovod sees 2 hosts of one rank each (cross_size 2, local_size
1), the ranks talk TCP over the veth only, the filesystem is shared (as NFS would be). Checked:

  - run_pretraining --horovod on the two hosts ends with the weights (and optimizer state) of the
    same job on one host (mpirun -np 2), bit for bit, after rank 1 was SIGKILLed on the second host
    mid-run: the kill ends the whole job within KILL_ENDS_JOB_WITHIN seconds (no rank left waiting
    in an allreduce) and the same command run again resumes exactly;
  - create_pretraining_data on the two hosts, rank 1 SIGKILLed on the second host midway (the job
    ends) and the same command run again, writes the bytes one process writes.

Skipped where network namespaces cannot be made (not root, no ip/unshare, a sandbox refusing
`ip netns add`)."""
import json
import os
import signal
import subprocess
import time

import pytest

from helpers import resume_runs as rt
import tiny_data
from bert_fin.launch import mpirun_command, python_command
from helpers import MPI_SCRIPTS, REPO
from helpers import fake_cluster
from helpers import data_tools
from helpers.data_tools import file_tree
from helpers.ranks import rank_pid


STEPS, SAVE_STEPS = 8, 4
KILL_ENDS_JOB_WITHIN = 60  # seconds from the SIGKILL of rank 1 to mpirun's exit
REPORT_TOPOLOGY = os.path.join(MPI_SCRIPTS, "report_topology.py")


def test_the_cluster_is_skipped_with_the_reason_where_it_cannot_be_made(monkeypatch):
  monkeypatch.setattr(os, "geteuid", lambda: 1000)
  with pytest.raises(fake_cluster.Unavailable, match="network namespaces need root"):
    fake_cluster.FakeCluster.create()
  monkeypatch.setattr(os, "geteuid", lambda: 0)
  monkeypatch.setattr(fake_cluster.shutil, "which",
                      lambda tool: None if tool == "unshare" else "/usr/bin/" + tool)
  assert fake_cluster.unavailable_reason() == (
      "unshare not found (iproute2, util-linux, openmpi-bin)")


@pytest.fixture(scope="module")
def cluster():
  try:
    made = fake_cluster.FakeCluster.create()
  except fake_cluster.Unavailable as e:
    pytest.skip("no fake two-host cluster here: %s" % e)
  try:
    yield made
  finally:
    made.remove()


def _wait_bounded(proc):
  """proc's exit status; fails the test if it still runs KILL_ENDS_JOB_WITHIN seconds on."""
  try:
    return proc.wait(timeout=KILL_ENDS_JOB_WITHIN)
  except subprocess.TimeoutExpired:
    pytest.fail("the job still runs %d s after rank 1 was killed on the second host"
                % KILL_ENDS_JOB_WITHIN)


def _kill_rank_1_after_first_checkpoint(cluster, command, env, output_dir):
  """Starts command, SIGKILLs rank 1 (on the second host) once a checkpoint after step 0 exists;
  returns (mpirun's exit status, seconds from the kill to mpirun's exit)."""
  proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                          start_new_session=True)
  try:
    deadline = time.time() + 600
    while not [s for s in rt.checkpoint_steps(output_dir) if s > 0]:
      assert proc.poll() is None, "the job ended before its first checkpoint"
      assert time.time() < deadline, "no checkpoint after 600 s"
      time.sleep(0.02)
    pid = rank_pid(1, "run_pretraining.py", cluster.pids(cluster.hosts[1]))
    assert pid, "rank 1 is not running on the second host (did the job end before the kill?)"
    os.kill(pid, signal.SIGKILL)
    killed = time.time()
    return _wait_bounded(proc), time.time() - killed
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()


def _reports(directory):
  """The report_topology.py reports of ranks 0 and 1."""
  reports = []
  for rank in range(2):
    with open(os.path.join(str(directory), "topology-%d.json" % rank), encoding="utf-8") as f:
      reports.append(json.load(f))
  return reports


def _placement(reports):
  return [(r["hostname"], r["mpi"]["rank"], r["mpi"]["size"], r["mpi"]["local_size"])
          for r in reports]


ONE_RANK_ON_EACH_HOST = [("hosta", 0, 2, 1), ("hostb", 1, 2, 1)]


@pytest.mark.mpi
@pytest.mark.slow
def test_training_on_two_hosts_equals_one_host_after_a_rank_killed_on_the_second(cluster,
                                                                                 tmp_path):
  pytest.importorskip("horovod.tensorflow", reason="horovod[tensorflow] not installed")
  tiny_data.write_records(str(tmp_path / "records"), num_files=4, per_file=7, seq_len=rt.SEQ,
                          max_predictions=rt.P, seed=13)
  config = rt.write_dropout_config(str(tmp_path / "bert_config.json"))

  def flags(output_dir):
    return ["--horovod"] + rt.flags(config, str(tmp_path / "records" / "*.tfrecord"),
                                    str(output_dir), STEPS, "tfdata", SAVE_STEPS)

  one_host = tmp_path / "one_host"
  rt.run(mpirun_command(2, python_command(rt.RUN_PRETRAINING, *flags(one_host))))

  two_hosts, topology = tmp_path / "two_hosts", tmp_path / "topology"
  topology.mkdir()
  env = cluster.environ(rt.env())
  command = cluster.mpirun_command(
      python_command(REPORT_TOPOLOGY, topology, rt.RUN_PRETRAINING, *flags(two_hosts)), env)
  status, seconds = _kill_rank_1_after_first_checkpoint(cluster, command, env, str(two_hosts))
  assert status != 0 and seconds < KILL_ENDS_JOB_WITHIN
  assert cluster.wait_until_empty(), "ranks or daemons left: %s" % {  # all gone with the job
      host.name: cluster.pids(host) for host in cluster.hosts}
  assert max(rt.checkpoint_steps(str(two_hosts))) < STEPS
  assert not os.listdir(str(topology))  # no rank ended normally

  moved_before = cluster.interface_bytes(cluster.hosts[1])
  proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
  assert proc.returncode == 0, "%s\n%s" % (proc.stdout[-3000:], proc.stderr[-6000:])
  moved = cluster.interface_bytes(cluster.hosts[1]) - moved_before

  reports = _reports(topology)
  assert _placement(reports) == ONE_RANK_ON_EACH_HOST
  assert [r["horovod"] for r in reports] == [
      {"rank": rank, "size": 2, "local_size": 1, "cross_rank": rank, "cross_size": 2}
      for rank in range(2)]
  resumed, whole = rt.checkpoint_variables(str(two_hosts)), rt.checkpoint_variables(str(one_host))
  assert int(resumed["global_step"]) == STEPS
  rt.assert_identical(resumed, whole)
  # the gradients crossed the veth: at least one allreduce of every trainable weight's size
  weight_bytes = sum(v.nbytes for n, v in whole.items() if n.startswith(("bert/", "cls/")) and
                     "adam" not in n.lower())
  assert moved > weight_bytes, (moved, weight_bytes)


@pytest.mark.mpi
@pytest.mark.slow
def test_create_pretraining_data_on_two_hosts_writes_what_one_process_writes(cluster, tmp_path):
  """Rank 1 SIGKILLed on the second host midway ends the job; the same command run again keeps
  the finished parts, makes the rest and writes the bytes one process writes."""
  corpus = tmp_path / "corpus.jsonl"
  data_tools.write_kill_test_corpus(corpus)
  script = os.path.join(REPO, "create_pretraining_data.py")
  one = subprocess.run(python_command(script, *data_tools.kill_test_args(
      str(corpus), tmp_path / "one" / "train")), capture_output=True, text=True, timeout=300,
                       env=rt.env())
  assert one.returncode == 0, one.stderr[-3000:]

  topology, output_dir = tmp_path / "topology", tmp_path / "two"
  topology.mkdir()
  env = cluster.environ(rt.env())
  command = cluster.mpirun_command(python_command(
      REPORT_TOPOLOGY, topology, script, *data_tools.kill_test_args(str(corpus),
                                                                    output_dir / "train")), env)
  proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                          start_new_session=True)
  try:
    killed = data_tools.kill_rank_1_once_it_made_a_part(
        proc, output_dir, lambda: rank_pid(1, "create_pretraining_data.py",
                                           cluster.pids(cluster.hosts[1])))
    status = _wait_bounded(proc)
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
  assert killed and len(killed) < data_tools.KILL_TEST_SEGMENTS // 2, killed
  assert status != 0 and cluster.wait_until_empty()

  moved_before = cluster.interface_bytes(cluster.hosts[1])
  two = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
  assert two.returncode == 0, "%s\n%s" % (two.stdout[-3000:], two.stderr[-6000:])
  assert "already made by an earlier run, kept" in two.stderr
  assert _placement(_reports(topology)) == ONE_RANK_ON_EACH_HOST
  assert cluster.interface_bytes(cluster.hosts[1]) > moved_before  # the ranks met over the veth
  records = file_tree(str(tmp_path / "one"))
  assert sorted(records) == ["train-0000%d-of-00003.tfrecord" % i for i in range(3)] + [
      "train.stats.json"]
  assert file_tree(str(output_dir)) == records
