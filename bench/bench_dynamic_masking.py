"""Dynamic vs static masking: disk and creation time of the records, the in-graph masking map's
examples/s against what a training step consumes, and training examples/s on dynamic vs static
records.

  python bench/bench_dynamic_masking.py [--part a|b|c|abc] [--dupe 5] [--rounds 3] [--threads 1]
      [--quick]  (a synthetic corpus of 300 documents, one round, a few steps: figures mean nothing)

(a) creation: the news-like corpus of bench/bench_packing.py (real Chinese sentences of
    ../shared/corpora/reviews (beside the checkout) cut into documents of news lengths; synthetic text without it)
    and an 8000-token vocab, then create_pretraining_data --do_whole_word_mask, S=128, P=20,
    --num_workers 1, each run in a fresh process (bench_create_pretraining_data.run_measured):
      static   --masking=static --dupe_factor=DUPE (google's way: DUPE maskings per sequence)
      dynamic  --masking=dynamic (each sequence once; training masks it anew every epoch)
    interleaved, --rounds times; prints the bytes written, instances, CPU seconds (process tree)
    and wall seconds (fastest round), and static / dynamic ratios.
(b) masking: the dynamic records of (a) (or synthetic ones), parsed once into memory, then a
    tf.data pipeline that batches them (--batch) and maps input/dynamic_masking.mask_features
    (seed, epoch, each row's position), in graph mode through one session with --threads
    TF threads: examples/s of the map. Then the examples/s one training step consumes
    (bench_input_pipelines.step_rate: BertModel + heads + Adam on one constant batch of the
    masked features) for BERT-tiny and BERT-base, and the ratios map / step.
(c) training: static (a) records and dynamic (a) records of the same corpus, each read by
    input/tfdata.training_dataset as run_pretraining reads them (dynamic: record identities
    attached, masks drawn after decoding), feeding BertModel + pretraining heads + Adam
    (step.build_train_op), BERT-tiny (H=32, L=2) with the corpus vocab, one graph and session a
    variant in this process, --train_threads TF threads; --train_rounds interleaved rounds of
    --train_steps steps after --train_warmup; prints each variant's examples/s (fastest round)
    and CPU ms per example (process CPU time, input pipeline included; fewest of the rounds),
    and dynamic / static (target >= 0.97) three ways: fastest rounds, the median of the paired
    rounds' ratios (each dynamic round against the static round just before it), CPU time.
No assertion: figures only.
"""
import argparse
import glob
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import _quick  # noqa: E402  (bench/_quick.py)
import _timing  # noqa: E402  (bench/_timing.py)
import bench_create_pretraining_data  # noqa: E402  (run_measured: a run in its own process)
import bench_input_pipelines  # noqa: E402  (step_rate: what a training step consumes)
import bench_packing  # noqa: E402  (news_like_documents)

SEQ, PREDICTIONS = 128, 20
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
QUICK = dict(synthetic_docs=300, rounds=1, dupe=2, batches=5, models="tiny", steps=1,
             train_steps=3, train_rounds=1, train_warmup=1, batch=8)


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--part", default="abc",
                      help="a: creation, b: masking map, c: training dynamic vs static; any mix")
  parser.add_argument("--synthetic_docs", type=int, default=0,
                      help="a synthetic corpus of this many documents (0: the reviews corpus "
                      "when present, else 4000 synthetic documents)")
  parser.add_argument("--dupe", type=int, default=5, help="(a) static --dupe_factor")
  parser.add_argument("--rounds", type=int, default=3, help="(a) interleaved runs a variant")
  parser.add_argument("--batch", type=int, default=32, help="(b) rows a batch")
  parser.add_argument("--batches", type=int, default=200, help="(b) timed batches")
  parser.add_argument("--threads", type=int, default=1, help="(b) TF intra/inter-op threads")
  parser.add_argument("--models", default="tiny,base", help="(b) training steps to compare")
  parser.add_argument("--steps", type=int, default=3, help="(b) timed training steps a model")
  parser.add_argument("--train_steps", type=int, default=20, help="(c) timed steps a round")
  parser.add_argument("--train_rounds", type=int, default=10, help="(c) interleaved rounds")
  parser.add_argument("--train_warmup", type=int, default=5, help="(c) untimed steps first")
  parser.add_argument("--train_threads", type=int, default=2, help="(c) TF intra/inter threads")
  parser.add_argument("--work_dir", default=None, help="keep corpus and records here")
  return _quick.parse_args(parser, argv, QUICK)


