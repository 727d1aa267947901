"""--head_warmup_steps: the first N updates train only the variables --init_checkpoint lacks.

Step level (tests/mpi_scripts/tiny_model.py, AdamWeightDecay and LAMB, with accumulation and loss
scaling, both tf.cond flavours, Horovod at size 1): the frozen variables and their optimizer
slots stay bit for bit, the warmed-up ones move exactly as in a run that trains them alone, and
after N updates everything trains. run_pretraining level (the tiny BERT from an encoder-only
checkpoint): the encoder is bit-unchanged after N updates and its slots still zero, the heads
moved; a run stopped inside the head phase and started again ends bit-equal to an uninterrupted
one; the refusals.
"""
import os
import shutil
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

from helpers import random_checkpoints  # noqa: E402
from helpers import FIXTURES  # noqa: E402
from helpers import pretraining_runs as pt  # noqa: E402
from helpers import resume_runs as rt  # noqa: E402
import tiny_model  # noqa: E402
from helpers.resume_runs import tiny_data  # noqa: E402

from bert_fin import modeling  # noqa: E402
from bert_fin.optimization import optimizers  # noqa: E402
from bert_fin.optimization import schedule  # noqa: E402
from bert_fin.modeling import checkpoint  # noqa: E402
from bert_fin.training import distributed  # noqa: E402
from bert_fin.training.graph import head_warmup  # noqa: E402
from bert_fin.training import run as run_lib  # noqa: E402
from bert_fin.training.graph.step import StepConfig  # noqa: E402

WARM = ("tiny/hidden/bias", "tiny/output/kernel")  # "the heads" of the tiny model
FROZEN = ("tiny/embeddings", "tiny/hidden/kernel")  # "the encoder"
HEAD_STEPS = 2


def _optimizer(kind):
  return lambda global_step: optimizers.make_optimizer(kind, 0.05, global_step)


def _frozen_state(variables):
  """The frozen variables and every optimizer slot of theirs."""
  return {n: v for n, v in variables.items() if n.split("/adam_")[0] in FROZEN}


@pytest.mark.usefixtures("fresh_graph")
@pytest.mark.parametrize("kind", ["adam", "lamb"])
@pytest.mark.parametrize("num_steps,loss_scaling", [(1, False), (2, True)])
def test_head_phase_trains_only_the_named_variables_then_all(control_flow, kind, num_steps,
                                                             loss_scaling):
  del control_flow
  dist = distributed.init(False)
  settings = dict(num_accumulation_steps=num_steps, use_loss_scaling=loss_scaling,
                  init_loss_scale=2.0 ** 10)
  config = StepConfig(head_warmup_steps=HEAD_STEPS, head_warmup_variables=WARM, **settings)
  ids, targets = tiny_model.make_data(4 * (HEAD_STEPS + 2) * num_steps)
  batches = tiny_model.split(ids, targets, (HEAD_STEPS + 2) * num_steps)
  initial = tiny_model.train(config, [], dist, _optimizer(kind))["variables"]
  head_phase = tiny_model.train(config, batches[:HEAD_STEPS * num_steps], dist, _optimizer(kind))
  assert head_phase["history"][-1]["global_step"] == HEAD_STEPS
  frozen = _frozen_state(head_phase["variables"])
  assert len(frozen) == 3 * len(FROZEN)  # the weights and their adam_m, adam_v
  rt.assert_identical(frozen, _frozen_state(initial))
  for name in WARM:
    assert not np.array_equal(head_phase["weights"][name], initial[name]), name
    assert head_phase["variables"][name + "/adam_m"].any(), name
  # The warmed-up variables move exactly as when they are the only ones trained (the clip uses
  # their norm, LAMB's bias correction the same step).
  alone = tiny_model.train(StepConfig(**settings), batches[:HEAD_STEPS * num_steps], dist,
                           _optimizer(kind), trainable=WARM)
  for name in WARM:
    np.testing.assert_allclose(head_phase["weights"][name], alone["weights"][name], rtol=1e-6,
                               atol=1e-7, err_msg=name)
  after = tiny_model.train(config, batches, dist, _optimizer(kind))
  assert after["history"][-1]["global_step"] == HEAD_STEPS + 2
  for name in FROZEN:
    assert not np.array_equal(after["weights"][name], initial[name]), name


@pytest.mark.usefixtures("fresh_graph")
def test_head_phase_allreduces_the_same_gradients_as_after(control_flow):
  """Horovod (size 1, real ops): every micro-step allreduces every gradient in both phases, so
  all ranks run the same collectives whatever the phase."""
  del control_flow
  hvd = pytest.importorskip("horovod.tensorflow")
  if not hvd.mpi_built() and not hvd.gloo_built():
    pytest.skip("horovod built without a controller")
  dist = distributed.init(True)
  config = StepConfig(head_warmup_steps=HEAD_STEPS, head_warmup_variables=WARM)
  ids, targets = tiny_model.make_data(4 * (HEAD_STEPS + 2))
  result = tiny_model.train(config, tiny_model.split(ids, targets, HEAD_STEPS + 2), dist,
                            _optimizer("adam"), trace=True)
  assert [h["allreduces"] for h in result["history"]] == [len(WARM + FROZEN)] * (HEAD_STEPS + 2)


