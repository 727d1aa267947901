# coding=utf-8
"""Serving latency of a fine-tuned classifier: p50 / p99 ms a request and sequences/s, for each
batch x seq, side by side in one run, on the same CPU threads:

  estimator.predict   google's path: run_classifier's model_fn under Estimator.predict, one call a
                      request (the graph built and the checkpoint restored every time): the
                      baseline of the ratios;
  savedmodel text     the export's SavedModel in process, serving_default on raw text (its
                      tokenizer in the graph);
  savedmodel ids      the same SavedModel's ids signature on ids tokenized beforehand;
  onnxruntime         model.onnx (its layer norms, GELUs and attentions fused at export:
                      serving/onnx_graph.py) on the same ids (onnx_client's session: idle
                      threads do not spin, for a service sharing its cores);
  onnxruntime spin    the same with onnxruntime's default, spinning idle threads;
  onnx client         the export's onnx_client.py: tokenizer.json + onnxruntime on raw text;
  torch transformers  the exported transformers folder under PyTorch (BertForSequenceClassification
                      + BertTokenizerFast on raw text) where torch and transformers import, else
                      the row says "skipped: no torch".

  python bench/bench_serving.py [--hidden 256 --layers 4 --heads 4 --intermediate 1024
      --vocab 21128] [--batches 1,8,32] [--seqs 128,512] [--requests 20]
      [--estimator_requests 3] [--threads 2] [--quick]
Random weights (a classifier of --labels labels on the model size given), texts of random
characters of the vocab, one token each, long enough to fill the sequence. A request is one
batch; the paths take turns, one request each a round (every path meets the same load), p50 /
p99 over the rounds after one untimed warm-up request each. Prints the table and,
at each cell, the ratios estimator.predict / savedmodel, estimator.predict / onnxruntime and
onnxruntime / savedmodel (ids rows); at the end, onnxruntime / savedmodel ids of every cell on
one line, in wall time and in CPU time (the process's CPU seconds during a call: on a machine
other jobs load, the wall time also measures how the scheduler shared the cores).
"""
import argparse
import os
import platform
import random
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import numpy as np  # noqa: E402
import _model_size  # noqa: E402  (bench/_model_size.py)
import _quick  # noqa: E402  (bench/_quick.py)

QUICK = dict(hidden=32, layers=2, heads=2, intermediate=64, vocab=600, batches="1,2", seqs="32",
             requests=3, estimator_requests=1)
ROWS = ("estimator.predict", "savedmodel text", "savedmodel ids", "onnxruntime",
        "onnxruntime spin", "onnx client", "torch transformers")
LABELS = ("negative", "positive")


def cpu_name():
  """The CPU's model name (/proc/cpuinfo), else the platform's machine type."""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.machine()


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  _model_size.add_flags(parser)
  parser.add_argument("--batches", default="1,8,32")
  parser.add_argument("--seqs", default="128,512")
  parser.add_argument("--requests", type=int, default=20, help="timed requests a cell and path")
  parser.add_argument("--estimator_requests", type=int, default=3,
                      help="timed requests of estimator.predict (each takes seconds)")
  parser.add_argument("--threads", type=int, default=2)
  return _quick.parse_args(parser, argv, QUICK)


def write_vocab(path, size):
  """google's layout ([PAD], [unused1..99], [UNK] [CLS] [SEP] [MASK]) then CJK characters."""
  tokens = ["[PAD]"] + ["[unused%d]" % i for i in range(1, 100)] + [
      "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  tokens += [chr(0x4E00 + i) for i in range(size - len(tokens))]
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in tokens))
  return tokens


def write_finetuned(work, config):
  """A run_classifier output directory of random weights (labels.txt, a checkpoint)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.classify import model as classifier_model  # pylint: disable=C0415
  return write_random_model(os.path.join(work, "finetuned"), LABELS, lambda: (
      classifier_model.create_model(config, False, {
          "input_ids": tf.zeros([1, 8], tf.int32), "segment_ids": tf.zeros([1, 8], tf.int32),
          "input_len": tf.constant([8]), "label_ids": tf.zeros([1], tf.int32)}, len(LABELS))))


def write_random_model(out, labels, build):
  """out/: build()'s variables (built in a fresh graph, seed 0) at random values as a fine-tuned
  checkpoint, and labels.txt; returns out."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  os.makedirs(out)
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    build()
    tf.train.get_or_create_global_step()  # as a fine-tuned checkpoint: Estimator restores it
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, os.path.join(out, "model.ckpt-1"))
  with open(os.path.join(out, "labels.txt"), "w", encoding="utf-8") as f:
    f.write("".join(label + "\n" for label in labels))
  return out