def write_corpus(work_dir, synthetic_docs=0):
  """news-like JSON Lines corpus + vocab in work_dir (cached); returns (corpus, vocab)."""
  import subprocess  # pylint: disable=import-outside-toplevel
  corpus, vocab = os.path.join(work_dir, "news.jsonl"), os.path.join(work_dir, "vocab.txt")
  if not os.path.exists(vocab):
    if os.path.isdir(bench_packing.CORPUS) and not synthetic_docs:
      documents = bench_packing.news_like_documents(bench_packing.CORPUS)
    else:
      documents = bench_create_pretraining_data.load_documents(synthetic_docs or 4000, None)
    with open(corpus, "w", encoding="utf-8") as f:
      for i, document in enumerate(documents):
        f.write(json.dumps({"id": str(i), "sentences": document}, ensure_ascii=False) + "\n")
    subprocess.check_call([sys.executable, os.path.join(REPO, "tools", "build_vocab.py"),
                           "--vocab_size", "8000", "--output", vocab, corpus],
                          stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=REPO))
  return corpus, vocab


def creation(args, work_dir):
  """Part (a); returns the dynamic records' prefix."""
  corpus, vocab = write_corpus(work_dir, args.synthetic_docs)
  variants = {"static": dict(masking="static", dupe_factor=args.dupe),
              "dynamic": dict(masking="dynamic")}
  best = {}
  for round_index in range(args.rounds):
    for name, extra in variants.items():
      prefix = os.path.join(work_dir, name, "train")
      options = dict(input_file=corpus, output_file=prefix, vocab_file=vocab,
                     do_whole_word_mask=True, max_seq_length=SEQ,
                     max_predictions_per_seq=PREDICTIONS, num_workers=1, num_output_files=2,
                     progress=False, **extra)
      result, wall, _, _ = bench_create_pretraining_data.run_measured(options)
      size = sum(os.path.getsize(p) for p in glob.glob(prefix + "-*.tfrecord"))
      old = best.get(name)
      best[name] = {"bytes": size, "instances": result["instances"],
                    "cpu": min(result["cpu"], old["cpu"]) if old else result["cpu"],
                    "wall": min(wall, old["wall"]) if old else wall}
      print("  round %d %-8s %.1f CPU s, %.1f s" % (round_index + 1, name, result["cpu"], wall),
            flush=True)
  documents = sum(1 for _ in open(corpus, encoding="utf-8"))
  print("(a) %d documents, S=%d P=%d, --num_workers 1, fastest of %d interleaved runs"
        % (documents, SEQ, PREDICTIONS, args.rounds))
  print("%-26s %12s %10s %8s %8s" % ("variant", "bytes", "instances", "CPU s", "wall s"))
  for name, extra in variants.items():
    row = best[name]
    label = "%s (dupe %d)" % (name, extra.get("dupe_factor", 1))
    print("%-26s %12d %10d %8.1f %8.1f" % (label, row["bytes"], row["instances"], row["cpu"],
                                          row["wall"]))
  static, dynamic = best["static"], best["dynamic"]
  print("static / dynamic: disk %.2fx, CPU time %.2fx, wall time %.2fx; bytes per instance "
        "%.0f static, %.0f dynamic" % (
            static["bytes"] / dynamic["bytes"], static["cpu"] / dynamic["cpu"],
            static["wall"] / dynamic["wall"], static["bytes"] / static["instances"],
            dynamic["bytes"] / dynamic["instances"]))
  return os.path.join(work_dir, "dynamic", "train")


