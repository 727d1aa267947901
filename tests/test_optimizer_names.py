"""One optimizer vocabulary: every program's optimizer flag takes the names of
bert_fin/optimization/names.py, the earlier spelling adamweightdecay included, in commands and in
the optimizer.json of run directories written before; the one train-op builder
(training/graph/train_setup.py) trains with each name."""
import dataclasses
import json
import os
import subprocess
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

from helpers import REPO  # noqa: E402
from helpers import pretraining_runs as pt  # noqa: E402
from bert_fin.cli import compare_checkpoints  # noqa: E402
from bert_fin.finetune import finetuned  # noqa: E402
from bert_fin.finetune import settings as finetune_settings  # noqa: E402
from bert_fin.optimization import names  # noqa: E402
from bert_fin.optimization import recorded  # noqa: E402
from bert_fin.training import distributed  # noqa: E402
from bert_fin.training import run as training_run  # noqa: E402
from bert_fin.training import settings as train_settings  # noqa: E402
from bert_fin.training.graph import step  # noqa: E402
from bert_fin.training.graph import train_setup  # noqa: E402


def _choices(table, name):
  field = {f.name: f for f in dataclasses.fields(table)}[name]
  return field.default, tuple(field.metadata["choices"])


def test_every_program_takes_the_same_names_with_the_same_default():
  # run_pretraining's --optimizer_type; run_classifier / run_ner / run_squad / run_distill's
  # --optimizer (their tables are finetune/settings.py's Optimizer group); compare_checkpoints.
  pretraining = _choices(train_settings.Optimizer, "optimizer_type")
  finetuning = _choices(finetune_settings.Optimizer, "optimizer")
  tool = {action.dest: action for action in compare_checkpoints.build_parser()._actions}
  assert pretraining == finetuning == (tool["optimizer"].default,
                                       tuple(tool["optimizer"].choices)) == (
                                           "adam", ("adam", "adamw", "lamb", "adamweightdecay"))
  assert [names.canonical(name) for name in names.ACCEPTED] == [
      "adam", "adamw", "lamb", "adam"]
  with pytest.raises(ValueError, match="unknown optimizer_type 'sgd': expected one of adam, "
                     "adamw, lamb, adamweightdecay"):
    names.canonical("sgd")


def test_the_names_load_without_tensorflow():
  code = ("import sys; from bert_fin.optimization import names; "
          "print('tensorflow' in sys.modules, names.ACCEPTED)")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=REPO), check=True).stdout
  assert out.strip() == "False ('adam', 'adamw', 'lamb', 'adamweightdecay')"


def _fake_checkpoint(directory):
  (directory / "model.ckpt-1.index").write_bytes(b"")
  (directory / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-1"\n')


def _pretraining_checkpoint(directory, counted):
  """A run_pretraining directory whose checkpoint holds a weight, the global step and, when
  counted, adamw's step counter."""
  with tf.Graph().as_default():
    tf.get_variable("bert/w", initializer=np.ones([2], np.float32))
    tf.train.get_or_create_global_step()
    if counted:
      tf.get_variable("adam_step", initializer=np.int64(3))
    tf.get_variable("data_position/micro_batches", initializer=np.int64(0))  # none read yet
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, str(directory / "model.ckpt"), global_step=3)


def _recorded(directory):
  return json.loads((directory / finetuned.OPTIMIZER_FILE).read_text())["optimizer"]


