"""run_distill tests' toys: a teacher directory written by hand (a tiny config, google-named
weights with a two-label classifier head, labels.txt: the toy task's labels, finetune_toys.KEY,
or a run_ner tagger's head and CRF), and the files a distillation test trains a teacher and its
student from: the toy task, a teacher written by hand, run_distill's and run_classifier's
settings of the toy."""
import json
import os
import random

from absl import flags
import numpy as np

from helpers.finetune_toys import ner_sentences
from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_chars
from helpers.finetune_toys import write_jsonl
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab

HIDDEN = 16


def write_teacher(tmp_path, num_hidden_layers):
  """Writes tmp_path/bert_config.json (H=16, num_hidden_layers layers, the test vocab's size)
  and tmp_path/teacher/ (model.ckpt-5 with the head, labels.txt); returns (config file,
  teacher directory) as str."""
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=HIDDEN,
                          num_hidden_layers=num_hidden_layers, num_attention_heads=2,
                          intermediate_size=32, max_position_embeddings=16)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  teacher = tmp_path / "teacher"
  shapes = dict(mt.google_variable_shapes(config), output_weights=[2, HIDDEN],
                output_bias=[2])
  write_google_checkpoint(str(teacher / "model.ckpt-5"), shapes, np.random.RandomState(1))
  (teacher / "labels.txt").write_text("down\nup\n")
  return str(config_file), str(teacher)


def student_toy(tmp_path, data):
  """{data, config, config_file, vocab, tmp, teacher, out}: a 3-layer H=32 config and the test
  vocab written in tmp_path beside the task directory `data` (already written); the teacher and
  the student train into tmp_path/teacher and tmp_path/student."""
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=3, intermediate_size=64, max_position_embeddings=32)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  return dict(data=str(data), config=config, config_file=str(config_file),
              vocab=tokenizer_vocab.write_vocab(tmp_path), tmp=tmp_path,
              teacher=str(tmp_path / "teacher"), out=str(tmp_path / "student"))


# the NER toy's flags (run_ner's and run_distill's) and the tags of its sentences
NER_COMMON = ["--max_seq_length=16", "--train_batch_size=16", "--eval_batch_size=7",
              "--predict_batch_size=5", "--learning_rate=2e-3", "--warmup_proportion=0.1",
              "--seed=3", "--intra_op_parallelism_threads=1",
              "--inter_op_parallelism_threads=1", "--save_checkpoints_steps=4"]
NER_TAGS = ["B-LOC", "B-ORG", "I-LOC", "I-ORG", "O"]


def ner_student_toy(tmp_path, train_sentences):
  """student_toy of a chars-format NER task (finetune_toys.ner_sentences: train_sentences, 16
  dev, 9 test, every 6th long) in tmp_path/data."""
  rng = random.Random(11)
  data = tmp_path / "data"
  data.mkdir()
  for split, n in (("train", train_sentences), ("dev", 16), ("test", 9)):
    write_chars(data / (split + ".txt"), ner_sentences(rng, n, long_every=6))
  return student_toy(tmp_path, data)


def write_ner_teacher(toy, head=True, labels=True, directory=None, seed=1):
  """A run_ner directory written by hand in `directory` (default toy["teacher"]): google-named
  weights of toy's config drawn from RandomState(seed), the tagger head and CRF transitions
  (head), labels.txt of NER_TAGS (labels)."""
  directory = directory or toy["teacher"]
  shapes = mt.google_variable_shapes(toy["config"])
  if head:
    shapes.update({"ner/output_weights": [len(NER_TAGS), 32], "ner/output_bias": [len(NER_TAGS)],
                   "ner/transitions": [len(NER_TAGS), len(NER_TAGS)]})
  os.makedirs(directory, exist_ok=True)
  write_google_checkpoint(os.path.join(directory, "model.ckpt-7"), shapes,
                          np.random.RandomState(seed))
  if labels:
    with open(os.path.join(directory, "labels.txt"), "w") as f:
      f.write("".join(tag + "\n" for tag in NER_TAGS))


# the toy's run_distill / run_classifier flags (tiny batches, a checkpoint every 4 steps)
COMMON = ["--task_name=jsonl", "--max_seq_length=16", "--train_batch_size=16",
          "--eval_batch_size=7", "--predict_batch_size=5", "--learning_rate=1e-3",
          "--warmup_proportion=0.1", "--seed=3", "--intra_op_parallelism_threads=1",
          "--inter_op_parallelism_threads=1", "--save_checkpoints_steps=4"]


