"""examples/s of the DALI vs the tf.data input_fn alone (no model, CPU), and both vs the rate a
training step consumes; the cost of resuming mid-epoch.

  python bench/bench_input_pipelines.py [--batch_size 32] [--seq 128] [--predictions 20]
      [--num_files 8] [--per_file 2048] [--batches 300] [--threads 2] [--models tiny,base]
      [--quick]  (2 files x 64 records, seq 32, 5 timed batches, BERT-tiny, one repeat)

Writes learnable synthetic records (tests/fixtures/training/tiny_data.py instances, vocab 21128)
into a temp directory, then in one process, in graph mode through an initializable iterator (as
the Estimator reads them):
  tf.data   bert_fin.input.tfdata.training_dataset: the deterministic, resumable order of
            input/stream.py (seeded file permutation, deterministic interleave, seeded shuffle, parse)
  DALI      bert_fin.input.dali.training_dataset, CPU-only pipeline, the same stream's order (sharding
            "records") through per-piece index files
  mix       tf.data over a two-source mixture (--input_source; input/stream/mixture.py): the
            files split into two sources of weight 1, each its own stream of the order above,
            tf.data's choose_from_datasets taking each record from the source the schedule names
  resume    seconds to the first batch at position 0 and at half an epoch (tf.data re-reads the
            skipped records without parsing; DALI drops them from its index files)
  step      BertModel + pretraining heads + Adam on one constant batch (input cost ~0): the
            examples/s a training step consumes, for each model size in --models
and prints each rate and the ratios input / step (> 1: the input keeps up with training).
Takes a few minutes on 2 shared cores (BERT-base steps dominate; --models tiny is quick).
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "training"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

import _quick  # noqa: E402  (bench/_quick.py)
import _records  # noqa: E402  (bench/_records.py)
import _timing  # noqa: E402  (bench/_timing.py)
import tiny_data  # noqa: E402

VOCAB = 21128
MODELS = {
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                  intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
}


QUICK = dict(batch_size=8, seq=32, predictions=5, num_files=2, per_file=64, batches=5,
             models="tiny", steps=1, repeats=1)


def write_records(directory, num_files, per_file, seq, predictions):
  """num_files shards of per_file records (512 distinct instances, repeated) -> paths."""
  from bert_fin.records import schema
  specs = schema.feature_specs(seq, predictions)
  rng = np.random.default_rng(0)
  serialized = [tiny_data.to_example(tiny_data.make_instance(rng, seq, predictions, VOCAB),
                                     specs).SerializeToString() for _ in range(512)]
  return _records.write_shards(directory, serialized, num_files, per_file, stride=31)


def input_rate(input_fn, batch_size, batches, threads, warmup=10):
  """examples/s of reading `batches` batches of input_fn's dataset after `warmup` batches."""
  with tf.Graph().as_default():
    iterator = tf.data.make_initializable_iterator(input_fn({}))
    next_batch = iterator.get_next()
    with tf.Session(config=_timing.session_config(threads)) as session:
      session.run(iterator.initializer)
      return _timing.examples_per_second(session, next_batch, batch_size, batches, warmup)


def first_batch_seconds(input_fn, threads):
  """Seconds from building input_fn's dataset to its first batch."""
  start = time.perf_counter()
  with tf.Graph().as_default():
    next_batch = tf.data.make_one_shot_iterator(input_fn({})).get_next()
    with tf.Session(config=_timing.session_config(threads)) as session:
      session.run(next_batch)
  return time.perf_counter() - start


def readers(paths, args, index_of, position=0):
  """{pipeline: input_fn} of one worker's training stream from `position` micro-batches on."""
  from bert_fin.input import dali
  from bert_fin.input import stream
  from bert_fin.input import tfdata
  from bert_fin.records import schema
  layout = schema.RecordLayout(args.seq, args.predictions)

  def view(sharding, num_epochs):
    order = stream.DataOrder(1, 1, args.batch_size, sharding)
    order.add_epoch(paths, [stream.record_count(p, index_of[p]) for p in paths])
    return stream.WorkerStream(order, 0, position, num_epochs)

  def mixture_view():
    half = len(paths) // 2
    order = stream.MixedOrder(1, 1, args.batch_size, "files",
                              [stream.Source("a", "a", 1.0), stream.Source("b", "b", 1.0)])
    stream.record_ahead(order, position + 1, 1, [paths[:half], paths[half:]],
                        lambda path: stream.record_count(path, index_of[path]))
    return stream.MixtureStream(order, 0, position)

  epochs = 2 + (args.batches * args.batch_size) // (args.num_files * args.per_file)
  tfdata_view, dali_view = view("files", None), view("records", epochs)
  mixed_view = mixture_view()
  return {"tf.data": lambda params: tfdata.training_dataset(tfdata_view, layout, args.batch_size),
          "DALI (CPU)": lambda params: dali.training_dataset(dali_view, layout, args.batch_size,
                                                             index_of, args.threads),
          "tf.data mix": lambda params: tfdata.training_dataset(mixed_view, layout,
                                                                args.batch_size)}


