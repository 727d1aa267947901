"""--init_regularizer (L2 / EWC toward --init_checkpoint) and tools/estimate_fisher.py.

Graph level: the penalty and its gradient equal numpy (0 at the start weights); through the
training step (tests/mpi_scripts/tiny_model.py, SGD) the update moves by exactly
-lr·λ·F·(θ − θ0) more than without it, once an update with accumulation and unchanged by loss
scaling. run_pretraining level: the checkpoints hold the same variables as without the penalty,
init_penalty is logged (0 at the first update, numpy's value of the weights after), a resume ends
bit-equal. The Fisher command end to end (the manifest, F = the squared gradient of a batch), a
Fisher of another base or of other variables refused in one line, the flag refusals. (Two ranks:
test_run_pretraining_mpi.py's head warm-up run holds the encoder with l2: every rank ends equal.)
"""
import json
import os
import shutil

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

from helpers import pretraining_runs as pt  # noqa: E402
from helpers import random_checkpoints  # noqa: E402
from helpers import resume_runs as rt  # noqa: E402
import tiny_data  # noqa: E402
import tiny_model  # noqa: E402

from bert_fin import modeling  # noqa: E402
from bert_fin.cli import estimate_fisher  # noqa: E402
from bert_fin.modeling import checkpoint  # noqa: E402
from bert_fin.training import distributed  # noqa: E402
from bert_fin.training import flags as train_flags  # noqa: E402
from bert_fin.training import run as run_lib  # noqa: E402
from bert_fin.training import settings as settings_lib  # noqa: E402
from bert_fin.training.graph import model_fn  # noqa: E402
from bert_fin.training.graph.step import StepConfig  # noqa: E402
from bert_fin.training.init_regularizer import fisher_file  # noqa: E402
from bert_fin.training.init_regularizer import penalty  # noqa: E402

LAMBDA = 3.0


def _spec(kind, anchor, fisher=None, names=()):
  return penalty.Spec(kind, LAMBDA, anchor, fisher, tuple(sorted(names)))


def _write(prefix, tensors):
  checkpoint.write_checkpoint(prefix, tensors)
  return prefix


@pytest.mark.parametrize("kind", ["l2", "ewc"])
def test_penalty_and_its_gradient_equal_numpy_and_are_zero_at_the_start(tmp_path, kind):
  rng = np.random.RandomState(0)
  start = {"bert/a": rng.normal(size=[3, 2]).astype(np.float32),
           "bert/b": rng.normal(size=[4]).astype(np.float32),
           "cls/head": rng.normal(size=[2]).astype(np.float32)}
  anchor = _write(str(tmp_path / "base" / "model.ckpt"), start)
  fisher = {name: rng.uniform(0, 2, size=value.shape).astype(np.float32)
            for name, value in start.items() if name.startswith("bert/")}
  fisher_prefix = _write(str(tmp_path / "fisher" / "fisher"), fisher) if kind == "ewc" else None
  held = penalty.penalised_names({n: list(v.shape) for n, v in start.items()},
                                 {n: list(v.shape) for n, v in start.items()})
  assert held == ("bert/a", "bert/b")  # the head is free
  moved = {name: value + rng.normal(size=value.shape).astype(np.float32)
           for name, value in start.items()}
  with tf.Graph().as_default():
    variables = [tf.get_variable(name, initializer=value) for name, value in start.items()]
    regularizer = penalty.InitPenalty(_spec(kind, anchor, fisher_prefix, held), variables, True)
    grads, value = regularizer.gradients_and_value(variables)
    assert grads[2] is None
    assert set(tf.global_variables()) == set(variables)  # θ0 and F: local, never saved
    assert len(tf.local_variables()) == (4 if kind == "ewc" else 2)
    with tf.Session(config=tiny_model.session_config()) as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      assert sess.run(value) == 0.0
      assert not any(sess.run(grads[:2])[i].any() for i in range(2))
      sess.run([v.assign(moved[v.op.name]) for v in variables])
      got_value, got_grads = sess.run([value, grads[:2]])
  weights = {name: fisher[name] if kind == "ewc" else 1.0 for name in held}
  expected = {name: LAMBDA * weights[name] * (moved[name].astype(np.float64) - start[name])
              for name in held}
  for got, name in zip(got_grads, held):
    np.testing.assert_allclose(got, expected[name], rtol=1e-5, err_msg=name)
  total = sum(0.5 * LAMBDA * (weights[n] * (moved[n].astype(np.float64) - start[n]) ** 2).sum()
              for n in held)
  np.testing.assert_allclose(got_value, total, rtol=1e-5)