def toy_task(tmp_path, rows=toy_rows):
  """student_toy of a jsonl task written in tmp_path/data (96 train, 24 dev, 11 test rows of
  rows(rng, n): finetune_toys.toy_rows, or label_set_rows for a multi-label task)."""
  rng = random.Random(7)
  data = tmp_path / "data"
  data.mkdir()
  for split, count in (("train", 96), ("dev", 24), ("test", 11)):
    write_jsonl(data / (split + ".jsonl"), rows(rng, count))
  return student_toy(tmp_path, data)


def fake_teacher(toy, head=True, head_kind=None, directory=None, seed=1):
  """A teacher directory written by hand in `directory` (default toy["teacher"]): google-named
  weights of the toy's config drawn from RandomState(seed) (+ the two-label head: labels down,
  up), labels.txt; head_kind: None, or the classifier_config.json fields run_classifier records
  ({"multi_label": ..., "entity_markers": K}: the head reads K marker states beside [CLS]),
  written by its writer."""
  from bert_fin.finetune import finetuned  # pylint: disable=C0415
  directory = directory or toy["teacher"]
  markers = (head_kind or {}).get("entity_markers", 0)
  shapes = mt.google_variable_shapes(toy["config"])
  if head:
    shapes.update(output_weights=[2, 32 * (markers + 1)], output_bias=[2])
  os.makedirs(directory, exist_ok=True)
  write_google_checkpoint(os.path.join(directory, "model.ckpt-7"), shapes,
                          np.random.RandomState(seed))
  if head_kind is not None:
    finetuned.write_run_files(directory, ["down", "up"], "first", head_kind)
    return
  with open(os.path.join(directory, "labels.txt"), "w") as f:
    f.write("down\nup\n")


def distill_settings(toy, *extra):
  """run_distill's checked Settings of the toy (its teacher, config, vocab, output) + extra."""
  from bert_fin.finetune.distill import flags as distill_flags  # pylint: disable=C0415
  values = distill_flags.define_flags(flags.FlagValues())
  values(["run_distill", "--data_dir=" + toy["data"], "--bert_config_file=" + toy["config_file"],
          "--vocab_file=" + toy["vocab"], "--output_dir=" + toy["out"],
          "--teacher_dir=" + toy["teacher"], "--do_train"] + COMMON + list(extra))
  return distill_flags.settings_of(values)


def classify_settings(toy, *extra):
  """run_classifier's checked Settings of the toy's data and vocab + extra."""
  from bert_fin.finetune.classify import flags as classify_flags  # pylint: disable=C0415
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier", "--data_dir=" + toy["data"], "--vocab_file=" + toy["vocab"]]
         + COMMON + list(extra))
  return classify_flags.settings_of(values)


def check_student_is_ordinary(toy):
  """Asserts that the finished student in toy["out"] is an ordinary run_classifier directory:
  run_classifier --do_predict reads it with its own bert_config.json, the serving path (the module
  a SavedModel export holds) answers the test texts as it predicted, and tools/export_hf.py
  writes it to toy["tmp"]/hf. Returns (the predicted probabilities float32 [11, 2], the
  transformers tensors {name: array})."""
  # pylint: disable=C0415
  from safetensors import numpy as safetensors_numpy
  import tensorflow as tf2
  from bert_fin.cli import export_hf as export_hf_cli
  from bert_fin.finetune.classify import orchestration as classify
  from bert_fin.serving import classifier as serving_classifier
  from bert_fin.serving import export
  from bert_fin.serving import graph_tokenizer
  from bert_fin.training import distributed
  student_config = os.path.join(toy["out"], "bert_config.json")
  classify.run(classify_settings(toy, "--bert_config_file=" + student_config,
                                 "--output_dir=" + toy["out"], "--do_predict"),
               distributed.init(False))
  predicted = np.loadtxt(os.path.join(toy["out"], "test_results.tsv"), delimiter="\t", ndmin=2)
  plan = export.check(export.Request(toy["out"], student_config, toy["vocab"], True, 16,
                                     str(toy["tmp"] / "unused"), False, False))
  module = serving_classifier.ClassifierServing(
      plan.spec, plan.checkpoint, graph_tokenizer.GraphTokenizer(plan.vocab, True), plan.vocab)
  with open(os.path.join(toy["data"], "test.jsonl"), encoding="utf-8") as f:
    texts = [json.loads(line)["text"] for line in f]
  answer = module.text(tf2.constant(texts))
  np.testing.assert_allclose(answer["probabilities"].numpy(), predicted, atol=1e-4)
  hf_dir = toy["tmp"] / "hf"
  assert export_hf_cli.main(["--bert_config_file", student_config, "--init_checkpoint",
                             toy["out"], "--vocab_file", toy["vocab"], "--output_dir",
                             str(hf_dir)]) == 0
  return predicted, safetensors_numpy.load_file(str(hf_dir / "model.safetensors"))