def test_step_config_needs_names_with_steps():
  with pytest.raises(ValueError, match="names of the variables"):
    StepConfig(head_warmup_steps=3)
  with pytest.raises(ValueError, match="head_warmup_steps"):
    StepConfig(head_warmup_steps=-1, head_warmup_variables=WARM)


@pytest.mark.usefixtures("fresh_graph")
def test_schedule_is_constant_in_the_head_phase_then_google_schedule_shifted():
  total, warmup, head, peak = 20, 4, 5, 1e-3
  step = tf.placeholder(tf.int64, [])
  shifted = tf.placeholder(tf.int64, [])
  rate = schedule.head_warmup_schedule(peak, step, total, warmup, head)
  reference = schedule.learning_rate_schedule(peak, shifted, total - head, warmup)
  with tf.Session() as sess:
    rates = [sess.run(rate, {step: s}) for s in range(total + 1)]
    expected = [sess.run(reference, {shifted: max(0, s - head)}) for s in range(total + 1)]
    plain = schedule.learning_rate_schedule(peak, step, total, warmup)
    assert sess.run(schedule.head_warmup_schedule(peak, step, total, warmup, 0),
                    {step: 7}) == sess.run(plain, {step: 7})
  assert rates[:head] == [np.float32(peak)] * head
  assert rates[head:] == expected[head:]
  assert rates[head] == 0.0 and rates[-1] == 0.0  # warm-up restarts at 0, decays to 0 at the end
  with pytest.raises(ValueError, match="head_warmup_steps"):
    schedule.head_warmup_schedule(peak, step, total, warmup, total)


# --- run_pretraining --------------------------------------------------------------------------

TOTAL_STEPS, STOP_AT = 8, 2  # head phase: updates 0..HEAD_TRAINING_STEPS-1
HEAD_TRAINING_STEPS = 4


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  """{config, records glob, encoder-only checkpoint, full checkpoint}."""
  directory = tmp_path_factory.mktemp("head_warmup")
  tiny_data.write_records(str(directory / "records"), num_files=2, per_file=14, seq_len=rt.SEQ,
                          max_predictions=rt.P, seed=11)
  config_path = rt.write_dropout_config(str(directory / "bert_config.json"))
  config = modeling.BertConfig.from_json_file(config_path)
  encoder = str(directory / "encoder" / "model.ckpt")
  random_checkpoints.write_random_checkpoint(encoder, config, keep=random_checkpoints.is_encoder)
  full = str(directory / "full" / "model.ckpt")
  random_checkpoints.write_random_checkpoint(full, config)
  return {"config": config_path, "records": str(directory / "records" / "*.tfrecord"),
          "encoder": encoder, "full": full}


def _command(setup, output_dir, extra=()):
  return [sys.executable, rt.RUN_PRETRAINING] + rt.flags(
      setup["config"], setup["records"], output_dir, TOTAL_STEPS, save_steps=STOP_AT,
      extra=["--init_checkpoint=" + setup["encoder"],
             "--head_warmup_steps=%d" % HEAD_TRAINING_STEPS, "--num_warmup_steps=2"] + list(extra))


@pytest.fixture(scope="module")
def uninterrupted(setup, tmp_path_factory):
  output_dir = str(tmp_path_factory.mktemp("uninterrupted") / "out")
  rt.run(_command(setup, output_dir))
  return output_dir


