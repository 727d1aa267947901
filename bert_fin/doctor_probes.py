"""The programs bert_fin.doctor runs in child processes (a broken DALI or NCCL can abort a process).

  python -m bert_fin.doctor_probes dali DIR
      Writes a tiny record shard into DIR with bert_fin's writer and its DALI index beside it,
      parses a run_pretraining command line (--input_pipeline dali), and builds the training input
      exactly as run_pretraining does: training/run.py's resolve, the data stream's first view
      (input/stream.py) and estimator.Reader's input_fn, called by the Estimator's own input
      code. Reads one batch and checks every decoded feature against records/schema.py (names,
      dtypes, shapes) and the values written. CPU-only DALI (the only mode).

  mpirun -np 2 python -m bert_fin.doctor_probes allreduce gpu|cpu
      Each rank joins Horovod through training/distributed.py (the training code), allreduces
      (rank + 1) with the training allreduce (Average) in a TF1 graph and session configured as for
      training (gpu: one GPU a rank), and checks the result and the device the HorovodAllreduce
      kernel ran on. gpu also needs Horovod built with NCCL; whether NCCL ran is seen by the
      doctor in the ranks' NCCL_DEBUG=INFO output. Rank 0 prints the one-line summary.

Both print their summary as the last stdout line; any failure raises (the doctor shows the last
stderr line).
"""
# Imports inside the functions: TF, DALI and Horovod load only when a probe runs; the pure checks
# (feature_problems, ...) stay importable without them.
# pylint: disable=import-outside-toplevel
import json
import os
import sys

PROBE_SEQ, PROBE_PREDICTIONS, PROBE_BATCH = 16, 3, 4
ALLREDUCE_NAME = "HorovodAllreduce"


def probe_instances():
  """PROBE_BATCH unpadded instances (input_ids, segment_ids, positions, masked ids, label),
  distinguishable by their first token id."""
  instances = []
  for i in range(PROBE_BATCH):
    length = 5 + i
    input_ids = [2] + [10 + i] * (length - 2) + [3]
    segment_ids = [0] * (length // 2) + [1] * (length - length // 2)
    instances.append((input_ids, segment_ids, [1, 2][:1 + i % 2], [10 + i] * (1 + i % 2), i % 2))
  return instances


def write_probe_shard(directory):
  """Writes the probe records with data/writer.py and their DALI index beside them (what
  tfrecord2idx writes). Returns (shard path, {first token id: padded feature dict})."""
  from bert_fin.data import writer
  from bert_fin.records import tfrecord_index
  encoder = writer.ExampleEncoder(PROBE_SEQ, PROBE_PREDICTIONS)
  path = os.path.join(directory, "probe-00000-of-00001.tfrecord")
  expected = {}
  with writer.ShardedRecordWriter([path]) as out:
    for instance in probe_instances():
      features = encoder.padded_features(*instance)
      expected[instance[0][1]] = features
      out.write(encoder.encode_features(features))
  tfrecord_index.write_index(path)
  return path, expected


def probe_flag_values(directory, shard):
  """run_pretraining's flags (training/flags.py, every default) parsed from a command line."""
  from absl import flags
  from bert_fin.modeling import config as config_lib
  from bert_fin.training import flags as train_flags
  config_path = os.path.join(directory, "bert_config.json")
  tiny = config_lib.BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=16,
                               max_position_embeddings=PROBE_SEQ)
  with open(config_path, "w", encoding="utf-8") as f:
    f.write(tiny.to_json_string())
  values = train_flags.define_flags(flags.FlagValues())
  values(["run_pretraining.py", "--bert_config_file=" + config_path, "--input_file=" + shard,
          "--output_dir=" + os.path.join(directory, "out"), "--do_train",
          "--input_pipeline=dali", "--max_seq_length=%d" % PROBE_SEQ,
          "--max_predictions_per_seq=%d" % PROBE_PREDICTIONS,
          "--train_batch_size=%d" % PROBE_BATCH, "--num_train_steps=1"])
  return values


def expected_shapes_and_dtypes(batch_size):
  """{name: (shape, dtype name)} of a decoded batch, from records/schema.py's specs and decoding
  contract: int32 (float32 weights), [B, length], input_len [B]."""
  from bert_fin.records import schema
  out = {}
  for spec in schema.read_specs(PROBE_SEQ, PROBE_PREDICTIONS):
    shape = (batch_size,) if spec.name == schema.INPUT_LEN else (batch_size, spec.length)
    out[spec.name] = (shape, "float32" if spec.dtype == schema.FLOAT32 else "int32")
  return out


def feature_problems(batch, expected_records, batch_size):
  """Differences between one decoded numpy batch and the records written (pure: testable)."""
  from bert_fin.records import schema
  wanted = expected_shapes_and_dtypes(batch_size)
  problems = ["features %s != %s" % (sorted(batch), sorted(wanted))] if set(batch) != set(
      wanted) else []
  for name in sorted(set(batch) & set(wanted)):
    found = (tuple(batch[name].shape), str(batch[name].dtype))
    if found != wanted[name]:
      problems.append("%s is %s %s, expected %s %s" % ((name,) + found[::-1] + wanted[name][::-1]))
  if problems:
    return problems
  for row in range(batch_size):
    key = int(batch[schema.INPUT_IDS][row][1])
    if key not in expected_records:
      problems.append("row %d: input_ids %s were never written" % (
          row, batch[schema.INPUT_IDS][row].tolist()))
      continue
    for name, values in expected_records[key].items():
      got = batch[name][row].reshape(-1).tolist()
      if got != [type(got[0])(v) for v in values]:
        problems.append("row %d: %s = %s, written %s" % (row, name, got, values))
  return problems