TINY = ("tiny/embeddings", "tiny/hidden/kernel", "tiny/hidden/bias", "tiny/output/kernel")


@pytest.mark.parametrize("num_steps,loss_scaling", [(1, False), (2, True)])
def test_one_update_moves_by_the_penalty_gradient_once(tmp_path, num_steps, loss_scaling):
  """SGD (lr 0.1, no clip), θ0 away from the start weights, F random: with the penalty the update
  differs from the one without by exactly -lr·λ·F·(θ − θ0), once an update however many
  micro-batches, the same with loss scaling; the kept value is 0 before the first update."""
  dist = distributed.init(False)
  config = StepConfig(num_accumulation_steps=num_steps, use_loss_scaling=loss_scaling,
                      init_loss_scale=2.0 ** 10, clip_norm=None)
  initial = tiny_model.train(config, [], dist)["weights"]
  rng = np.random.RandomState(1)
  anchor = {n: (initial[n] + rng.normal(0, 0.3, initial[n].shape)).astype(np.float32)
            for n in TINY}
  fisher = {n: rng.uniform(0, 1, initial[n].shape).astype(np.float32) for n in TINY}
  spec = _spec("ewc", _write(str(tmp_path / "anchor" / "a"), anchor),
               _write(str(tmp_path / "fisher" / "f"), fisher), TINY)
  ids, targets = tiny_model.make_data(4 * num_steps)
  batches = tiny_model.split(ids, targets, num_steps)
  plain = tiny_model.train(config, batches, dist)
  held = tiny_model.train(config, batches, dist,
                          make_regularizer=lambda tvars: penalty.InitPenalty(spec, tvars, True))
  assert [h["global_step"] for h in held["history"]] == [0] * (num_steps - 1) + [1]
  for name in TINY:
    expected = -0.1 * LAMBDA * fisher[name] * (initial[name] - anchor[name])
    np.testing.assert_allclose(held["weights"][name] - plain["weights"][name], expected,
                               rtol=1e-4, atol=1e-6, err_msg=name)
  value = sum(0.5 * LAMBDA * (fisher[n] * (initial[n].astype(np.float64) - anchor[n]) ** 2).sum()
              for n in TINY)
  penalties = [h["penalty"] for h in held["history"]]
  assert penalties[:-1] == [0.0] * (num_steps - 1)
  np.testing.assert_allclose(penalties[-1], value, rtol=1e-5)


# --- run_pretraining ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base(tmp_path_factory):
  """Tiny records, the tiny config and two full random checkpoints (base and another)."""
  directory = tmp_path_factory.mktemp("init_regularizer")
  tiny_data.write_records(str(directory / "records"), num_files=2, per_file=12, seq_len=pt.SEQ,
                          max_predictions=pt.P, seed=5)
  config_file = tiny_data.write_config(str(directory / "bert_config.json"))
  config = modeling.BertConfig.from_json_file(config_file)
  base_prefix = str(directory / "base" / "model.ckpt")
  values = random_checkpoints.write_random_checkpoint(base_prefix, config)
  other = str(directory / "other" / "model.ckpt")
  random_checkpoints.write_random_checkpoint(other, config, seed=1)
  return {"dir": directory, "records": str(directory / "records" / "*.tfrecord"),
          "config": config_file, "bert_config": config, "base": base_prefix, "other": other,
          "values": values}