def _variables(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.mark.slow  # (the uninterrupted run: a training program of 8 steps)
def test_encoder_frozen_in_the_head_phase_heads_move_then_all_train(setup, uninterrupted):
  encoder = _variables(setup["encoder"])
  start = _variables(os.path.join(uninterrupted, "model.ckpt-0"))
  boundary = _variables(os.path.join(uninterrupted, "model.ckpt-%d" % HEAD_TRAINING_STEPS))
  end = _variables(os.path.join(uninterrupted, "model.ckpt-%d" % TOTAL_STEPS))
  assert int(boundary["global_step"]) == HEAD_TRAINING_STEPS
  rt.assert_identical({n: boundary[n] for n in encoder}, encoder)
  encoder_slots = [n for n in boundary if n.split("/adam_")[0] in encoder and "/adam_" in n]
  assert len(encoder_slots) == 2 * len(encoder)
  assert not any(boundary[n].any() for n in encoder_slots)
  heads = [n for n in start if n.startswith("cls/") and "/adam_" not in n]
  assert len(heads) == 7
  assert all(boundary[n].tobytes() != start[n].tobytes() for n in heads)
  assert all(boundary[n + "/adam_v"].any() for n in heads)
  moved = [n for n in encoder if end[n].tobytes() != encoder[n].tobytes()]
  # Every encoder variable trains after the boundary, except maybe the attention key biases,
  # whose gradient is 0 up to rounding (softmax is shift-invariant; no weight decay on biases).
  key_biases = {"bert/encoder/layer_%d/attention/self/key/bias" % i for i in range(2)}
  assert set(encoder) - set(moved) <= key_biases
  assert len(moved) >= len(encoder) - len(key_biases)


@pytest.mark.slow  # a resume, as the kill -9 resume cases
def test_stopped_in_the_head_phase_and_resumed_ends_bit_equal(setup, uninterrupted, tmp_path):
  """Resume from the checkpoint of step STOP_AT (inside the head phase: the run is cut there,
  its later checkpoints and order file gone) with the same command: the run crosses the
  boundary and ends with exactly the uninterrupted run's variables."""
  output_dir = str(tmp_path / "out")
  os.makedirs(output_dir)
  prefix = "model.ckpt-%d" % STOP_AT
  for name in os.listdir(uninterrupted):
    if name.startswith(prefix + "."):
      shutil.copy(os.path.join(uninterrupted, name), output_dir)
  shutil.copy(os.path.join(uninterrupted, "data_order.json"), output_dir)
  with open(os.path.join(output_dir, "checkpoint"), "w", encoding="utf-8") as f:
    f.write('model_checkpoint_path: "%s"\n' % prefix)
  assert STOP_AT < HEAD_TRAINING_STEPS
  rt.run(_command(setup, output_dir))
  rt.assert_identical(rt.checkpoint_variables(output_dir), rt.checkpoint_variables(uninterrupted))


def test_refusals(setup, tmp_path):
  records = setup["records"]
  with pytest.raises(ValueError, match="pass --init_checkpoint"):
    pt.resolve(tmp_path, records, head_warmup_steps=3, num_train_steps=10)
  with pytest.raises(ValueError, match="below --num_train_steps"):
    pt.resolve(tmp_path, records, head_warmup_steps=10, num_train_steps=10,
               init_checkpoint=setup["encoder"])
  with pytest.raises(run_lib.RunError, match="nothing to warm up"):
    pt.resolve(tmp_path, records, head_warmup_steps=3, num_train_steps=10,
               init_checkpoint=setup["full"])
  other = str(tmp_path / "other" / "model.ckpt")
  checkpoint.write_checkpoint(other, {"another_model/kernel": np.zeros([3], np.float32)})
  with pytest.raises(run_lib.RunError, match="none of the model's variables"):
    pt.resolve(tmp_path, records, head_warmup_steps=3, num_train_steps=10, init_checkpoint=other)
  warmed = pt.resolve(tmp_path, records, head_warmup_steps=3, num_train_steps=10,
                      init_checkpoint=setup["encoder"]).step_config
  assert warmed.head_warmup_steps == 3
  assert all(name.startswith("cls/") for name in warmed.head_warmup_variables)


def test_a_transformers_encoder_folder_warms_up_every_head(setup, tmp_path):
  """--init_checkpoint=a BertModel folder (imported on the fly): the decision reads the import."""
  folder = os.path.join(FIXTURES, "hf_tiny", "encoder")
  warmed = pt.resolve(tmp_path, setup["records"], head_warmup_steps=3, num_train_steps=10,
                      init_checkpoint=folder, bert_config_file=None)
  assert warmed.decided.init_checkpoint.startswith(str(tmp_path / "out"))
  names = warmed.step_config.head_warmup_variables
  assert sorted({name.split("/")[0] + "/" + name.split("/")[1] for name in names}) == [
      "cls/predictions", "cls/seq_relationship"]


def test_roberta_warms_up_the_masked_lm_head_only(setup, tmp_path):
  """objective roberta: no next-sentence head, and the pooler (no gradient) is never "missing"."""
  config = modeling.BertConfig.from_json_file(setup["config"])
  prefix = str(tmp_path / "model.ckpt")
  random_checkpoints.write_random_checkpoint(
      prefix, config, "roberta",
      keep=lambda name: random_checkpoints.is_encoder(name) and "pooler" not in name)
  names = head_warmup.warmup_variables(prefix, config, "roberta", 3)
  assert names and all(name.startswith("cls/predictions/") for name in names)
  assert head_warmup.warmup_variables(prefix, config, "roberta", 0) == ()


def test_cli_refuses_a_checkpoint_with_every_head_in_one_line(setup, tmp_path):
  argv = pt.tiny_argv(tmp_path, setup["records"], do_train=True, num_train_steps=10,
                      init_checkpoint=setup["full"], head_warmup_steps=3)
  proc = pt.run_cli(tmp_path, argv)
  assert proc.returncode == 2
  lines = [line for line in proc.stderr.splitlines() if "error" in line]
  assert len(lines) == 1 and "nothing to warm up" in lines[0]
  assert not os.path.exists(str(tmp_path / "out"))
