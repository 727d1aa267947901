"""Training throughput of a small BERT on this machine: real tokens/s, and ratios to a baseline.

Variants (one process, one graph and session each, same records, same model size, same step as
run_pretraining: tf.data input_fn -> BertModel -> pretraining_losses -> AdamWeightDecay through
step.build_train_op, one session.run a step):

  baseline      bert_fin's path: attention mask from input_len, gather embeddings, no XLA
  xla           baseline + XLA auto-clustering as run_pretraining --use_xla sets it up
                (global_jit_level ON_1, lazy compilation off; on CPU hosts also
                --tf_xla_cpu_global_jit, without which ON_1 compiles nothing)
  google_mask   google's mask path: input_mask [B, S] (built from input_len in the graph, as the
                records' input_mask would be) instead of input_len, gather embeddings
  google_tpu    google's mask path + use_one_hot_embeddings=True (the embedding lookup as a
                [B*S, vocab] x [vocab, H] matmul, google's default on TPU)
  cpu_bf16      baseline + run_pretraining --cpu_bf16 (oneDNN bfloat16 auto mixed precision);
                only where /proc/cpuinfo shows avx512_bf16 or amx_bf16 (left out elsewhere)

The variants' timed rounds are interleaved (round-robin) so that load from other processes hits
them alike. Prints one line a variant (sentences/s, real tokens/s best and median round, padded
tokens/s, ms/step) and the ratios of real tokens/s to the baseline measured in the same run.
No assertion: figures only.

  python bench/bench_train_throughput.py [--rounds 3 --steps 5 --batch 8 --seq 128 ...] [--quick]
  (--quick: every variant, H=32 L=1, batch 2 x seq 32, 1 warm-up step, 1 round of 1 step)
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import _model_size  # noqa: E402  (bench/_model_size.py)
import _quick  # noqa: E402  (bench/_quick.py)
from bert_fin.training import xla_env  # noqa: E402  (no TensorFlow import)

VARIANTS = ("baseline", "xla", "google_mask", "google_tpu", "cpu_bf16")
QUICK = dict(steps=1, rounds=1, warmup=1, batch=2, seq=32, predictions=4, hidden=32, layers=1,
             heads=2, intermediate=64, vocab=1000)


def default_variants():
  """Every variant this host can run: cpu_bf16 only with bf16 CPU instructions."""
  from bert_fin.training import cpu_precision  # pylint: disable=g-import-not-at-top
  has_bf16 = bool(cpu_precision.bf16_features(cpu_precision.cpu_flags()))
  return [v for v in VARIANTS if v != "cpu_bf16" or has_bf16]


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--variants", default=None, help="comma list (default: all this host runs)")
  parser.add_argument("--steps", type=int, default=5, help="timed steps a round")
  parser.add_argument("--rounds", type=int, default=3, help="timed rounds a variant")
  parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (XLA compiles)")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  _model_size.add_flags(parser)
  parser.add_argument("--threads", type=int, default=0, help="TF intra-op threads (0: TF's)")
  return _quick.parse_args(parser, argv, QUICK)


def write_records(directory, args):
  """Synthetic valid records (tests/fixtures/training/tiny_data.py), 2 files x 4 batches."""
  sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "training"))
  import tiny_data  # pylint: disable=g-import-not-at-top
  paths, _ = tiny_data.write_records(directory, num_files=2, per_file=4 * args.batch,
                                     seq_len=args.seq, max_predictions=args.predictions,
                                     vocab_size=args.vocab, seed=0)
  return ",".join(paths)


def build_train_step(args, variant):
  """(train_op, real token count tensor) of one step in the current graph."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  from bert_fin.optimization import optimizers  # pylint: disable=g-import-not-at-top
  from bert_fin.optimization import schedule  # pylint: disable=g-import-not-at-top
  from bert_fin.input import tfdata  # pylint: disable=g-import-not-at-top
  from bert_fin.records import schema  # pylint: disable=g-import-not-at-top
  from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
  from bert_fin.training.graph import step  # pylint: disable=g-import-not-at-top
  from bert_fin.training.graph import losses as losses_lib  # pylint: disable=g-import-not-at-top
  config = _model_size.bert_config(args, max_position_embeddings=max(512, args.seq))
  from bert_fin.input import stream  # pylint: disable=g-import-not-at-top
  files = stream.expand_input_files(args.records)
  order = stream.DataOrder(0, 1, args.batch, "files")
  order.add_epoch(files, [stream.record_count(f) for f in files])
  dataset = tfdata.training_dataset(stream.WorkerStream(order, 0, 0, None),
                                    schema.RecordLayout(args.seq, args.predictions), args.batch)
  features = tf.data.make_one_shot_iterator(dataset).get_next()
  google = variant.startswith("google")
  input_len = features[schema.INPUT_LEN]
  mask_kwargs = ({"input_mask": tf.sequence_mask(input_len, args.seq, dtype=tf.int32)} if google
                 else {"input_len": input_len})
  model = modeling.BertModel(config, True, features[schema.INPUT_IDS],
                             token_type_ids=features[schema.SEGMENT_IDS],
                             use_one_hot_embeddings=(variant == "google_tpu"), **mask_kwargs)
  losses = losses_lib.pretraining_losses(config, model, features, "bert")
  global_step = tf.train.get_or_create_global_step()
  lr = schedule.learning_rate_schedule(1e-4, global_step, 1000, 10)
  optimizer = optimizers.make_optimizer("adam", lr, global_step)
  train_op, _ = step.build_train_op(losses["total_loss"], optimizer, global_step,
                                    distributed.init(False), step.StepConfig())
  return train_op, tf.reduce_sum(input_len)


