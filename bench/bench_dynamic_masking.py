"""Dynamic vs static masking: disk and creation time of the records, and the in-graph masking
map's examples/s against what a training step consumes.

  python bench/bench_dynamic_masking.py [--part a|b|ab] [--dupe 5] [--rounds 3] [--threads 1]

(a) creation: the news-like corpus of bench/bench_packing.py (real Chinese sentences of
    /work/shared/corpora/reviews cut into documents of news lengths; synthetic text without it)
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

import bench_create_pretraining_data  # noqa: E402  (run_measured: a run in its own process)
import bench_input_pipelines  # noqa: E402  (step_rate: what a training step consumes)
import bench_packing  # noqa: E402  (news_like_documents)

SEQ, PREDICTIONS = 128, 20


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--part", default="ab", help="a: creation, b: masking map, ab: both")
  parser.add_argument("--dupe", type=int, default=5, help="(a) static --dupe_factor")
  parser.add_argument("--rounds", type=int, default=3, help="(a) interleaved runs a variant")
  parser.add_argument("--batch", type=int, default=32, help="(b) rows a batch")
  parser.add_argument("--batches", type=int, default=200, help="(b) timed batches")
  parser.add_argument("--threads", type=int, default=1, help="(b) TF intra/inter-op threads")
  parser.add_argument("--models", default="tiny,base", help="(b) training steps to compare")
  parser.add_argument("--steps", type=int, default=3, help="(b) timed training steps a model")
  parser.add_argument("--work_dir", default=None, help="keep corpus and records here")
  return parser.parse_args(argv)


def write_corpus(work_dir):
  """news-like JSON Lines corpus + vocab in work_dir (cached); returns (corpus, vocab)."""
  import subprocess  # pylint: disable=import-outside-toplevel
  corpus, vocab = os.path.join(work_dir, "news.jsonl"), os.path.join(work_dir, "vocab.txt")
  if not os.path.exists(vocab):
    if os.path.isdir(bench_packing.CORPUS):
      documents = bench_packing.news_like_documents(bench_packing.CORPUS)
    else:
      documents = bench_create_pretraining_data.load_documents(4000)
    with open(corpus, "w", encoding="utf-8") as f:
      for i, document in enumerate(documents):
        f.write(json.dumps({"id": str(i), "sentences": document}, ensure_ascii=False) + "\n")
    subprocess.check_call([sys.executable, os.path.join(REPO, "tools", "build_vocab.py"),
                           "--vocab_size", "8000", "--output", vocab, corpus],
                          stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=REPO))
  return corpus, vocab


def creation(args, work_dir):
  """Part (a); returns the dynamic records' prefix."""
  corpus, vocab = write_corpus(work_dir)
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
  from bert_fin.data import masking, records  # pylint: disable=import-outside-toplevel
  paths = sorted(glob.glob(prefix + "-*.tfrecord"))
  first = next(iter(tf2.data.TFRecordDataset(paths[0]))).numpy()
  spec = records.tf_feature_spec(records.layout_specs(
      records.layout_of_example(first, allow_dynamic=True)))
  rows = [records.tf_decode_features(tf2.io.parse_example(batch, spec))
          for batch in tf2.data.TFRecordDataset(paths).batch(4096)]
  features = {name: np.concatenate([r[name].numpy() for r in rows]) for name in rows[0]}
  with open(prefix + ".stats.json", encoding="utf-8") as f:
    config = masking.config_from_json(json.load(f)["dynamic_masking"])
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
    with tf.Session(config=bench_input_pipelines.session_config(args.threads)) as session:
      for _ in range(10):
        session.run(next_batch)
      start = time.perf_counter()
      for _ in range(args.batches):
        session.run(next_batch)
      return args.batches * args.batch / (time.perf_counter() - start)


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
  return 0


if __name__ == "__main__":
  sys.exit(main())