def _steps(stdout):
  """{step: {name: value}} of the step lines."""
  result = {}
  for line in stdout.splitlines():
    if line.startswith("step "):
      head, fields = line.split(": ", 1)
      result[int(head.split()[1])] = {k: v for k, v in (f.split(" = ") for f in fields.split(", "))}
  return result


def _run_flags(base, output_dir, steps, *extra):
  """run_pretraining in this process (no --deterministic: op determinism would stay on for the
  other tests of the process; one thread is deterministic on the CPU)."""
  return pt.tiny_argv(base["dir"], base["records"], do_train=True, output_dir=output_dir,
                      bert_config_file=base["config"], init_checkpoint=base["base"],
                      num_train_steps=steps, save_checkpoints_steps=1, log_every_n_steps=1,
                      inter_op_parallelism_threads=1) + list(extra)


@pytest.mark.slow
def test_run_pretraining_with_l2_logs_the_penalty_saves_no_more_and_resumes_exactly(
    base, tmp_path, capsys):
  l2 = ["--init_regularizer=l2", "--init_regularizer_weight=%g" % LAMBDA]
  held_dir, plain_dir = str(tmp_path / "held"), str(tmp_path / "plain")
  pt.train(pt.parse_flags(_run_flags(base, held_dir, 2, *l2)))
  lines = _steps(capsys.readouterr().out)
  pt.train(pt.parse_flags(_run_flags(base, plain_dir, 1)))
  assert "init_penalty" not in _steps(capsys.readouterr().out)[1]
  # The checkpoints hold the same variables (θ0 is no variable of theirs).
  listed = lambda d: tf.train.list_variables(tf.train.latest_checkpoint(d))
  assert [n for n, _ in listed(held_dir)] == [n for n, _ in listed(plain_dir)]
  # At update 1 the weights are the base's: 0. At update 2 (the weights of model.ckpt-1):
  # lambda / 2 * sum over bert/ of (w - w0)^2.
  assert float(lines[1]["init_penalty"]) == 0.0
  after_one = tf.train.load_checkpoint(os.path.join(held_dir, "model.ckpt-1"))
  expected = sum(0.5 * LAMBDA * ((after_one.get_tensor(n).astype(np.float64) - v) ** 2).sum()
                 for n, v in base["values"].items() if n.startswith("bert/"))
  assert expected > 0
  np.testing.assert_allclose(float(lines[2]["init_penalty"]), expected, rtol=1e-4)
  # Resume from model.ckpt-1 (θ0 read again from the files): bit-equal to the uninterrupted run.
  resumed = str(tmp_path / "resumed")
  os.makedirs(resumed)
  for name in os.listdir(held_dir):
    if name.startswith("model.ckpt-1.") or name == "data_order.json":
      shutil.copy(os.path.join(held_dir, name), resumed)
  with open(os.path.join(resumed, "checkpoint"), "w", encoding="utf-8") as f:
    f.write('model_checkpoint_path: "model.ckpt-1"\n')
  pt.train(pt.parse_flags(_run_flags(base, resumed, 2, *l2)))
  rt.assert_identical(rt.checkpoint_variables(resumed), rt.checkpoint_variables(held_dir))


