"""Run under `mpirun -np 2`: the training step across ranks, checked by tests/test_distributed_mpi.py.

Each rank prints one line `RESULT {json}` with raw figures (max weight differences, allreduce
counts, flags); the test asserts on them. Checks:
  equivalence: 2 ranks x micro-batch b (x N micro-steps) == 1 process x batch 2*N*b, 2 updates,
               for per-micro-batch and post-accumulation allreduce, fp16 compression, sparse.
  allreduces:  HorovodAllreduce ops executed per micro-step (FULL_TRACE step stats).
  overflow:    an inf gradient on rank 1 only: both ranks skip the update, weights unchanged.
  broadcast:   dist.broadcast_hooks() gives every rank rank 0's initial values.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

import tiny_model  # noqa: E402
from bert_fin.optimization import optimizers  # noqa: E402
from bert_fin.training import distributed  # noqa: E402
from bert_fin.training.graph.step import StepConfig  # noqa: E402

tf.disable_eager_execution()

MICRO_BATCH = 3
UPDATES = 2


def adamw(global_step):
  return optimizers.make_optimizer("adam", 0.05, global_step)


def rank_micro_batches(ids, targets, rank, size, num_steps):
  """This rank's micro-batches: micro-step k of update u takes global slice (u, k, rank)."""
  slices = tiny_model.split(ids, targets, UPDATES * num_steps * size)
  return [slices[(u * num_steps + k) * size + rank]
          for u in range(UPDATES) for k in range(num_steps)]


def max_weight_difference(left, right):
  return max(float(np.max(np.abs(left[n] - right[n]))) for n in left)


def equivalence(dist, name, config):
  num_steps = config.num_accumulation_steps
  ids, targets = tiny_model.make_data(UPDATES * num_steps * dist.size * MICRO_BATCH, seed=7)
  count_before = dist.allreduce_count
  ranked = tiny_model.train(config, rank_micro_batches(ids, targets, dist.rank, dist.size,
                                                       num_steps), dist, adamw, trace=True)
  reference = tiny_model.train(StepConfig(), tiny_model.split(ids, targets, UPDATES),
                               distributed.init(False), adamw)
  return {
      "name": name,
      "num_steps": num_steps,
      "post": config.allreduce_post_accumulation,
      "num_tensors": len(ranked["weights"]),
      "graph_allreduces": dist.allreduce_count - count_before,
      "run_allreduces": [h["allreduces"] for h in ranked["history"]],
      "global_steps": [h["global_step"] for h in ranked["history"]],
      "max_diff": max_weight_difference(ranked["weights"], reference["weights"]),
      "checksum": float(sum(np.sum(w) for w in ranked["weights"].values())),
  }


def overflow_on_one_rank(dist):
  ids, targets = tiny_model.make_data(UPDATES * 2 * dist.size * MICRO_BATCH, seed=3)
  config = StepConfig(num_accumulation_steps=2, allreduce_post_accumulation=True,
                      use_loss_scaling=True, init_loss_scale=2.0 ** 16)
  batches = rank_micro_batches(ids, targets, dist.rank, dist.size, 2)[:2]
  poisoned = tiny_model.train(config, batches, dist, adamw,
                              poison_at={0} if dist.rank == 1 else set())
  untouched = tiny_model.train(config, [], dist, adamw)
  state = [n for n in poisoned["variables"] if not n.startswith("train_step/") and n != "global_step"]
  last = poisoned["history"][-1]
  return {
      "all_finite": bool(last["all_finite"]),
      "global_step": last["global_step"],
      "loss_scale_after": float(poisoned["variables"]["train_step/loss_scale/scale"]),
      "state_unchanged": all(np.array_equal(poisoned["variables"][n], untouched["variables"][n])
                             for n in state),
      "state_finite": all(bool(np.all(np.isfinite(poisoned["variables"][n]))) for n in state),
  }


def broadcast(dist):
  with tf.Graph().as_default():
    value = tf.get_variable("value", initializer=tf.constant([float(dist.rank) + 10.0]))
    with tf.train.MonitoredSession(
        session_creator=tf.train.ChiefSessionCreator(config=tiny_model.session_config()),
        hooks=dist.broadcast_hooks()) as sess:
      return float(sess.run(value)[0])


def chief_decides(dist):
  """What every rank gets from chief_decides: the chief's answer (each rank would decide its own
  rank otherwise), and the chief's refusal, raised on every rank; decide() runs on the chief only."""
  calls = []

  def decide():
    calls.append(dist.rank)
    return {"decided_by": dist.rank}

  answer = dist.chief_decides(decide)

  def refuse():
    raise ValueError("refused by rank %d" % dist.rank)

  try:
    dist.chief_decides(refuse, error_type=KeyError)
    refusal = None
  except KeyError as e:
    refusal = e.args[0]
  return {"answer": answer, "refusal": refusal, "decide_calls": calls}


def progress(dist, message):
  print("rank %d: %s" % (dist.rank, message), file=sys.stderr, flush=True)


def write_result(result_dir, rank, result):
  """One JSON file a rank: mpirun interleaves long stdout lines of several ranks."""
  with open(os.path.join(result_dir, "rank-%d.json" % rank), "w") as f:
    json.dump(result, f)


def main():
  dist = distributed.init(True)
  progress(dist, "initialised, size %d" % dist.size)
  checks = [
      ("n1", StepConfig()),
      ("n2_per_micro_batch", StepConfig(num_accumulation_steps=2)),
      ("n2_post", StepConfig(num_accumulation_steps=2, allreduce_post_accumulation=True)),
      ("n2_post_fp16_allreduce", StepConfig(num_accumulation_steps=2,
                                            allreduce_post_accumulation=True,
                                            use_loss_scaling=True, init_loss_scale=2.0 ** 8,
                                            fp16_allreduce=True)),
      ("n1_sparse_allgather", StepConfig(sparse_as_dense=False)),
  ]
  equivalences = []
  for name, config in checks:
    progress(dist, "equivalence " + name)
    equivalences.append(equivalence(dist, name, config))
  progress(dist, "overflow, broadcast")
  result = {
      "rank": dist.rank, "size": dist.size, "local_rank": dist.local_rank,
      "is_chief": dist.is_chief,
      "equivalence": equivalences,
      "overflow": overflow_on_one_rank(dist),
      "broadcast": broadcast(dist),
      "chief_decides": chief_decides(dist),
  }
  write_result(sys.argv[1], dist.rank, result)


if __name__ == "__main__":
  main()