def interleaved_times(calls, requests, estimator_requests):
  """({row: [seconds]}, {row: [CPU seconds]}): one untimed warm-up call of each, then `requests`
  rounds each timing one call of every row in turn (estimator.predict in the first
  estimator_requests rounds only), so every path meets the same load of a shared machine; the
  CPU seconds are the process's (every thread) during the call: the work a path does, which the
  load does not change."""
  for call in calls.values():
    call()
  times = {row: [] for row in calls}
  cpu_times = {row: [] for row in calls}
  for round_number in range(requests):
    for row, call in calls.items():
      if row == ROWS[0] and round_number >= estimator_requests:
        continue
      start, cpu_start = time.perf_counter(), time.process_time()
      call()
      times[row].append(time.perf_counter() - start)
      cpu_times[row].append(time.process_time() - cpu_start)
  return times, cpu_times


def estimator_call(config, checkpoint, arrays, threads):
  """google's per-request path: Estimator.predict over the request's rows, the graph built and
  the checkpoint restored in the call."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune import batches  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.classify import model as classifier_model  # pylint: disable=C0415
  from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
  model_fn = classifier_model.model_fn_builder(config, len(LABELS), None, distributed.init(False))
  run_config = tf.estimator.RunConfig(
      model_dir=tempfile.mkdtemp(), session_config=tf.ConfigProto(
          intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads))
  estimator = tf.estimator.Estimator(model_fn, config=run_config)
  rows = len(arrays["input_ids"])

  def call():
    predictions = list(estimator.predict(batches.input_fn_builder(arrays, rows, False),
                                         checkpoint_path=checkpoint))
    assert len(predictions) == rows
  return call


def torch_call(export_hf_dir, texts, seq, threads):
  """transformers under PyTorch on raw text, or None when torch / transformers do not import."""
  try:
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  torch.set_num_threads(threads)
  tokenizer = transformers.BertTokenizerFast.from_pretrained(export_hf_dir)
  model = transformers.BertForSequenceClassification.from_pretrained(export_hf_dir).eval()

  def call():
    with torch.inference_mode():
      inputs = tokenizer(list(texts), padding="max_length", truncation=True, max_length=seq,
                         return_tensors="pt")
      model(**inputs).logits.numpy()
  return call


def cell_calls(args, work, config, finetuned, vocab_file, seq, batch, hf_dir):
  """{row: call} of one batch x seq (an export of sequence length seq is made once)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import tokenization  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.classify import features  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.classify import tasks  # pylint: disable=g-import-not-at-top
  from bert_fin.serving import export  # pylint: disable=g-import-not-at-top
  from bert_fin.serving import onnx_client  # pylint: disable=g-import-not-at-top  (exports' copy)
  export_dir = os.path.join(work, "export-%d" % seq)
  if not os.path.isdir(export_dir):
    export.export(export.Request(finetuned, os.path.join(work, "bert_config.json"), vocab_file,
                                 True, seq, export_dir, False, True))
  rng = random.Random(seq * 1000 + batch)
  chars = [chr(0x4E00 + i) for i in range(min(3000, config.vocab_size - 104))]
  texts = ["".join(rng.choice(chars) for _ in range(seq - 2)) for _ in range(batch)]
  examples = [tasks.Example(str(i), text, None, None) for i, text in enumerate(texts)]
  arrays = features.encode(examples, list(LABELS), tokenization.FullTokenizer(vocab_file),
                           seq).arrays
  ids = {"input_ids": arrays["input_ids"], "segment_ids": arrays["segment_ids"],
         "input_mask": (np.arange(seq)[None, :] < arrays["input_len"][:, None]).astype(np.int32)}
  loaded = tf.saved_model.load(os.path.join(export_dir, export.SAVED_MODEL_DIR))
  text_signature, ids_signature = loaded.signatures["serving_default"], loaded.signatures["ids"]
  text_tensor = tf.constant(texts)
  ids_tensors = {name: tf.constant(value) for name, value in ids.items()}
  client = onnx_client.OnnxClassifier(export_dir, threads=args.threads)
  spinning = onnx_client.OnnxClassifier(export_dir, threads=args.threads, spin=True)
  estimator_arrays = {name: arrays[name] for name in ("input_ids", "input_len", "segment_ids",
                                                      "label_ids")}
  return {
      "estimator.predict": estimator_call(config, os.path.join(finetuned, "model.ckpt-1"),
                                          estimator_arrays, args.threads),
      "savedmodel text": lambda: text_signature(text=text_tensor)["probabilities"].numpy(),
      "savedmodel ids": lambda: ids_signature(**ids_tensors)["probabilities"].numpy(),
      "onnxruntime": lambda: client.run(ids),
      "onnxruntime spin": lambda: spinning.run(ids),
      "onnx client": lambda: client.classify(texts),
      "torch transformers": torch_call(hf_dir, texts, seq, args.threads) if hf_dir else None,
  }