def test_estimate_fisher_end_to_end_then_checked_by_the_run(base, tmp_path):
  out = str(tmp_path / "fisher")
  argv = ["--init_checkpoint=" + base["base"], "--bert_config_file=" + base["config"],
          "--input_file=" + base["records"], "--max_seq_length=%d" % pt.SEQ,
          "--max_predictions_per_seq=%d" % pt.P, "--batch_size=4"]
  assert estimate_fisher.main(argv + ["--fisher_batches=2", "--output_dir=" + out]) == 0
  manifest = json.load(open(os.path.join(out, fisher_file.MANIFEST), encoding="utf-8"))
  assert manifest["base"] == {"checkpoint": base["base"],
                              "fingerprint": fisher_file.fingerprint(base["base"])}
  assert manifest["records"]["input_file"] == base["records"]
  assert len(manifest["records"]["files"]) == 2 and manifest["records"]["records_read"] == 8
  assert manifest["estimate"]["batches"] == 2 and manifest["estimate"]["objective"] == "bert"
  trained = model_fn.pretraining_variable_shapes(base["bert_config"], trained_only=True)
  held = penalty.penalised_names(trained, checkpoint.checkpoint_shapes(base["base"]))
  estimate = checkpoint.model_tensors(os.path.join(out, fisher_file.PREFIX))
  assert sorted(estimate) == list(held) == sorted(manifest["variables"])
  assert all(np.isfinite(v).all() and (v >= 0).all() for v in estimate.values())
  assert not [d for d, _, _ in os.walk(str(tmp_path)) if "fisher-" in d]  # no scratch left
  # F: the mean of the first two batches' squared gradients of total_loss at the base weights.
  for name in (held[0], "bert/encoder/layer_1/output/dense/kernel"):
    np.testing.assert_allclose(estimate[name], _squared_gradients(base, name, 2).mean(axis=0),
                               rtol=1e-4, atol=1e-12, err_msg=name)
  # The run: accepted on its base, refused on another, and a Fisher missing a variable.
  flags = dict(num_train_steps=4, init_regularizer="ewc", init_regularizer_weight=1.0,
               fisher_file=out)
  run = pt.resolve(tmp_path, base["records"], init_checkpoint=base["base"], **flags)
  assert run.decided.fisher_checkpoint == os.path.join(out, "fisher")
  assert run.decided.init_regularizer_variables == held
  os.makedirs(str(tmp_path / "b"))
  with pytest.raises(run_lib.RunError, match=r"^--fisher_file %s was estimated on the base %s, "
                     r"whose weights are not --init_checkpoint %s's" % (out, base["base"],
                                                                       base["other"])):
    pt.resolve(tmp_path / "b", base["records"], init_checkpoint=base["other"], **flags)
  assert not os.path.exists(str(tmp_path / "b" / "out"))
  partial = str(tmp_path / "partial")
  os.makedirs(partial)
  shutil.copy(os.path.join(out, fisher_file.MANIFEST), partial)
  checkpoint.write_checkpoint(os.path.join(partial, "fisher"),
                              {n: v for n, v in estimate.items() if n != held[0]})
  with pytest.raises(ValueError, match="^--fisher_file %s lacks 1 penalised variable" % partial):
    fisher_file.check(partial, base["base"], {name: trained[name] for name in held})


def _squared_gradients(base, name, batches):
  """[batches, *shape]: the squared gradient of total_loss on each of the records' first batches
  of 4 examples, built here."""
  from bert_fin.input import tfdata  # pylint: disable=import-outside-toplevel
  from bert_fin.training import preflight  # pylint: disable=import-outside-toplevel
  files = sorted(tf.io.gfile.glob(base["records"]))
  layout = preflight.check_records(files, pt.SEQ, pt.P, False, base["bert_config"].vocab_size)
  with tf.Graph().as_default():
    features = tf.data.make_one_shot_iterator(
        tfdata.eval_dataset(files, layout, 4)).get_next()
    model = model_fn.model_fn_builder(base["bert_config"], layout, base["base"],
                                      distributed.SingleProcess(), None)
    loss = model(features, None, tf.estimator.ModeKeys.EVAL, None).loss
    variable = [v for v in tf.trainable_variables() if v.op.name == name][0]
    squared = tf.square(distributed.densify(tf.gradients(loss, [variable])[0]))
    with tf.Session(config=tiny_model.session_config()) as sess:
      sess.run(tf.global_variables_initializer())
      return np.stack([sess.run(squared) for _ in range(batches)])


