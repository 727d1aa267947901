"""run_distill's TinyBERT matching (--hidden_weight, --attention_weight): the losses are 0 for a
student that is its teacher, positive and falling under training otherwise, a projection only
where the widths differ, the teacher's encoder frozen and outside the student's checkpoints,
refusals in one line before anything is written, and (slow) a resumed matching run equal to an
uninterrupted one, its output read by --do_predict, the serving path and the transformers
export."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import REPO
from helpers.distill_toys import COMMON
from helpers.distill_toys import check_student_is_ordinary
from helpers.distill_toys import classify_settings
from helpers.distill_toys import distill_settings
from helpers.distill_toys import fake_teacher
from helpers.distill_toys import toy_task
from helpers.finetune_toys import check_distillation_resumes_exactly
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from bert_fin.finetune.classify import orchestration as classify
from bert_fin.finetune.distill import matching
from bert_fin.finetune.distill import orchestration
from bert_fin.modeling import bert as modeling
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.training import distributed

SEQ = 12


@pytest.fixture
def toy(tmp_path):
  return toy_task(tmp_path)


def _teacher_checkpoint(tmp_path, config):
  path = str(tmp_path / "teacher" / "model.ckpt-7")
  write_google_checkpoint(path, mt.google_variable_shapes(config), np.random.RandomState(1))
  return path


def _features(rng):
  return {"input_ids": tf.constant(rng.randint(1, 90, [4, SEQ]), tf.int32),
          "input_len": tf.constant([SEQ, 7, 3, 10], tf.int32),
          "segment_ids": tf.constant(np.zeros([4, SEQ]), tf.int32)}


def _losses(teacher_config, student_config, layer_map, teacher_checkpoint, copy_teacher=False):
  """(the graph's matching losses [hidden, attention], the student's BertModel, the teacher's
  encoder) of a student (dropout off; copy_teacher: the teacher's weights) on fixed features,
  built in the default graph."""
  features = _features(np.random.RandomState(3))
  match = matching.Matching(teacher_config, teacher_checkpoint, layer_map, 1.0, 1.0)
  student = modeling.BertModel(student_config, False, features["input_ids"],
                               features["input_len"], token_type_ids=features["segment_ids"])
  if copy_teacher:
    checkpoint_lib.init_from_checkpoint(teacher_checkpoint, log=None)
  teacher = matching.teacher_encoder(match, features)
  hidden = matching.hidden_loss(
      [student.get_embedding_output()] + student.get_all_encoder_layers(),
      [teacher.get_embedding_output()] + teacher.get_all_encoder_layers(), layer_map,
      features["input_len"], 0.02)
  attention = matching.attention_loss(student.get_all_attention_scores(),
                                      teacher.get_all_attention_scores(), layer_map,
                                      features["input_len"])
  return [hidden, attention], student, teacher


def test_a_student_that_is_its_teacher_matches_exactly_without_projection(tmp_path):
  config = mt.tiny_config(num_hidden_layers=3, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0)
  checkpoint = _teacher_checkpoint(tmp_path, config)
  with tf.Graph().as_default():
    losses, _, _ = _losses(config, config, [0, 1, 2], checkpoint, copy_teacher=True)
    assert not [v for v in tf.global_variables()
                if v.name.startswith(checkpoint_lib.DISTILL_FIT_SCOPE)]
    with mt.session() as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      assert sess.run(losses) == [0.0, 0.0]


def test_a_narrower_student_gets_projections_its_losses_fall_and_the_teacher_stays_frozen(
    tmp_path):
  teacher_config = mt.tiny_config(num_hidden_layers=3)
  student_config = mt.tiny_config(num_hidden_layers=2, hidden_size=16, intermediate_size=24)
  checkpoint = _teacher_checkpoint(tmp_path, teacher_config)
  with tf.Graph().as_default():
    tf.set_random_seed(5)
    losses, _, _ = _losses(teacher_config, student_config, [1, 2], checkpoint)
    # the teacher's encoder is cut above the top mapped layer, local, not trainable
    teacher_vars = [v for v in tf.local_variables() if v.name.startswith(matching.TEACHER_SCOPE)]
    assert {checkpoint_lib.variable_name(v) for v in teacher_vars} >= {
        "distill_teacher/bert/encoder/layer_2/output/dense/kernel"}
    assert not [v for v in tf.global_variables() if matching.TEACHER_SCOPE in v.name]
    # one projection [16, 32] for the embeddings and each student layer
    fits = {checkpoint_lib.variable_name(v): v.shape.as_list() for v in tf.trainable_variables()
            if v.name.startswith(checkpoint_lib.DISTILL_FIT_SCOPE)}
    assert fits == {"distill_fit/hidden_%d/%s" % (i, part): shape for i in range(3)
                    for part, shape in (("kernel", [16, 32]), ("bias", [32]))}
    assert all(checkpoint_lib.is_training_state(name) for name in fits)
    train = tf.train.AdamOptimizer(1e-2).minimize(tf.add_n(losses))
    with mt.session() as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      kernel = [v for v in teacher_vars if v.name.endswith("layer_2/output/dense/kernel:0")][0]
      before = sess.run(kernel)
      np.testing.assert_array_equal(before, tf.train.load_variable(
          checkpoint, "bert/encoder/layer_2/output/dense/kernel"))  # from the teacher's file
      first = sess.run(losses)
      for _ in range(8):
        sess.run(train)
      last = sess.run(losses)
      np.testing.assert_array_equal(sess.run(kernel), before)
  assert min(first) > 0
  assert last[0] < first[0] and last[1] < first[1]


def _student_config(toy, name, **widths):
  path = toy["tmp"] / name
  path.write_text(mt.tiny_config(vocab_size=toy["config"].vocab_size, max_position_embeddings=32,
                                 **widths).to_json_string())
  return str(path)


def test_matching_refusals_are_one_line_before_anything_is_written(toy):
  fake_teacher(toy)
  two_heads = _student_config(toy, "two_heads.json", num_attention_heads=2, hidden_size=16,
                              intermediate_size=24)
  deep = _student_config(toy, "deep.json", num_hidden_layers=4, hidden_size=16,
                         intermediate_size=24)
  for extra, message in [
      (("--attention_weight=1", "--student_config=" + two_heads), "the student has 2 heads"),
      (("--hidden_weight=1", "--student_config=" + deep), "the student has 4 layers, the teach"),
  ]:
    with pytest.raises(ValueError, match=message):
      orchestration.preflight(distill_settings(toy, *extra), distributed.init(False))
  plan = orchestration.preflight(distill_settings(toy, "--hidden_weight=1",
                                                  "--student_config=" + two_heads),
                                 distributed.init(False))
  assert plan.matching.layer_map == [1, 2]  # a --student_config student: skip (the top kept)
  assert orchestration.preflight(distill_settings(toy), distributed.init(False)).matching is None
  result = subprocess.run(
      [sys.executable, os.path.join(REPO, "run_distill.py"), "--data_dir=" + toy["data"],
       "--bert_config_file=" + toy["config_file"], "--vocab_file=" + toy["vocab"],
       "--output_dir=" + toy["out"], "--teacher_dir=" + toy["teacher"], "--do_train",
       "--hidden_weight=-1"] + COMMON, capture_output=True, text=True, timeout=300)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [result.stderr.strip()]
  assert "--hidden_weight" in result.stderr
  assert not os.path.exists(toy["out"])


@pytest.mark.slow
def test_a_resumed_matching_run_equals_an_uninterrupted_one_and_its_output_is_ordinary(toy):
  classify.run(classify_settings(
      toy, "--bert_config_file=" + toy["config_file"], "--output_dir=" + toy["teacher"],
      "--do_train", "--num_train_steps=24"), distributed.init(False))
  narrow = _student_config(toy, "narrow.json", num_hidden_layers=2, hidden_size=16,
                           intermediate_size=24)
  run = ("--student_config=" + narrow, "--alpha=0.5", "--hidden_weight=0.5",
         "--attention_weight=0.1", "--num_train_steps=8")
  orchestration.run(orchestration.preflight(distill_settings(toy, *run),
                                            distributed.init(False)), distributed.init(False))
  final = os.path.join(toy["out"], "model.ckpt-8")
  names = dict(tf.train.list_variables(final))
  assert not [name for name in names if matching.TEACHER_SCOPE in name]
  assert names["distill_fit/hidden_2/kernel"] == [16, 32]
  assert not [name for name in checkpoint_lib.model_tensors(final) if "distill_fit" in name]
  resumed = str(toy["tmp"] / "resumed")
  check_distillation_resumes_exactly(toy["out"], resumed,
                                     lambda *flags: distill_settings(toy, *run, *flags),
                                     "--hidden_weight=1")
  for name in ("distill_fit/hidden_2/kernel", "distill_fit/hidden_2/kernel/adam_m"):
    np.testing.assert_array_equal(
        tf.train.load_variable(os.path.join(resumed, "model.ckpt-8"), name),
        tf.train.load_variable(final, name))
  check_student_is_ordinary(toy)  # --do_predict, the serving path, export_hf read it
