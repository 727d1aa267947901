"""A fake cluster of two hosts on this machine, for the multi-host tests (needs root).

Each host is a network namespace (`ip netns add`) with a hostname of its own (a UTS namespace made
for each command run on it), and the two are joined by a veth pair whose two ends, both named
INTERFACE, live only inside the namespaces: host i has the address ADDRESSES[i] (a /30 of the
RFC 2544 benchmarking range, which no real network routes), and traffic between the hosts never
leaves the namespaces the test made. The filesystem stays shared, like an NFS every host mounts.

Open MPI's mpirun runs on the first host and starts its daemon (orted) on the second through
netns_rsh_agent.sh (`--mca plm_rsh_agent`), which enters that host's namespace where ssh would
log in, so mpirun sees two nodes: Horovod's local_size is 1 and cross_size 2, and the ranks talk
TCP over the veth only (`--mca btl_tcp_if_include` / `oob_tcp_if_include INTERFACE`).

Names are unique per cluster (process id + random suffix), so parallel test workers each have
their own; `remove()` kills whatever still runs inside the namespaces and deletes them (the veth
goes with them).
"""
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import time
import uuid

from bert_fin import launch

ADDRESSES = ("198.18.0.1", "198.18.0.2")
PREFIX_LENGTH = 30
INTERFACE = "bfveth"
AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns_rsh_agent.sh")
HOSTS_VARIABLE = "BERT_FIN_FAKE_HOSTS"


class Unavailable(Exception):
  """This machine cannot make the fake cluster (the message says why: the test's skip reason)."""


@dataclasses.dataclass(frozen=True)
class Host:
  name: str  # its hostname, as seen by the processes running on it
  namespace: str  # its network namespace (ip netns)
  address: str  # of its end of the veth pair, inside the namespace only


def _ip(*args):
  proc = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=30)
  if proc.returncode != 0:
    raise Unavailable("`ip %s` failed: %s" % (" ".join(args), proc.stderr.strip()))
  return proc.stdout


def unavailable_reason():
  """Why the fake cluster cannot be made here (None: it can be tried)."""
  if not hasattr(os, "geteuid") or os.geteuid() != 0:
    return "network namespaces need root (ip netns add, unshare --uts)"
  for tool in ("ip", "unshare", "mpirun"):
    if shutil.which(tool) is None:
      return "%s not found (iproute2, util-linux, openmpi-bin)" % tool
  return None


class FakeCluster(object):
  """Two fake hosts; make one with FakeCluster.create() and always call remove()."""

  def __init__(self, hosts):
    self.hosts = tuple(hosts)

  @classmethod
  def create(cls):
    """Makes the namespaces, the veth pair and the addresses; raises Unavailable (after removing
    what it made) when this machine does not allow it."""
    reason = unavailable_reason()
    if reason:
      raise Unavailable(reason)
    tag = "%d-%s" % (os.getpid(), uuid.uuid4().hex[:6])
    cluster = cls([Host("host%s" % letter, "bert-fin-test-%s-%s" % (tag, letter), address)
                   for letter, address in zip("ab", ADDRESSES)])
    made = []
    try:
      for host in cluster.hosts:
        _ip("netns", "add", host.namespace)
        made.append(host)
      first, second = cluster.hosts
      _ip("-n", first.namespace, "link", "add", INTERFACE, "type", "veth", "peer", "name",
          INTERFACE, "netns", second.namespace)
      for host in cluster.hosts:
        _ip("-n", host.namespace, "addr", "add", "%s/%d" % (host.address, PREFIX_LENGTH), "dev",
            INTERFACE)
        _ip("-n", host.namespace, "link", "set", "lo", "up")
        _ip("-n", host.namespace, "link", "set", INTERFACE, "up")
    except Unavailable:
      FakeCluster(made).remove()
      raise
    return cluster

  def remove(self):
    """Kills every process still inside the namespaces (this cluster's own), deletes them."""
    for host in self.hosts:
      for pid in self.pids(host):
        try:
          os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
          pass
    self.wait_until_empty()
    for host in self.hosts:
      subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True, timeout=30)

  def wait_until_empty(self, timeout=10.0):
    """True once no process runs on any host (False if some still do after timeout seconds)."""
    deadline = time.time() + timeout
    while any(self.pids(host) for host in self.hosts):
      if time.time() > deadline:
        return False
      time.sleep(0.05)
    return True

  def pids(self, host):
    """The process ids running in host's network namespace."""
    proc = subprocess.run(["ip", "netns", "pids", host.namespace], capture_output=True, text=True,
                          timeout=30)
    return [int(pid) for pid in proc.stdout.split()] if proc.returncode == 0 else []

  def interface_bytes(self, host):
    """Bytes received + sent so far by host's end of the veth pair."""
    link, = json.loads(_ip("-n", host.namespace, "-j", "-s", "link", "show", "dev", INTERFACE))
    return link["stats64"]["rx"]["bytes"] + link["stats64"]["tx"]["bytes"]

  def on(self, host, argv):
    """argv run on host: in its network namespace, with its hostname."""
    return (["ip", "netns", "exec", host.namespace, "unshare", "--uts", "sh", "-c",
             'hostname "$0" && exec "$@"', host.name] + [str(a) for a in argv])

  def environ(self, environ=None):
    """environ (default os.environ) plus what netns_rsh_agent.sh reads."""
    environ = dict(os.environ if environ is None else environ)
    environ[HOSTS_VARIABLE] = " ".join("%s=%s=%s" % (h.address, h.namespace, h.name)
                                       for h in self.hosts)
    return environ

  def mpirun_command(self, argv, environ, ranks_per_host=1):
    """The argv that runs `mpirun ... argv` from the first host with bert_fin.launch's flags:
    2 * ranks_per_host ranks, ranks_per_host a host (by slot: host a first), ranks and daemons
    talking over the veth only. Run it with env=environ (from self.environ())."""
    command = launch.mpirun_command(2 * ranks_per_host, argv, environ=environ)
    placement = ["-H", ",".join("%s:%d" % (h.address, ranks_per_host) for h in self.hosts),
                 "--mca", "plm_rsh_agent", AGENT,
                 "--mca", "oob_tcp_if_include", INTERFACE, "--mca", "btl_tcp_if_include", INTERFACE]
    return self.on(self.hosts[0], command[:1] + placement + command[1:])