def test_estimate_fisher_refusals_one_line_before_writing(base, tmp_path, capsys):
  encoder = str(tmp_path / "encoder" / "model.ckpt")
  random_checkpoints.write_random_checkpoint(encoder, base["bert_config"],
                                             keep=random_checkpoints.is_encoder)
  argv = ["--bert_config_file=" + base["config"], "--input_file=" + base["records"],
          "--max_seq_length=%d" % pt.SEQ, "--max_predictions_per_seq=%d" % pt.P]
  out = str(tmp_path / "fisher")
  assert estimate_fisher.main(argv + ["--init_checkpoint=" + encoder, "--output_dir=" + out]) == 2
  error = capsys.readouterr().err.strip().splitlines()
  assert len(error) == 1 and "the Fisher needs the base's own pretraining heads" in error[0]
  os.makedirs(out)
  open(os.path.join(out, "x"), "w").close()
  assert estimate_fisher.main(argv + ["--init_checkpoint=" + base["base"],
                                      "--output_dir=" + out]) == 2
  assert capsys.readouterr().err.strip() == (
      "estimate_fisher: error: --output_dir %s is not empty: give a new directory for the "
      "Fisher estimate" % out)
  assert os.listdir(out) == ["x"]


@pytest.mark.slow  # an estimate: a TensorFlow graph of the model run (~5 s)
def test_estimate_fisher_refuses_a_non_finite_estimate_writing_nothing(base, tmp_path, capsys):
  """A base whose weights give a NaN loss: the estimate is refused, nothing written."""
  argv = ["--bert_config_file=" + base["config"], "--input_file=" + base["records"],
          "--max_seq_length=%d" % pt.SEQ, "--max_predictions_per_seq=%d" % pt.P]
  broken = str(tmp_path / "broken" / "model.ckpt")
  tensors = checkpoint.model_tensors(base["base"])
  tensors["bert/embeddings/LayerNorm/gamma"] = np.full_like(
      tensors["bert/embeddings/LayerNorm/gamma"], np.nan)
  checkpoint.write_checkpoint(broken, tensors)
  nowhere = str(tmp_path / "never")
  assert estimate_fisher.main(argv + ["--init_checkpoint=" + broken, "--output_dir=" + nowhere,
                                      "--fisher_batches=1", "--batch_size=4"]) == 2
  error = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
  assert len(error) == 1 and error[0].startswith(  # (the progress bar's lines beside it)
      "estimate_fisher: error: the estimate is no Fisher (bert/") and "non-finite" in error[0]
  assert not os.path.exists(nowhere)


@pytest.mark.parametrize("flags,message", [
    (dict(init_regularizer="l2", init_regularizer_weight=1.0), "pass --init_checkpoint"),
    (dict(init_regularizer="l2", init_checkpoint="c"), "needs --init_regularizer_weight > 0"),
    (dict(init_regularizer="l2", init_checkpoint="c", init_regularizer_weight=0.0),
     "needs --init_regularizer_weight > 0"),
    (dict(init_regularizer_weight=1.0), "without --init_regularizer=l2 or ewc"),
    (dict(init_regularizer="ewc", init_checkpoint="c", init_regularizer_weight=1.0),
     "needs --fisher_file"),
    (dict(init_regularizer="l2", init_checkpoint="c", init_regularizer_weight=1.0,
          fisher_file="f"), "leave the file out"),
    (dict(fisher_file="f"), "read by --init_regularizer=ewc"),
])
def test_flag_refusals(tmp_path, flags, message):
  values = pt.parse_flags(pt.tiny_argv(tmp_path, "records", do_train=True, **flags))
  with pytest.raises(ValueError, match=message):
    train_flags.validate(settings_lib.from_flags(values))


def _held_shapes(base):
  """{name: shape} of the base's penalised variables."""
  trained = model_fn.pretraining_variable_shapes(base["bert_config"], trained_only=True)
  held = penalty.penalised_names(trained, checkpoint.checkpoint_shapes(base["base"]))
  return {name: trained[name] for name in held}


