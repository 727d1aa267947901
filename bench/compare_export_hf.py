"""Exported folder vs bert_fin's TF model: same token ids, same MLM (and NSP) logits in transformers;
for a run_classifier output (BertForSequenceClassification), the same classifier logits as
run_classifier's graph (classifier.create_model); for a run_ner output
(BertForTokenClassification), the same per-token logits as run_ner's (ner_model.create_model);
for a run_squad output (BertForQuestionAnswering), the same start / end logits as run_squad's
(squad_model.create_model).

Two phases, because bert_fin's venv has TensorFlow and no PyTorch:

  # 1. bert_fin's venv: tokenize with bert_fin's FullTokenizer, run bert_fin's BertModel + heads
  #    on the checkpoint itself (not on the export) and save ids and logits
  python bench/compare_export_hf.py tf --bert_config_file=... --init_checkpoint=... \\
      --vocab_file=... --hf_dir=EXPORTED --npz=/tmp/ref.npz
  # 2. a venv with torch + transformers 4.x (+ safetensors, numpy<2): load EXPORTED with
  #    from_pretrained (no missing/unexpected keys allowed), BertTokenizerFast ids must equal,
  #    logits max abs diff <= --tolerance (1e-4)
  /path/to/hf-venv/bin/python bench/compare_export_hf.py hf --hf_dir=EXPORTED --npz=/tmp/ref.npz

`all` runs phase 1, then phase 2 with --hf_python. Exit status 0 when everything matches, 1 when a
figure is off, 2 when a phase cannot run (missing torch/transformers, missing files).

  python bench/compare_export_hf.py --quick   # = all, on a tiny random BERT exported to a temp dir
--quick saves a tiny BERT (H=32, L=2, random weights, MLM + NSP heads) with a vocab trained on the
texts below, exports it with bert-fin-export-hf, then runs `all`; without a --hf_python it prints
that phase 2 was skipped and exits 0.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import _quick  # bench/_quick.py

TEXTS = [
    ("贵州茅台2023年营收增长18%，净利润达到747亿元。", "公司拟每股派发现金红利25.91元。"),
    ("沪深300指数收跌0.52%，北向资金净流出32亿元", "半导体板块逆势走强"),
    ("中国平安发布公告称，将回购不超过100亿元A股股份", None),
    ("央行宣布下调存款准备金率0.25个百分点，释放长期资金约5000亿元。", "市场预期降息空间有限"),
    ("Apple与宁德时代CATL签署电池供货协议, CEO称Q3交付", None),
]
SEQ_LENGTH = 48
QUICK = dict(phase="all")


def tf_phase(args):
  """Phase 1: bert_fin tokenizer + TF model on the checkpoint -> npz."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  from bert_fin import tokenization  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.classify import features  # pylint: disable=g-import-not-at-top

  config = modeling.BertConfig.from_json_file(args.bert_config_file)
  tokenizer = tokenization.FullTokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
  ids = np.zeros([len(TEXTS), SEQ_LENGTH], np.int32)
  types = np.zeros_like(ids)
  lengths = np.zeros([len(TEXTS)], np.int32)
  for row, (text_a, text_b) in enumerate(TEXTS):
    # a vocab that cuts the texts finer than SEQ_LENGTH allows: google's truncation (and
    # transformers' longest_first in phase 2, the same rule)
    tokens_a, tokens_b = tokenizer.tokenize(text_a), tokenizer.tokenize(text_b or "")
    features.truncate_seq_pair(tokens_a, tokens_b, SEQ_LENGTH - (3 if text_b else 2))
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segment = [0] * len(tokens)
    if text_b:
      tokens += tokens_b + ["[SEP]"]
      segment += [1] * (len(tokens_b) + 1)
    ids[row, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
    types[row, :len(tokens)] = segment
    lengths[row] = len(tokens)
  shapes = dict(tf.train.list_variables(args.init_checkpoint))
  if "output_weights" in shapes:
    return _classifier_phase(args, config, ids, types, lengths, shapes["output_weights"][0])
  if "ner/output_weights" in shapes:
    return _classifier_phase(args, config, ids, types, lengths, shapes["ner/output_weights"][0],
                             token=True)
  if "cls/squad/output_weights" in shapes:
    return _span_phase(args, config, ids, types, lengths)
  has_nsp = any(name.startswith("cls/seq_relationship/") for name in shapes)
  with tf.Graph().as_default():
    fetches = model_and_heads(config, ids, types, lengths, has_nsp)
    modeling.init_from_checkpoint(args.init_checkpoint, log=None)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      values = session.run(fetches)
  values["mlm_logits"] = values["mlm_logits"].reshape([len(TEXTS), SEQ_LENGTH, -1])
  np.savez(args.npz, input_ids=ids, token_type_ids=types, input_len=lengths,
           texts=np.array(json.dumps(TEXTS, ensure_ascii=False)), **values)
  print("phase 1 (bert_fin TF): %d inputs, logits of %s -> %s" % (
      len(TEXTS), ", ".join(sorted(k for k in values if k.endswith("logits"))), args.npz))
  return 0


def _classifier_phase(args, config, ids, types, lengths, num_labels, token=False):
  """Phase 1 for a run_classifier checkpoint (or, token=True, a run_ner one): its eval/predict
  graph's logits -> npz (classifier_logits [batch, labels] / token_logits [batch, S, tags])."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.classify import model as classifier  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.ner import model as ner_model  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default():
    features = {"input_ids": tf.constant(ids), "input_len": tf.constant(lengths),
                "segment_ids": tf.constant(types)}
    if token:
      features.update(label_ids=tf.zeros_like(features["input_ids"]),
                      label_mask=tf.zeros_like(features["input_ids"]))
      _, _, logits, _ = ner_model.create_model(config, False, features, num_labels)
    else:
      features["label_ids"] = tf.zeros([len(TEXTS)], tf.int32)
      _, _, logits, _ = classifier.create_model(config, False, features, num_labels)
    modeling.init_from_checkpoint(args.init_checkpoint, log=None)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      values = {("token_logits" if token else "classifier_logits"): session.run(logits)}
  np.savez(args.npz, input_ids=ids, token_type_ids=types, input_len=lengths,
           texts=np.array(json.dumps(TEXTS, ensure_ascii=False)), **values)
  print("phase 1 (bert_fin TF, %s graph): %d inputs, %d labels -> %s" % (
      "run_ner" if token else "run_classifier", len(TEXTS), num_labels, args.npz))
  return 0


def _span_phase(args, config, ids, types, lengths):
  """Phase 1 for a run_squad checkpoint: its predict graph's start / end logits [batch, S]."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.squad import model as squad_model  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default():
    start, end = squad_model.create_model(config, False, {
        "input_ids": tf.constant(ids), "input_len": tf.constant(lengths),
        "segment_ids": tf.constant(types)})
    modeling.init_from_checkpoint(args.init_checkpoint, log=None)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      start_logits, end_logits = session.run([start, end])
  np.savez(args.npz, input_ids=ids, token_type_ids=types, input_len=lengths,
           texts=np.array(json.dumps(TEXTS, ensure_ascii=False)), start_logits=start_logits,
           end_logits=end_logits)
  print("phase 1 (bert_fin TF, run_squad graph): %d inputs -> %s" % (len(TEXTS), args.npz))
  return 0


def model_and_heads(config, ids, types, lengths, has_nsp):
  """Builds BertModel + the MLM (and NSP) head in the current graph.

  ids, types: int32 [batch, SEQ_LENGTH]; lengths: int32 [batch]. Returns {name: tensor}:
  mlm_logits [batch * SEQ_LENGTH, vocab], sequence_output [batch, SEQ_LENGTH, hidden] and, with
  has_nsp, nsp_logits [batch, 2]."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  model = modeling.BertModel(config, False, tf.constant(ids), input_len=tf.constant(lengths),
                             token_type_ids=tf.constant(types))
  positions = tf.constant(np.tile(np.arange(SEQ_LENGTH, dtype=np.int32), [len(ids), 1]))
  zeros = tf.zeros_like(positions)
  _, _, mlm_log_probs = modeling.get_masked_lm_output(
      config, model.get_sequence_output(), model.get_embedding_table(), positions, zeros,
      tf.cast(zeros, tf.float32))
  fetches = {"mlm_logits": _logits_of(mlm_log_probs), "sequence_output": model.sequence_output}
  if has_nsp:
    _, _, nsp_log_probs = modeling.get_next_sentence_output(
        config, model.get_pooled_output(), tf.zeros([len(ids)], tf.int32))
    fetches["nsp_logits"] = _logits_of(nsp_log_probs)
  return fetches


def quick_inputs(args, work_dir):
  """--quick: a tiny BERT with random weights (bench/_quick.py) saved in work_dir, exported with
  bert-fin-export-hf; fills in the args phase 1 and 2 need."""
  from bert_fin.cli import export_hf  # pylint: disable=g-import-not-at-top
  ids = np.zeros([1, SEQ_LENGTH], np.int32)
  args.bert_config_file, args.vocab_file, args.init_checkpoint = _quick.tiny_bert(
      work_dir, [text for pair in TEXTS for text in pair], SEQ_LENGTH,
      lambda config: model_and_heads(config, ids, ids, np.full([1], SEQ_LENGTH, np.int32),
                                     has_nsp=True))
  args.hf_dir = args.hf_dir or os.path.join(work_dir, "hf")
  args.npz = args.npz or os.path.join(work_dir, "ref.npz")
  status = export_hf.main(["--bert_config_file", args.bert_config_file, "--init_checkpoint",
                           args.init_checkpoint, "--vocab_file", args.vocab_file, "--output_dir",
                           args.hf_dir])
  if status:
    raise SystemExit(status)


def _logits_of(log_probs):
  """The logits tensor a tf.nn.log_softmax was applied to (the heads return log-probs)."""
  op = log_probs.op
  if op.type != "LogSoftmax":
    raise RuntimeError("expected a LogSoftmax op, got %s" % op.type)
  return op.inputs[0]


def hf_phase(args):
  """Phase 2: transformers on the exported folder vs the npz of phase 1."""
  try:
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    print("compare_export_hf: phase hf needs torch and transformers 4.x in this Python (%s): %s"
          % (sys.executable, e), file=sys.stderr)
    return 2
  ref = np.load(args.npz)
  texts = json.loads(str(ref["texts"]))
  architecture = json.load(open(os.path.join(args.hf_dir, "config.json")))["architectures"][0]
  model_class = getattr(transformers, architecture)
  model, info = model_class.from_pretrained(args.hf_dir, output_loading_info=True)
  model.eval()
  problems = ["%s: %s" % (key, info[key]) for key in ("missing_keys", "unexpected_keys",
                                                       "mismatched_keys") if info.get(key)]
  tokenizer = transformers.BertTokenizerFast.from_pretrained(args.hf_dir)
  # Pairs and singles mixed: encode one by one, pad like phase 1.
  ids = np.zeros_like(ref["input_ids"])
  types = np.zeros_like(ids)
  for row, (text_a, text_b) in enumerate(texts):
    encoding = tokenizer(text_a, text_b, truncation="longest_first", max_length=ids.shape[1])
    ids[row, :len(encoding["input_ids"])] = encoding["input_ids"]
    types[row, :len(encoding["token_type_ids"])] = encoding["token_type_ids"]
  if not (np.array_equal(ids, ref["input_ids"]) and np.array_equal(types, ref["token_type_ids"])):
    problems.append("token ids differ: bert_fin %s vs BertTokenizerFast %s" % (
        ref["input_ids"].tolist(), ids.tolist()))
  mask = (np.arange(ids.shape[1])[None] < ref["input_len"][:, None]).astype(np.int64)
  with torch.no_grad():
    output = model(input_ids=torch.tensor(ref["input_ids"], dtype=torch.long),
                   token_type_ids=torch.tensor(ref["token_type_ids"], dtype=torch.long),
                   attention_mask=torch.tensor(mask), output_hidden_states=True)
  real = mask.astype(bool)
  if "classifier_logits" in ref.files:
    diffs = {"classifier_logits": np.abs(output.logits.numpy() - ref["classifier_logits"]).max()}
    print("  predicted labels equal: %s" % np.array_equal(
        output.logits.numpy().argmax(-1), ref["classifier_logits"].argmax(-1)))
  elif "start_logits" in ref.files:
    diffs = {name: np.abs(getattr(output, name).numpy()[real] - ref[name][real]).max()
             for name in ("start_logits", "end_logits")}
  elif "token_logits" in ref.files:
    logits = output.logits.numpy()[real]
    diffs = {"token_logits": np.abs(logits - ref["token_logits"][real]).max()}
    print("  predicted tags equal: %s" % np.array_equal(
        logits.argmax(-1), ref["token_logits"][real].argmax(-1)))
  else:
    diffs = {"mlm_logits": np.abs(_mlm(output)[real] - ref["mlm_logits"][real]).max()}
    diffs["sequence_output"] = np.abs(output.hidden_states[-1].numpy()[real]
                                      - ref["sequence_output"][real]).max()
  if "nsp_logits" in ref.files:
    diffs["nsp_logits"] = np.abs(output.seq_relationship_logits.numpy() - ref["nsp_logits"]).max()
  print("phase 2 (transformers %s, torch %s): %s, %d inputs, %d real tokens" % (
      transformers.__version__, torch.__version__, architecture, len(texts), int(real.sum())))
  print("  loading: missing_keys=%s unexpected_keys=%s" % (info.get("missing_keys"),
                                                          info.get("unexpected_keys")))
  print("  token ids and segment ids equal to bert_fin's: %s" % (
      np.array_equal(ids, ref["input_ids"]) and np.array_equal(types, ref["token_type_ids"])))
  for name, value in sorted(diffs.items()):
    print("  max |transformers - bert_fin| %-16s = %.3g" % (name, value))
    if name.endswith("logits") and not value <= args.tolerance:
      problems.append("%s differ by %.3g > %g" % (name, value, args.tolerance))
  for problem in problems:
    print("MISMATCH: " + problem)
  print("RESULT: %s" % ("OK" if not problems else "FAILED"))
  return 1 if problems else 0


def _mlm(output):
  return (output.prediction_logits if hasattr(output, "prediction_logits")
          else output.logits).numpy()


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("phase", choices=["tf", "hf", "all"], nargs="?")
  parser.add_argument("--hf_dir", help="folder written by bert-fin-export-hf (required)")
  parser.add_argument("--npz", help="phase 1 output / phase 2 input (required)")
  parser.add_argument("--bert_config_file")
  parser.add_argument("--init_checkpoint")
  parser.add_argument("--vocab_file")
  parser.add_argument("--do_lower_case", default="true")
  parser.add_argument("--tolerance", type=float, default=1e-4)
  parser.add_argument("--hf_python", default=os.environ.get("BERT_FIN_HF_PYTHON", ""),
                      help="(all) the Python with torch + transformers for phase 2 (default: "
                           "$BERT_FIN_HF_PYTHON, as tests/test_import_hf.py)")
  args = _quick.parse_args(parser, argv, QUICK)
  args.do_lower_case = args.do_lower_case.lower() in ("true", "1", "yes")
  if args.quick:
    if args.phase != "all":
      parser.error("--quick runs phase all")
    return args
  if not args.phase:
    parser.error("the phase (tf, hf or all) is required")
  missing = [flag for flag in ("hf_dir", "npz") if not getattr(args, flag)]
  if args.phase in ("tf", "all"):
    missing += [flag for flag in ("bert_config_file", "init_checkpoint", "vocab_file")
                if not getattr(args, flag)]
  if missing:
    parser.error("phase %s needs %s" % (args.phase, ", ".join("--" + m for m in missing)))
  return args


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  if args.quick:
    with tempfile.TemporaryDirectory(prefix="compare_export_hf_") as work_dir:
      quick_inputs(args, work_dir)
      return run_phases(args)
  return run_phases(args)


def run_phases(args):
  """The phase(s) args.phase names; the exit status."""
  if args.phase == "tf":
    return tf_phase(args)
  if args.phase == "hf":
    return hf_phase(args)
  status = tf_phase(args)
  if status:
    return status
  if not args.hf_python or not os.path.exists(args.hf_python):
    if args.quick:
      _quick.skipped("phase 2 (transformers)", "no Python with torch at %s (--hf_python)"
                     % (args.hf_python or "(none given)"))
      return 0
    print("compare_export_hf: no Python with torch at %s (--hf_python)"
          % (args.hf_python or "(none given)"),
          file=sys.stderr)
    return 2
  return subprocess.call([args.hf_python, os.path.abspath(__file__), "hf", "--hf_dir", args.hf_dir,
                          "--npz", args.npz, "--tolerance", str(args.tolerance)])


if __name__ == "__main__":
  sys.exit(main())