class Variant(object):
  """One variant's graph and session, ready to run timed windows of steps."""

  def __init__(self, args, name):
    import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
    from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
    self.name = name
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf.set_random_seed(0)
      self.train_op, self.real_tokens = build_train_step(args, name)
      config = distributed.init(False).session_config(use_xla=(name == "xla"))
      if name != "xla":
        config.graph_options.optimizer_options.global_jit_level = tf.OptimizerOptions.OFF
      if name == "cpu_bf16":
        from bert_fin.training import cpu_precision  # pylint: disable=g-import-not-at-top
        cpu_precision.enable_bf16_rewrite(config)
      if args.threads:
        config.intra_op_parallelism_threads = args.threads
      self.session = tf.Session(config=config)
      self.session.run(tf.global_variables_initializer())

  def run(self, steps):
    """(seconds, real tokens) of `steps` training steps."""
    tokens = 0
    start = time.time()
    for _ in range(steps):
      tokens += int(self.session.run([self.train_op, self.real_tokens])[1])
    return time.time() - start, tokens


def measure(args, names):
  """Builds every variant, warms each up, then times `rounds` windows per variant interleaved
  (round-robin), so load from other processes on a shared machine hits all variants alike.

  Returns {name: {"warmup_seconds", "windows": [(seconds, real tokens), ...]}}.
  """
  # run_pretraining's TF_XLA_FLAGS (before TensorFlow starts; on CPU hosts this includes
  # --tf_xla_cpu_global_jit). Sessions with jit level OFF (all variants but "xla") compile nothing.
  xla_env.prepare("xla" in names)
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  variants = [Variant(args, name) for name in names]
  out = {}
  for v in variants:
    seconds, _ = v.run(args.warmup)
    out[v.name] = {"warmup_seconds": seconds, "windows": []}
  for _ in range(args.rounds):
    for v in variants:
      out[v.name]["windows"].append(v.run(args.steps))
  for v in variants:
    v.session.close()
  return out


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  names = ([v.strip() for v in args.variants.split(",") if v.strip()] if args.variants
           else default_variants())
  unknown = sorted(set(names) - set(VARIANTS))
  if unknown or "baseline" not in names:
    raise SystemExit("--variants: known %s, baseline required; got %s" % (VARIANTS, names))
  print("bench_train_throughput: BERT L=%d H=%d A=%d I=%d vocab=%d, seq %d, P %d, batch %d; "
        "%d rounds x %d timed steps a variant, interleaved, after %d warm-up steps; CPU cores "
        "available: %d" % (args.layers, args.hidden, args.heads, args.intermediate, args.vocab,
                           args.seq, args.predictions, args.batch, args.rounds, args.steps,
                           args.warmup, len(os.sched_getaffinity(0))), flush=True)
  with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
    args.records = write_records(tmp, args)
    results = measure(args, names)
  sequences = args.steps * args.batch
  rows = {}
  for name in names:
    windows = results[name]["windows"]
    best_seconds, best_tokens = min(windows, key=lambda w: w[0] / max(w[1], 1))
    rates = sorted(tokens / seconds for seconds, tokens in windows)
    rows[name] = {"best": best_tokens / best_seconds, "median": rates[len(rates) // 2],
                  "sentences": sequences / best_seconds,
                  "padded": sequences * args.seq / best_seconds,
                  "ms": 1000.0 * best_seconds / args.steps,
                  "warmup": results[name]["warmup_seconds"]}
  base = rows["baseline"]
  print("%-12s %11s %15s %17s %15s %9s %10s %11s %12s" % (
      "variant", "sentences/s", "real tokens/s", "median tokens/s", "padded tokens/s",
      "ms/step", "warm-up s", "ratio best", "ratio median"))
  for name in names:
    r = rows[name]
    print("%-12s %11.1f %15.0f %17.0f %15.0f %9.1f %10.1f %11.3f %12.3f" % (
        name, r["sentences"], r["best"], r["median"], r["padded"], r["ms"], r["warmup"],
        r["best"] / base["best"], r["median"] / base["median"]))
  print("best = the fastest of the rounds; ratio = real tokens/s / baseline's, same run, "
        "same records")
  return 0


if __name__ == "__main__":
  sys.exit(main())