def test_run_pretraining_refuses_another_optimizer_than_its_record_on_resume(tmp_path,
                                                                            records_dir):
  """A checkpoint whose optimizer.json names lamb, resumed with adam (the same slots): refused
  naming the record and the flag, with nothing written; a directory without the record resumes
  as before (the slot check alone). The record itself: the slow adamw test below."""
  input_file, out = str(records_dir / "*.tfrecord"), tmp_path / "out"
  out.mkdir()
  recorded.write_optimizer(str(out), "lamb")
  pt.resolve(tmp_path, input_file, optimizer_type="adam")  # no checkpoint: a new run
  _pretraining_checkpoint(out, counted=False)
  before = {path.name: path.read_bytes() for path in out.iterdir()}
  for other in ("adam", "adamweightdecay"):
    with pytest.raises(training_run.RunError, match="^--output_dir %s holds a checkpoint trained "
                       "with --optimizer_type=lamb, this run asks for --optimizer_type=%s: "
                       "resume with --optimizer_type=lamb or use a new --output_dir$" % (
                           out, other)):
      pt.resolve(tmp_path, input_file, optimizer_type=other)
  pt.resolve(tmp_path, input_file, optimizer_type="lamb")
  pt.resolve(tmp_path, input_file, optimizer_type="adam", do_train=False, do_eval=True)
  assert {path.name: path.read_bytes() for path in out.iterdir()} == before
  (out / finetuned.OPTIMIZER_FILE).unlink()  # a run directory from before the record
  for same in ("adam", "lamb"):
    pt.resolve(tmp_path, input_file, optimizer_type=same)


def test_run_pretraining_refuses_to_resume_across_adamws_step_counter(tmp_path):
  adamw, adam = tmp_path / "adamw", tmp_path / "adam"
  for directory, counted in ((adamw, True), (adam, False)):
    directory.mkdir()
    _pretraining_checkpoint(directory, counted)
  training_run.check_optimizer_slots(str(adamw), "adamw")
  for same in ("adam", "lamb", "adamweightdecay"):  # adam and lamb keep the same slots
    training_run.check_optimizer_slots(str(adam), same)
  training_run.check_optimizer_slots(str(tmp_path / "new"), "adamw")  # no checkpoint: nothing
  with pytest.raises(ValueError, match="trained with --optimizer_type=adamw, this run asks for "
                     "--optimizer_type=lamb: resume with --optimizer_type=adamw"):
    training_run.check_optimizer_slots(str(adamw), "lamb")
  with pytest.raises(ValueError, match="trained with --optimizer_type=adam or lamb, this run "
                     "asks for --optimizer_type=adamw: resume with the optimizer it was trained"):
    training_run.check_optimizer_slots(str(adam), "adamw")


def test_a_run_directory_recorded_as_adamweightdecay_resumes_with_adam(tmp_path):
  _fake_checkpoint(tmp_path)
  # optimizer.json as fine-tuning programs wrote it before the one vocabulary
  (tmp_path / finetuned.OPTIMIZER_FILE).write_text('{\n  "optimizer": "adamweightdecay"\n}\n')
  for same in ("adam", "adamweightdecay"):
    finetuned.check_optimizer(str(tmp_path), same)
  with pytest.raises(ValueError, match="trained with --optimizer=adamweightdecay, this run asks "
                     "for --optimizer=adamw: resume with --optimizer=adamweightdecay"):
    finetuned.check_optimizer(str(tmp_path), "adamw")
  # written today under either spelling: the name, and the old spelling resumes it
  finetuned.write_optimizer(str(tmp_path), "adamweightdecay")
  assert json.loads((tmp_path / finetuned.OPTIMIZER_FILE).read_text()) == {"optimizer": "adam"}
  finetuned.check_optimizer(str(tmp_path), "adamweightdecay")
  (tmp_path / finetuned.OPTIMIZER_FILE).write_text('{"optimizer": "sgd"}')
  with pytest.raises(ValueError, match="optimizer.json: not an optimizer record .*unknown "
                     "optimizer_type 'sgd'"):
    finetuned.check_optimizer(str(tmp_path), "adam")