def load_dynamic(prefix):
  """(features dict of numpy arrays [N, ...], MaskingConfig) of the records of prefix."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf2  # pylint: disable=import-outside-toplevel
  from bert_fin.records import masking_config  # pylint: disable=import-outside-toplevel
  from bert_fin.records import schema  # pylint: disable=import-outside-toplevel
  paths = sorted(glob.glob(prefix + "-*.tfrecord"))
  first = next(iter(tf2.data.TFRecordDataset(paths[0]))).numpy()
  spec = schema.tf_feature_spec(schema.layout_specs(
      schema.layout_of_example(first, allow_dynamic=True)))
  rows = [schema.tf_decode_features(tf2.io.parse_example(batch, spec))
          for batch in tf2.data.TFRecordDataset(paths).batch(4096)]
  features = {name: np.concatenate([r[name].numpy() for r in rows]) for name in rows[0]}
  with open(prefix + ".stats.json", encoding="utf-8") as f:
    config = masking_config.config_from_json(json.load(f)["dynamic_masking"])
  return features, config


def masking_rate(features, config, args):
  """examples/s of the batched masking map (graph mode, --threads)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  from bert_fin.input import dynamic_masking  # pylint: disable=import-outside-toplevel
  count = len(features["input_ids"])
  with tf.Graph().as_default():
    dataset = tf.data.Dataset.from_tensor_slices(features).repeat().batch(args.batch)
    dataset = dataset.enumerate().map(lambda index, batch: dynamic_masking.mask_features(
        batch, 12345, index * args.batch // count,
        index * args.batch + tf.range(tf.shape(batch["input_ids"])[0], dtype=tf.int64), config))
    next_batch = tf.data.make_one_shot_iterator(dataset).get_next()
    with tf.Session(config=_timing.session_config(args.threads)) as session:
      return _timing.examples_per_second(session, next_batch, args.batch, args.batches, warmup=10)


def masking_vs_training(args, prefix):
  """Part (b)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  from bert_fin.input import dynamic_masking  # pylint: disable=import-outside-toplevel
  features, config = load_dynamic(prefix)  # eager; the timed parts build their own graphs
  rates = [masking_rate(features, config, args) for _ in range(3)]
  rate = max(rates)
  print("(b) %d dynamic records, S=%d P=%d, batch %d, %d TF thread(s): masking map %.0f "
        "examples/s (best of 3: %s)" % (len(features["input_ids"]), SEQ, config.max_predictions_per_seq,
                                        args.batch, args.threads, rate,
                                        ", ".join("%.0f" % r for r in rates)))

  masked = dynamic_masking.mask_features(  # eager: one batch of masked features, as numpy
      {name: tf.constant(value[:args.batch]) for name, value in features.items()}, 1, 0,
      tf.range(args.batch, dtype=tf.int64), config)
  masked = {name: value.numpy() for name, value in masked.items()}

  def masked_input_fn(params):
    del params
    return tf.data.Dataset.from_tensors(masked)

  for model in [m for m in args.models.split(",") if m]:
    consumed = bench_input_pipelines.step_rate(model, masked_input_fn, args.batch, args.steps,
                                               args.threads)
    print("step BERT-%-5s %8.1f examples/s  -> masking map %.0fx the step's need"
          % (model, consumed, rate / consumed))


class TrainingVariant(object):
  """One variant of (c): a graph reading `files` as run_pretraining does (tfdata.training_dataset;
  dynamic records with their masking config) into one BERT-tiny training step, and its session."""

  def __init__(self, name, files, vocab_size, args):
    import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
    from bert_fin import modeling  # pylint: disable=import-outside-toplevel
    from bert_fin.optimization import optimizers  # pylint: disable=import-outside-toplevel
    from bert_fin.optimization import schedule  # pylint: disable=import-outside-toplevel
    from bert_fin.records import masking_source  # pylint: disable=import-outside-toplevel
    from bert_fin.records import schema  # pylint: disable=import-outside-toplevel
    from bert_fin.records import tfrecord_index  # pylint: disable=import-outside-toplevel
    from bert_fin.input import stream, tfdata  # pylint: disable=import-outside-toplevel
    from bert_fin.training import distributed  # pylint: disable=import-outside-toplevel
    from bert_fin.training.graph import step  # pylint: disable=import-outside-toplevel
    from bert_fin.training.graph import losses as losses_lib  # pylint: disable=import-outside-toplevel
    from bert_fin.training import run as run_lib  # pylint: disable=import-outside-toplevel
    self.name, self.batch = name, args.batch
    layout = schema.layout_of_example(tfrecord_index.read_records(files[0], limit=1)[0],
                                       allow_dynamic=True)
    config = masking_source.resolve(files)[0] if layout.dynamic_masking else None
    layout = run_lib.dynamic_layout(layout, config)
    bert_config = modeling.BertConfig.from_dict(dict(
        TINY, vocab_size=vocab_size, hidden_act="gelu", hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
        initializer_range=0.02))
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf.set_random_seed(0)
      order = stream.DataOrder(0, 1, args.batch, "files")
      order.add_epoch(files, [stream.record_count(f) for f in files])
      dataset = tfdata.training_dataset(stream.WorkerStream(order, 0, 0, None), layout,
                                        args.batch, config)
      features = tf.data.make_one_shot_iterator(dataset).get_next()
      model = modeling.BertModel(bert_config, True, features[schema.INPUT_IDS],
                                 input_len=features[schema.INPUT_LEN],
                                 token_type_ids=features[schema.SEGMENT_IDS])
      losses = losses_lib.pretraining_losses(bert_config, model, features, "bert")
      global_step = tf.train.get_or_create_global_step()
      optimizer = optimizers.make_optimizer(
          "adam", schedule.learning_rate_schedule(1e-4, global_step, 1000, 10), global_step)
      self.train_op, _ = step.build_train_op(losses["total_loss"], optimizer, global_step,
                                             distributed.init(False), step.StepConfig())
      self.session = tf.Session(config=_timing.session_config(args.train_threads))
      self.session.run(tf.global_variables_initializer())

  def run(self, steps):
    """(wall seconds, process CPU seconds) of `steps` training steps (CPU: every thread of this
    process, the input pipeline's included; the other variant's pipeline is idle by then, its
    prefetch buffer full)."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
      self.session.run(self.train_op)
    return time.perf_counter() - start, time.process_time() - cpu


