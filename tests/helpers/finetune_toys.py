# coding=utf-8
"""The toy fine-tuning tasks the run_classifier, run_ner, yardstick and transformers tests train
on, the step lines those programs print, and a program run under `mpirun -np 2`.

Classification: a label decides one word placed among random filler characters (toy_rows ->
jsonl rows, write_jsonl). NER: filler units with one or two ORG / LOC entities, BIO-tagged
(ner_sentences -> [(units, tags)], write_chars: the `char TAG` format).
"""
import glob
import json
import os
import re
import shutil
import subprocess

from helpers import REPO

CLASSIFY_FILLER = list("沪深股指数市场银行基金证券中国人民币元年月日")
KEY = {"up": "上涨", "down": "下跌"}
NER_FILLER = list("的了是在有我年月日元市场") + ["ipo"]
ENTITIES = {"ORG": ["中国银行", "人民银行", "基金"], "LOC": ["沪", "深圳"]}  # 圳: [UNK]
STEP_LINE = re.compile(r"^step (\d+): loss = [-\d.e+]+, grad_norm = [-\d.e+]+, "
                       r"learning_rate = [-\d.e+]+(.*)$")


def toy_rows(rng, n):
  """n jsonl rows {"text", "label"}: the label (KEY) decides one word placed at a random spot
  among random filler characters. rng: random.Random."""
  rows = []
  for _ in range(n):
    label = rng.choice(sorted(KEY))
    text = "".join(rng.choice(CLASSIFY_FILLER) for _ in range(rng.randint(1, 6)))
    cut = rng.randint(0, len(text))
    rows.append({"text": text[:cut] + KEY[label] + text[cut:], "label": label})
  return rows


def label_set_rows(rng, n):
  """n jsonl rows {"text", "label"} of run_classifier --multi_label: the label set is the KEY
  words present (one or both), its label string the names space-separated."""
  rows = []
  for _ in range(n):
    present = rng.choice([["up"], ["down"], ["down", "up"]])
    text = "".join(rng.choice(CLASSIFY_FILLER) for _ in range(rng.randint(1, 4)))
    for label in present:
      cut = rng.randint(0, len(text))
      text = text[:cut] + KEY[label] + text[cut:]
    rows.append({"text": text, "label": " ".join(present)})
  return rows


def write_jsonl(path, rows):
  """rows (dicts) as UTF-8 JSON lines at path (a pathlib.Path)."""
  path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows),
                  encoding="utf-8")


def ner_sentences(rng, n, long_every=0):
  """[(units, tags)]: filler with one or two entities; every long_every-th sentence is long."""
  out = []
  for i in range(n):
    units, tags = [], []
    length = 30 if long_every and i % long_every == 0 else rng.randint(2, 6)
    for _ in range(length):
      if rng.random() < 0.3:
        kind = rng.choice(sorted(ENTITIES))
        word = rng.choice(ENTITIES[kind])
        units += list(word)
        tags += ["B-" + kind] + ["I-" + kind] * (len(word) - 1)
      else:
        units.append(rng.choice(NER_FILLER))
        tags.append("O")
    out.append((units, tags))
  return out


def write_chars(path, sentences, with_tags=True):
  """sentences ([(units, tags)]) in run_ner's chars format at path: `unit<TAB>tag` a line (the
  unit alone without with_tags), a blank line between sentences."""
  blocks = ["".join("%s\t%s\n" % (u, t) if with_tags else u + "\n" for u, t in zip(*s))
            for s in sentences]
  path.write_text("\n".join(blocks), encoding="utf-8")


def step_lines(text):
  """{step: the rest of its line after the learning rate} of run_pretraining-style step lines."""
  return {int(m.group(1)): m.group(2) for m in map(STEP_LINE.match, text.splitlines()) if m}


def mpirun_program(script, *flags):
  """Runs `mpirun -np 2 python REPO/script --horovod FLAGS` with one thread a rank; returns the
  CompletedProcess after checking it exited 0 (its output's tail in the message otherwise)."""
  from bert_fin.launch import mpirun_command, python_command  # pylint: disable=import-outside-toplevel
  command = mpirun_command(2, python_command(
      os.path.join(REPO, script), "--horovod", "--intra_op_parallelism_threads=1",
      "--inter_op_parallelism_threads=1", *flags))
  proc = subprocess.run(command, capture_output=True, text=True, timeout=900,
                        env=dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3",
                                 PYTHONPATH=REPO))
  assert proc.returncode == 0, "mpirun failed:\n%s\n%s" % (proc.stdout[-3000:],
                                                          proc.stderr[-5000:])
  return proc


def interrupted_copy(output_dir, copy_dir, last_step, at_step):
  """copy_dir: a copy of a finished run's output_dir as a run killed after its at_step
  checkpoint leaves it (last_step's checkpoint files removed, the state pointing at at_step)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  shutil.copytree(output_dir, copy_dir)
  for path in glob.glob(os.path.join(copy_dir, "model.ckpt-%d.*" % last_step)):
    os.remove(path)
  tf.train.update_checkpoint_state(copy_dir, os.path.join(copy_dir, "model.ckpt-%d" % at_step))


def check_distillation_resumes_exactly(out, resumed_dir, settings_of, another_loss,
                                       last_step=8, at_step=4):
  """Asserts that run_distill, killed after its at_step checkpoint (interrupted_copy of the
  finished run `out` into resumed_dir), resumes to exactly the uninterrupted run's weights at
  last_step: the teacher's stored outputs read back, not recomputed, and a resume that asks for
  another loss (`another_loss`, a flag) refused. settings_of(*flags): the run's Settings with
  `flags` added."""
  import pytest  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.distill import orchestration  # pylint: disable=g-import-not-at-top
  from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
  interrupted_copy(out, resumed_dir, last_step, at_step)
  resume = "--output_dir=" + resumed_dir
  plan = orchestration.preflight(settings_of(resume), distributed.init(False))
  assert plan.stored_logits is not None  # read back, not recomputed
  with pytest.raises(ValueError, match="holds a checkpoint distilled with"):
    orchestration.preflight(settings_of(resume, another_loss), distributed.init(False))
  orchestration.run(plan, distributed.init(False))
  assert_same_weights(resumed_dir, out, last_step)


def assert_same_weights(directory, other_directory, step):
  """Asserts that the two directories' model.ckpt-STEP hold the same model tensors, exactly
  equal; returns (directory's, other_directory's) {name: array}."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from bert_fin.modeling import checkpoint as checkpoint_lib  # pylint: disable=C0415
  first, second = (checkpoint_lib.model_tensors(os.path.join(d, "model.ckpt-%d" % step))
                   for d in (directory, other_directory))
  assert sorted(first) == sorted(second)
  for name in second:
    np.testing.assert_array_equal(first[name], second[name], err_msg=name)
  return first, second
