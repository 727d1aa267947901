"""run_distill tests' toys: a teacher directory written by hand (a tiny config, google-named
weights with a two-label classifier head, labels.txt: the toy task's labels, finetune_toys.KEY,
or a run_ner tagger's head and CRF), and the files a distillation test trains a teacher and its
student from."""
import os
import random

import numpy as np

from helpers.finetune_toys import ner_sentences
from helpers.finetune_toys import write_chars
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


def write_ner_teacher(toy, head=True, labels=True):
  """A run_ner directory written by hand in toy["teacher"]: google-named weights of toy's
  config, the tagger head and CRF transitions (head), labels.txt of NER_TAGS (labels)."""
  shapes = mt.google_variable_shapes(toy["config"])
  if head:
    shapes.update({"ner/output_weights": [len(NER_TAGS), 32], "ner/output_bias": [len(NER_TAGS)],
                   "ner/transitions": [len(NER_TAGS), len(NER_TAGS)]})
  os.makedirs(toy["teacher"], exist_ok=True)
  write_google_checkpoint(os.path.join(toy["teacher"], "model.ckpt-7"), shapes,
                          np.random.RandomState(1))
  if labels:
    with open(os.path.join(toy["teacher"], "labels.txt"), "w") as f:
      f.write("".join(tag + "\n" for tag in NER_TAGS))