def training_dynamic_vs_static(args, work_dir):
  """Part (c): training examples/s on static vs dynamic records of the same corpus."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  tf.disable_eager_execution()
  with open(os.path.join(work_dir, "vocab.txt"), encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  variants = [TrainingVariant(name, sorted(glob.glob(os.path.join(work_dir, name,
                                                                  "train-*.tfrecord"))),
                              vocab_size, args) for name in ("static", "dynamic")]
  for variant in variants:
    variant.run(args.train_warmup)
  seconds = {variant.name: [] for variant in variants}
  for _ in range(args.train_rounds):
    for variant in variants:
      seconds[variant.name].append(variant.run(args.train_steps))
  for variant in variants:
    variant.session.close()
  examples = args.train_steps * args.batch
  rate = {name: examples / min(w for w, _ in times) for name, times in seconds.items()}
  cpu = {name: 1000.0 * min(c for _, c in times) / examples for name, times in seconds.items()}
  paired = sorted(s[0] / d[0] for s, d in zip(seconds["static"], seconds["dynamic"]))
  print("(c) training BERT-tiny (vocab %d), S=%d, batch %d, %d TF threads, %d interleaved rounds "
        "x %d steps after %d warm-up:" % (
            vocab_size, SEQ, args.batch, args.train_threads, args.train_rounds, args.train_steps,
            args.train_warmup))
  for name, times in seconds.items():
    print("train %-8s %8.1f examples/s fastest round, %.2f CPU ms/example fewest (rounds: %s)"
          % (name, rate[name], cpu[name], ", ".join("%.0f" % (examples / w) for w, _ in times)))
  print("training dynamic / static: %.3fx examples/s (fastest rounds); %.3fx by the median of "
        "the rounds' paired ratios; %.3fx by CPU time per example" % (
            rate["dynamic"] / rate["static"], paired[len(paired) // 2],
            cpu["static"] / cpu["dynamic"]))


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  with tempfile.TemporaryDirectory(prefix="bench_dynmask_") as tmp:
    work_dir = args.work_dir or tmp
    os.makedirs(work_dir, exist_ok=True)
    prefix = os.path.join(work_dir, "dynamic", "train")
    if "a" in args.part or not os.path.exists(prefix + ".stats.json"):
      prefix = creation(args, work_dir)
    if "b" in args.part:
      masking_vs_training(args, prefix)
    if "c" in args.part:
      training_dynamic_vs_static(args, work_dir)
  return 0


if __name__ == "__main__":
  sys.exit(main())