def _fisher_dir(base, shapes, directory, seed, transform=None):
  """A Fisher directory written by fisher_file.write over `shapes` (random F >= 0 of seed);
  transform(arrays) then rewrites the data under the genuine manifest."""
  rng = np.random.default_rng(seed)
  tensors = {name: rng.uniform(0, 1, shape).astype(np.float32) for name, shape in shapes.items()}
  fisher_file.write(directory, tensors, {"base": {"checkpoint": base["base"],
                                                  "fingerprint": fisher_file.fingerprint(
                                                      base["base"])}})
  if transform:
    checkpoint.write_checkpoint(os.path.join(directory, fisher_file.PREFIX), transform(tensors))


def _truncated(directory):
  data = os.path.join(directory, fisher_file.PREFIX + ".data-00000-of-00001")
  size = os.path.getsize(data)
  with open(data, "r+b") as f:
    f.truncate(size // 2)
  return size


def test_fisher_data_is_verified_before_the_graph_sizes_values_and_digest(base, tmp_path):
  """A NaN or negative F under its genuine manifest, a truncated data file, another estimate's
  data under the manifest, a manifest of the older format: each one line naming the fix, before
  anything is written; the genuine directory passes."""
  shapes = _held_shapes(base)
  good = str(tmp_path / "good")
  _fisher_dir(base, shapes, good, 1)
  assert fisher_file.check(good, base["base"], shapes) == os.path.join(good, "fisher")
  nan = str(tmp_path / "nan")
  _fisher_dir(base, shapes, nan, 1, lambda t: {n: np.full_like(v, np.nan) for n, v in t.items()})
  negative = str(tmp_path / "negative")
  _fisher_dir(base, shapes, negative, 1, lambda t: {n: v - 2.0 for n, v in t.items()})
  truncated = str(tmp_path / "truncated")
  shutil.copytree(good, truncated)
  size = _truncated(truncated)
  swapped = str(tmp_path / "swapped")
  shutil.copytree(good, swapped)
  _fisher_dir(base, shapes, str(tmp_path / "other"), 2)
  for name in os.listdir(str(tmp_path / "other")):
    if name.startswith(fisher_file.PREFIX + "."):
      shutil.copy(os.path.join(str(tmp_path / "other"), name), swapped)
  older = str(tmp_path / "older")
  shutil.copytree(good, older)
  manifest = json.load(open(os.path.join(older, fisher_file.MANIFEST), encoding="utf-8"))
  del manifest["data"]
  manifest["format"] = "bert_fin fisher 1"
  with open(os.path.join(older, fisher_file.MANIFEST), "w", encoding="utf-8") as f:
    json.dump(manifest, f)
  fix = ": estimate it again with tools/estimate_fisher.py$"
  first = sorted(shapes)[0]
  for directory, message in [
      (nan, r"%s holds %d non-finite value\(s\) of %d" % (first, np.prod(shapes[first]),
                                                          np.prod(shapes[first]))),
      (negative, r"%s holds %d negative value\(s\) \(the smallest -[\d.]+\); an estimate of the "
                 r"Fisher is a mean of squares, >= 0 \(a negative one rewards drifting away from "
                 r"the base\)" % (first, np.prod(shapes[first]))),
      (truncated, r"fisher.data-00000-of-00001 holds %d bytes, the manifest says %d \(truncated "
                  r"or replaced\)" % (size // 2, size)),
      (swapped, r"its arrays are not the ones its manifest describes \(another estimate's data "
                r"under this manifest\?\)"),
  ]:
    with pytest.raises(ValueError, match=r"^--fisher_file %s: %s%s" % (directory, message, fix)):
      fisher_file.check(directory, base["base"], shapes)
  with pytest.raises(ValueError, match=r"format 'bert_fin fisher 1', expected 'bert_fin fisher "
                     r"2'.*estimate it again"):
    fisher_file.check(older, base["base"], shapes)
  # run_pretraining refuses it while resolving the run: nothing written to the output dir.
  with pytest.raises(run_lib.RunError, match="^--fisher_file %s: .* non-finite" % nan):
    pt.resolve(tmp_path, base["records"], init_checkpoint=base["base"], num_train_steps=2,
               init_regularizer="ewc", init_regularizer_weight=1.0, fisher_file=nan)
  assert not os.path.exists(str(tmp_path / "out"))