def resume_costs(paths, args, index_of):
  """{pipeline: (seconds to first batch at 0, at half an epoch, records skipped)}."""
  half = args.num_files * args.per_file // 2 // args.batch_size
  times = {name: [] for name in readers(paths, args, index_of)}
  for position in (0, half):
    for name, input_fn in readers(paths, args, index_of, position).items():
      times[name].append(first_batch_seconds(input_fn, args.threads))
  return {name: (at[0], at[1], half * args.batch_size) for name, at in times.items()}


def step_rate(model, input_fn, batch_size, steps, threads, warmup=2):
  """examples/s one training step (forward, backward, Adam) consumes, fed a constant batch."""
  from bert_fin import modeling
  from bert_fin.training.graph import losses as losses_lib
  config = modeling.BertConfig(vocab_size=VOCAB, **MODELS[model])
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(input_fn({})).get_next()
    with tf.Session(config=_timing.session_config(threads)) as session:
      constant = session.run(batch)
    features = tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensors(constant).repeat()).get_next()
    bert = modeling.BertModel(config=config, is_training=True, input_ids=features["input_ids"],
                              input_len=features["input_len"],
                              token_type_ids=features["segment_ids"])
    loss = losses_lib.pretraining_losses(config, bert, features)["total_loss"]
    train_op = tf.train.AdamOptimizer(1e-4).minimize(loss)
    with tf.Session(config=_timing.session_config(threads)) as session:
      session.run(tf.global_variables_initializer())
      return _timing.examples_per_second(session, train_op, batch_size, steps, warmup)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--num_files", type=int, default=8)
  parser.add_argument("--per_file", type=int, default=2048)
  parser.add_argument("--batches", type=int, default=300)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--models", default="tiny,base")
  parser.add_argument("--steps", type=int, default=3, help="timed training steps per model")
  parser.add_argument("--repeats", type=int, default=3, help="input rates: best of N")
  args = _quick.parse_args(parser, None, QUICK)
  from bert_fin.input import dali
  tf.disable_eager_execution()
  with tempfile.TemporaryDirectory(prefix="bench_input_") as directory:
    paths = write_records(directory, args.num_files, args.per_file, args.seq, args.predictions)
    index_of = dali.prepare_indexes(paths, os.path.join(directory, "index_cache"))
    builders = readers(paths, args, index_of)
    print("%d files x %d records, seq %d, P %d, batch %d, %d threads, %d timed batches, best of %d"
          % (args.num_files, args.per_file, args.seq, args.predictions, args.batch_size,
             args.threads, args.batches, args.repeats))
    rates = {}
    for _ in range(args.repeats):  # interleaved, best of N: the machine is shared
      for name, input_fn in builders.items():
        rate = input_rate(input_fn, args.batch_size, args.batches, args.threads)
        rates[name] = max(rates.get(name, 0.0), rate)
    for name, rate in rates.items():
      print("input  %-12s %10.0f examples/s  %5.2fx tf.data"
            % (name, rate, rate / rates["tf.data"]))
    for name, (at_zero, at_half, skipped) in resume_costs(paths, args, index_of).items():
      print("resume %-12s first batch %.2f s at position 0, %.2f s after skipping %d records "
            "(%.0f records/s skipped)" % (name, at_zero, at_half, skipped,
                                          skipped / max(at_half - at_zero, 1e-3)))
    for model in [m for m in args.models.split(",") if m]:
      consumed = step_rate(model, builders["tf.data"], args.batch_size, args.steps, args.threads)
      print("step   %-12s %10.1f examples/s  -> tf.data %.0fx, DALI %.0fx, mix %.0fx the step's "
            "need" % ("BERT-" + model, consumed, rates["tf.data"] / consumed,
                      rates["DALI (CPU)"] / consumed, rates["tf.data mix"] / consumed))


if __name__ == "__main__":
  main()
