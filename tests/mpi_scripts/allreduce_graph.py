"""Run under mpirun: each rank allreduces rank-dependent tensors in TF graph mode and writes
DIR/rank-N.json (DIR = argv[1]).

The rank enters through placeholders, not constants: grappler folds rank-dependent constants into
graphs that differ between ranks, and Horovod then waits forever for collectives that no longer
match (seen with 4 ranks). tests/test_horovod_mpi.py checks the results against closed forms.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import horovod.tensorflow as hvd  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

tf.disable_eager_execution()
hvd.init()
rank, size = hvd.rank(), hvd.size()
with tf.Graph().as_default():
  rank_value = tf.placeholder(tf.float32, [])
  rank_index = tf.placeholder(tf.int32, [1])
  summed = hvd.allreduce(tf.stack([rank_value + 1.0, 10.0 * (rank_value + 1.0)]), op=hvd.Sum)
  averaged = hvd.allreduce(tf.fill([3], rank_value), op=hvd.Average)
  gathered = hvd.allgather(rank_index)
  broadcast = hvd.broadcast(tf.reshape(rank_value * 7.0, [1]), root_rank=0)
  with tf.Session() as sess:
    s, a, g, b = sess.run([summed, averaged, gathered, broadcast],
                          {rank_value: float(rank), rank_index: [rank]})
with open(os.path.join(sys.argv[1], "rank-%d.json" % rank), "w") as f:  # not stdout: ranks interleave
  json.dump({"rank": rank, "size": size, "local_rank": hvd.local_rank(), "sum": s.tolist(),
             "avg": a.tolist(), "gathered": g.tolist(), "broadcast": b.tolist()}, f)