def run_dali_probe(directory):
  """The DALI input through run_pretraining's code path; returns the summary line or raises."""
  import tensorflow.compat.v1 as tf
  from nvidia import dali
  from tensorflow_estimator.python.estimator import estimator as estimator_lib
  from tensorflow_estimator.python.estimator import model_fn as model_fn_lib
  from bert_fin.input import stream
  from bert_fin.training import distributed
  from bert_fin.training import estimator
  from bert_fin.training import run as run_lib
  shard, expected = write_probe_shard(directory)
  values = probe_flag_values(directory, shard)
  dist = distributed.init(False)
  run = run_lib.resolve(values, dist)
  os.makedirs(values.output_dir, exist_ok=True)
  # what estimator.train_and_evaluate hands to Estimator.train on a fresh start (the data
  # stream's view from position 0), read below as Estimator.train reads it
  reader = estimator.Reader(run)
  data_stream = stream.DataStream(run.order(), dist, run.settings.output.output_dir, None,
                                  run.settings.optimizer.num_accumulation_steps)
  input_fn = reader.training_input_fn(data_stream.view(0, reader.view_micro_batches(0)))
  est = estimator_lib.Estimator(model_fn=lambda features, labels, mode: None,
                                model_dir=os.path.join(directory, "model"))
  with tf.Graph().as_default() as graph:
    read_input = est._get_features_and_labels_from_input_fn  # pylint: disable=protected-access
    features, _, hooks = read_input(input_fn, model_fn_lib.ModeKeys.TRAIN)
    dali_ops = [op for op in graph.get_operations() if op.type == "DALIDataset"]
    if len(dali_ops) != 1 or dali_ops[0].get_attr("device_id") >= 0:
      raise RuntimeError("expected one CPU DALIDataset in the input graph, found %s"
                         % [(op.name, op.get_attr("device_id")) for op in dali_ops])
    with tf.train.MonitoredSession(hooks=hooks) as session:
      batch = session.run(features)
  problems = feature_problems(batch, expected, PROBE_BATCH)
  if problems:
    raise RuntimeError("DALI input_fn batch differs from the records written: "
                       + "; ".join(problems[:3]))
  return ("DALI %s via run_pretraining's input_fn (--input_pipeline dali, CPU): batch of %d, %d "
          "features as schema.py" % (dali.__version__, PROBE_BATCH, len(batch)))


def run_allreduce_probe(device):
  """One rank of the allreduce probe (device "gpu" or "cpu"); returns rank 0's summary or None."""
  import numpy as np
  import tensorflow.compat.v1 as tf
  from bert_fin.training import distributed
  tf.disable_eager_execution()
  dist = distributed.init(True)
  hvd = dist._hvd  # pylint: disable=protected-access
  if device == "gpu" and not hvd.nccl_built():
    raise RuntimeError("Horovod was built without NCCL: GPU allreduces would go through MPI")
  with tf.Graph().as_default():
    with tf.device("/gpu:0" if device == "gpu" else "/cpu:0"):
      mine = tf.placeholder(tf.float32, [1024])  # fed: a constant would be folded by grappler
      averaged = dist.allreduce([mine])[0]
    options = tf.RunOptions(output_partition_graphs=True)
    metadata = tf.RunMetadata()
    with tf.Session(config=dist.session_config()) as session:
      result = session.run(averaged, {mine: np.full([1024], dist.rank + 1.0, np.float32)},
                           options=options, run_metadata=metadata)
  placed = sorted({node.device.rsplit("/", 1)[-1] for graph in metadata.partition_graphs
                   for node in graph.node if node.op == ALLREDUCE_NAME})
  wanted = (dist.size + 1) / 2.0  # mean of 1..size
  if not np.allclose(result, wanted):
    raise RuntimeError("rank %d: allreduce gave %s, expected %s" % (dist.rank, result[:4], wanted))
  if len(placed) != 1 or not placed[0].upper().startswith("DEVICE:" + device.upper()):
    raise RuntimeError("rank %d: %s ran on %s, expected the %s" % (dist.rank, ALLREDUCE_NAME,
                                                                   placed, device.upper()))
  if dist.rank != 0:
    return None
  backend = "NCCL" if device == "gpu" else ("MPI" if hvd.mpi_enabled() else "Gloo")
  return json.dumps({"ranks": dist.size, "device": placed[0], "result": float(result[0]),
                     "expected": wanted, "operations": backend,
                     "nccl_built": int(hvd.nccl_built())})


def main(argv):
  if len(argv) != 2 or argv[0] not in ("dali", "allreduce"):
    print("usage: python -m bert_fin.doctor_probes dali DIR | allreduce gpu|cpu", file=sys.stderr)
    return 2
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import tensorflow.compat.v1 as tf
  tf.logging.set_verbosity(tf.logging.ERROR)  # here, not in the probes: tests call them in-process
  summary = run_dali_probe(argv[1]) if argv[0] == "dali" else run_allreduce_probe(argv[1])
  if summary:
    print(summary, flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