def _train(optimizer_type, updates=3, head_warmup_steps=0):
  """The weights (and adamw's step counter) after `updates` updates of the one builder on a
  two-variable least-squares loss; head warm-up trains only "head/w" for head_warmup_steps."""
  with tf.Graph().as_default():
    tf.set_random_seed(1)
    body = tf.get_variable("bert/w", initializer=tf.constant([[0.5, -0.3], [0.2, 0.1]]))
    head = tf.get_variable("head/w", initializer=tf.constant([[1.0], [-1.0]]))
    x = tf.constant([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
    y = tf.constant([[1.0], [0.0], [2.0]])
    loss = tf.reduce_mean(tf.square(tf.matmul(tf.matmul(x, body), head) - y))
    config = step.StepConfig(head_warmup_steps=head_warmup_steps,
                             head_warmup_variables=("head/w",) if head_warmup_steps else ())
    setup = train_setup.TrainSetup(
        learning_rate=0.1, num_train_steps=10, num_warmup_steps=0,
        optimizer_type=optimizer_type, step_config=config, log_every_n_steps=1,
        global_batch_size=3)
    train_op, hooks = train_setup.train_op_and_hooks(
        loss, distributed.init(False), setup, tf.constant([2, 2, 2]), {"loss": loss})
    assert [type(hook).__name__ for hook in hooks] == ["ProgressGuard", "ThroughputHook"]
    counter = [v for v in tf.global_variables() if v.op.name == "adam_step"]
    with tf.Session() as session:
      session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      start = session.run(body)
      for _ in range(updates):
        session.run(train_op)
      return start, session.run([body, head] + counter)


def test_the_one_builder_trains_with_every_name():
  _, adam = _train("adam")
  _, spelled = _train("adamweightdecay")
  _, adamw = _train("adamw")
  _, lamb = _train("lamb")
  np.testing.assert_array_equal(adam[0], spelled[0])
  np.testing.assert_array_equal(adam[1], spelled[1])
  assert len(adam) == 2 and adamw[2] == 3  # adamw's own update count, checkpointed
  assert not np.allclose(adam[0], adamw[0]) and not np.allclose(adam[0], lamb[0])


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_head_warmup_freezes_the_body_with_every_optimizer(optimizer_type):
  start, frozen = _train(optimizer_type, updates=2, head_warmup_steps=2)
  np.testing.assert_array_equal(frozen[0], start)  # the body untouched in the head phase
  _, moved = _train(optimizer_type, updates=3, head_warmup_steps=2)
  assert not np.allclose(moved[0], start)
  if optimizer_type == "adamw":  # counts the head-phase updates too
    assert frozen[2] == 2 and moved[2] == 3


@pytest.mark.slow
def test_run_pretraining_trains_with_adamw_and_takes_the_earlier_spelling(tmp_path, records_dir):
  assert pt.parse_flags(["--optimizer_type=adamweightdecay"]).optimizer_type == "adamweightdecay"
  values = pt.parse_flags(pt.tiny_argv(tmp_path, str(records_dir / "*.tfrecord"), do_train=True,
                                       num_train_steps=3, save_checkpoints_steps=3,
                                       optimizer_type="adamw"))
  pt.train(values)
  reader = tf.train.load_checkpoint(str(tmp_path / "out" / "model.ckpt-3"))
  assert reader.get_tensor("adam_step") == 3  # adamw's own update count, checkpointed
  assert _recorded(tmp_path / "out") == "adamw"  # optimizer.json, as the fine-tuning programs'
  # resuming it with adam would not restore adam_step: refused before training, in one line
  resumed = pt.run_cli(tmp_path, pt.tiny_argv(tmp_path, str(records_dir / "*.tfrecord"),
                                              do_train=True, num_train_steps=6,
                                              save_checkpoints_steps=3, optimizer_type="adam"))
  assert resumed.returncode == 2, resumed.stderr[-2000:]
  assert "trained with --optimizer_type=adamw, this run asks for --optimizer_type=adam" in (
      resumed.stderr), resumed.stderr[-2000:]
  assert not os.path.exists(tmp_path / "out" / "model.ckpt-6.index")
