"""Run under mpirun as `python report_topology.py OUT_DIR SCRIPT ARGS...`: runs SCRIPT as __main__
with ARGS (as `python SCRIPT ARGS...` would), and when it has ended with status 0 writes
OUT_DIR/topology-<rank>.json: this rank's hostname, what Open MPI told it (rank, size, local_size)
and, when SCRIPT used Horovod, what Horovod told it (rank, size, local_size, cross_rank,
cross_size; read before Horovod shuts down at exit). Used by tests/test_two_hosts_mpi.py to check
where each rank ran; nothing is imported before SCRIPT runs."""
import json
import os
import runpy
import socket
import sys


def report():
  """{hostname, mpi: {...}, horovod: {...} or None} of this process."""
  environ = os.environ
  out = {"hostname": socket.gethostname(),
         "mpi": {"rank": int(environ["OMPI_COMM_WORLD_RANK"]),
                 "size": int(environ["OMPI_COMM_WORLD_SIZE"]),
                 "local_size": int(environ["OMPI_COMM_WORLD_LOCAL_SIZE"])},
         "horovod": None}
  hvd = sys.modules.get("horovod.tensorflow")
  if hvd is not None and hvd.is_initialized():
    out["horovod"] = {"rank": hvd.rank(), "size": hvd.size(), "local_size": hvd.local_size(),
                      "cross_rank": hvd.cross_rank(), "cross_size": hvd.cross_size()}
  return out


def main():
  out_dir, script = sys.argv[1], os.path.abspath(sys.argv[2])
  sys.argv = sys.argv[2:]
  sys.path[0] = os.path.dirname(script)
  try:
    runpy.run_path(script, run_name="__main__")
    status = 0
  except SystemExit as e:
    status = e.code
  if status in (0, None):
    path = os.path.join(out_dir, "topology-%s.json" % os.environ["OMPI_COMM_WORLD_RANK"])
    with open(path + ".tmp", "w", encoding="utf-8") as f:
      json.dump(report(), f)
    os.replace(path + ".tmp", path)
  sys.exit(status)


if __name__ == "__main__":
  main()