def export_hf(work, finetuned, vocab_file):
  """The transformers folder of the fine-tuned model when torch imports, else None."""
  try:
    import torch  # pylint: disable=g-import-not-at-top,unused-import
    import transformers  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return None
  from bert_fin.export import hf  # pylint: disable=g-import-not-at-top
  out = os.path.join(work, "hf")
  hf.export(os.path.join(work, "bert_config.json"), finetuned, vocab_file, out)
  return out


def main(argv=None):
  args = parse_args(argv)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.get_logger().setLevel("ERROR")  # Estimator's deprecation notices, once a request
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  work = tempfile.mkdtemp(prefix="bench_serving-")
  try:
    return run(args, work)
  finally:
    shutil.rmtree(work, ignore_errors=True)


def run(args, work):
  """Makes the model and its exports in `work`, prints the table."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_fin.serving import onnx_client  # pylint: disable=g-import-not-at-top
  batches, seqs = [int(b) for b in args.batches.split(",")], [int(s) for s in args.seqs.split(",")]
  config = _model_size.bert_config(args, max_position_embeddings=max(seqs))
  with open(os.path.join(work, "bert_config.json"), "w", encoding="utf-8") as f:
    f.write(config.to_json_string())
  vocab_file = os.path.join(work, "vocab.txt")
  write_vocab(vocab_file, args.vocab)
  finetuned = write_finetuned(work, config)
  hf_dir = export_hf(work, finetuned, vocab_file)
  print("classifier H=%d L=%d A=%d I=%d vocab %d, %d labels, fp32 CPU, %d threads (%d cores "
        "seen); p50 / p99 ms a request, sequences/s, p50 CPU ms a request (the process's)" % (
            args.hidden, args.layers, args.heads, args.intermediate, args.vocab, len(LABELS),
            args.threads, os.cpu_count()), flush=True)
  print("%-6s %-6s %-20s %10s %10s %10s %10s" % ("batch", "seq", "path", "p50 ms", "p99 ms",
                                                 "seq/s", "cpu ms"))
  onnx_ratios = []
  for seq in seqs:
    for batch in batches:
      calls = cell_calls(args, work, config, finetuned, vocab_file, seq, batch, hf_dir)
      times, cpu_times = interleaved_times(
          {row: call for row, call in calls.items() if call is not None}, args.requests,
          args.estimator_requests)
      p50, cpu = {}, {}
      for row in ROWS:
        if row not in times:
          print("%-6d %-6d %-20s skipped: no torch" % (batch, seq, row), flush=True)
          continue
        milliseconds = np.array(times[row]) * 1000.0
        p50[row] = float(np.percentile(milliseconds, 50))
        cpu[row] = float(np.percentile(cpu_times[row], 50)) * 1000.0
        print("%-6d %-6d %-20s %10.2f %10.2f %10.1f %10.2f" % (
            batch, seq, row, p50[row], np.percentile(milliseconds, 99),
            batch * 1000.0 / p50[row], cpu[row]), flush=True)
      print("ratios b%d s%d: estimator.predict / savedmodel text x%.1f, estimator.predict / "
            "onnxruntime x%.1f, onnxruntime / savedmodel ids x%.2f, onnxruntime spin / "
            "savedmodel ids x%.2f (p50)" % (
                batch, seq, p50["estimator.predict"] / p50["savedmodel text"],
                p50["estimator.predict"] / p50["onnxruntime"],
                p50["onnxruntime"] / p50["savedmodel ids"],
                p50["onnxruntime spin"] / p50["savedmodel ids"]), flush=True)
      onnx_ratios.append("b%d s%d x%.2f (cpu x%.2f)" % (
          batch, seq, p50["onnxruntime"] / p50["savedmodel ids"],
          cpu["onnxruntime"] / cpu["savedmodel ids"]))
  print("onnxruntime / savedmodel ids (p50; below 1: onnxruntime faster): "
        + ", ".join(onnx_ratios))
  print("machine: %s, %d cores seen, load average %.1f; TensorFlow %s, onnxruntime %s" % (
      cpu_name(), os.cpu_count(), os.getloadavg()[0], tf.__version__,
      onnx_client.onnxruntime.__version__))
  return 0


if __name__ == "__main__":
  sys.exit(main())
