"""Optimizers and schedule: google's convergence test, numpy re-implementations, LAMB at step 0."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from bert_fin.optimization import optimizers
from bert_fin.optimization import schedule


# Graph mode per test (tests/conftest.py), eager stays on for the rest of the suite.
pytestmark = pytest.mark.usefixtures("fresh_graph")



SESSION_CONFIG = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def _session():
  return tf.Session(config=SESSION_CONFIG)


def _numpy_adamw(w, m, v, g, lr, decay, beta_1=0.9, beta_2=0.999, eps=1e-6):
  """google's AdamWeightDecay step, float64."""
  m = beta_1 * m + (1 - beta_1) * g
  v = beta_2 * v + (1 - beta_2) * g * g
  update = m / (np.sqrt(v) + eps) + decay * w
  return w - lr * update, m, v


def _numpy_torch_adamw(w, m, v, g, lr, decay, step, beta_1=0.9, beta_2=0.999, eps=1e-6):
  """torch.optim.AdamW's step as torch computes it (decay first, bias corrections folded into the
  step size and the denominator), for the step-th update (step counts from 1), float64."""
  w = w * (1 - lr * decay)
  m = beta_1 * m + (1 - beta_1) * g
  v = beta_2 * v + (1 - beta_2) * g * g
  step_size = lr / (1 - beta_1 ** step)
  denominator = np.sqrt(v) / np.sqrt(1 - beta_2 ** step) + eps
  return w - step_size * m / denominator, m, v


def _numpy_lamb(w, m, v, g, lr, decay, step, adapt=True, beta_1=0.9, beta_2=0.999, eps=1e-6):
  """One LAMB step with bias correction for the step-th update (step counts from 1), float64."""
  m = beta_1 * m + (1 - beta_1) * g
  v = beta_2 * v + (1 - beta_2) * g * g
  with np.errstate(divide="ignore", invalid="ignore"):  # step 0 is the NVIDIA bug: 0 / 0
    m_hat = m / (1 - beta_1 ** step)
    v_hat = v / (1 - beta_2 ** step)
    update = m_hat / (np.sqrt(v_hat) + eps) + decay * w
  ratio = 1.0
  w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
  if adapt and w_norm > 0 and u_norm > 0:
    ratio = w_norm / u_norm
  return w - lr * ratio * update, m, v


@pytest.mark.parametrize("optimizer_type", ["adam", "lamb"])
def test_create_optimizer_converges_to_target(optimizer_type):
  # google's optimization_test: minimise ||x - w||^2 from a fixed start in 100 steps.
  with tf.Graph().as_default(), _session() as sess:
    w = tf.get_variable("w", shape=[3], initializer=tf.constant_initializer([0.1, -0.2, -0.1]))
    x = tf.constant([0.4, 0.2, -0.5])
    loss = tf.reduce_mean(tf.square(x - w))
    train_op = optimizers.create_optimizer(loss, 0.2, 100, 10, optimizer_type=optimizer_type)
    sess.run(tf.global_variables_initializer())
    start_loss = sess.run(loss)
    for _ in range(100):
      sess.run(train_op)
    w_np, final_loss, step = sess.run([w, loss, tf.train.get_global_step()])
  assert step == 100  # create_optimizer increments once per step, apply_gradients does not
  np.testing.assert_allclose(w_np, [0.4, 0.2, -0.5], rtol=1e-2, atol=1e-2)
  assert final_loss < start_loss * 1e-2


def test_schedule_matches_google_warmup_then_linear_decay():
  init_lr, total, warmup = 1e-3, 100, 10
  with tf.Graph().as_default(), _session() as sess:
    step = tf.placeholder(tf.int64, [])
    lr = schedule.learning_rate_schedule(init_lr, step, total, warmup)
    no_warmup = schedule.learning_rate_schedule(init_lr, step, total, 0)
    squared = schedule.learning_rate_schedule(init_lr, step, total, warmup, power=2.0)
    for s in [0, 1, 5, 9, 10, 11, 50, 99, 100, 150]:
      got, got_nw, got_sq = sess.run([lr, no_warmup, squared], {step: s})
      decayed = init_lr * (1 - min(s, total) / total)
      want = init_lr * s / warmup if s < warmup else decayed
      assert got == pytest.approx(want, rel=1e-5, abs=1e-12), s
      assert got_nw == pytest.approx(decayed, rel=1e-5, abs=1e-12), s
      want_sq = init_lr * s / warmup if s < warmup else init_lr * (1 - min(s, total) / total) ** 2
      assert got_sq == pytest.approx(want_sq, rel=1e-4, abs=1e-12), s  # float32 (1 - s/T)^2


def test_schedule_rejects_bad_arguments():
  with tf.Graph().as_default():
    step = tf.constant(0, tf.int64)
    with pytest.raises(ValueError, match="num_train_steps"):
      schedule.learning_rate_schedule(1e-4, step, 0, 0)
    with pytest.raises(ValueError, match="num_warmup_steps"):
      schedule.learning_rate_schedule(1e-4, step, 10, -1)


def _decay_probe_variables():
  names = ["layer/dense/kernel", "layer/dense/bias", "layer/LayerNorm/gamma", "mlm/layer_norm/beta"]
  return [tf.get_variable(n, initializer=tf.constant([1.0, -2.0, 3.0])) for n in names]


@pytest.mark.parametrize("optimizer_type", ["adam", "adamw", "lamb"])
def test_weight_decay_excludes_layer_norm_and_bias_by_name(optimizer_type):
  with tf.Graph().as_default(), _session() as sess:
    global_step = tf.train.get_or_create_global_step()
    params = _decay_probe_variables()
    optimizer = optimizers.make_optimizer(optimizer_type, 0.5, global_step)
    zero_grads = [tf.zeros_like(p) for p in params]  # update = decay term only
    update = optimizer.apply_gradients(zip(zero_grads, params))
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    kernel, bias, gamma, beta = sess.run(params)
  start = np.array([1.0, -2.0, 3.0])
  if optimizer_type in ("adam", "adamw"):
    np.testing.assert_allclose(kernel, start * (1 - 0.5 * 0.01), rtol=1e-6)
  else:  # trust ratio ||w|| / ||0.01 w|| = 100: the decay-only step moves by lr * ||w||
    np.testing.assert_allclose(kernel, start * (1 - 0.5), rtol=1e-5)
  for excluded in (bias, gamma, beta):
    np.testing.assert_array_equal(excluded, start)


@pytest.mark.parametrize("optimizer_type", ["adam", "adamw", "lamb"])
def test_slots_are_named_like_google_and_skip_none_gradients(optimizer_type):
  with tf.Graph().as_default(), _session() as sess:
    global_step = tf.train.get_or_create_global_step()
    with tf.variable_scope("bert/encoder"):
      kernel = tf.get_variable("kernel", [2, 3])
      frozen = tf.get_variable("frozen", [4])
    optimizer = optimizers.make_optimizer(optimizer_type, 0.1, global_step)
    update = optimizer.apply_gradients([(tf.ones([2, 3]), kernel), (None, frozen)])
    counter = [optimizers.STEP_COUNTER] if optimizer_type == "adamw" else []
    names = sorted(v.op.name for v in tf.global_variables())
    assert names == sorted(["global_step", "bert/encoder/kernel", "bert/encoder/frozen",
                            "bert/encoder/kernel/adam_m", "bert/encoder/kernel/adam_v"] + counter)
    assert optimizer.get_slot(kernel, "adam_m").op.name == "bert/encoder/kernel/adam_m"
    assert {v.op.name for v in optimizer.variables()} == {
        "bert/encoder/kernel/adam_m", "bert/encoder/kernel/adam_v"} | set(counter)
    assert not any(v in tf.trainable_variables() for v in optimizer.variables())
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    assert sess.run(global_step) == 0  # apply_gradients never increments (google's contract)


def test_adam_equals_numpy_for_three_steps():
  rng = np.random.RandomState(3)
  w0 = {"dense/kernel": rng.randn(4, 3), "dense/bias": rng.randn(3)}
  grads_np = [{n: rng.randn(*w.shape) for n, w in w0.items()} for _ in range(3)]
  lrs = [1e-2, 5e-3, 2e-3]
  with tf.Graph().as_default(), _session() as sess:
    params = {n: tf.get_variable(n, initializer=tf.constant(w, tf.float32)) for n, w in w0.items()}
    grads = {n: tf.placeholder(tf.float32, w.shape) for n, w in w0.items()}
    lr = tf.placeholder(tf.float32, [])
    optimizer = optimizers.AdamWeightDecayOptimizer(
        lr, weight_decay_rate=0.01, exclude_from_weight_decay=["bias"])
    update = optimizer.apply_gradients([(grads[n], params[n]) for n in w0])
    sess.run(tf.global_variables_initializer())
    want = {n: (w, np.zeros_like(w), np.zeros_like(w)) for n, w in w0.items()}
    for step in range(3):
      feed = {grads[n]: grads_np[step][n] for n in w0}
      feed[lr] = lrs[step]
      sess.run(update, feed)
      for n in w0:
        decay = 0.0 if "bias" in n else 0.01
        want[n] = _numpy_adamw(*want[n], grads_np[step][n], lrs[step], decay)
      got = sess.run(params)
      for n in w0:
        np.testing.assert_allclose(got[n], want[n][0], rtol=1e-5, atol=1e-7)
      m_got = sess.run(optimizer.get_slot(params["dense/kernel"], "adam_m"))
      np.testing.assert_allclose(m_got, want["dense/kernel"][1], rtol=1e-5, atol=1e-7)


def test_adamw_equals_torch_adamw_in_numpy_for_five_steps():
  # torch.optim.AdamW's formula (bias corrections, epsilon after the corrected sqrt(v), decay of
  # the weights before the step) against make_optimizer("adamw"), LayerNorm/bias not decayed.
  rng = np.random.RandomState(5)
  w0 = {"dense/kernel": rng.randn(4, 3), "dense/bias": rng.randn(3),
        "LayerNorm/gamma": 1 + 0.1 * rng.randn(3)}
  steps = 5
  grads_np = [{n: rng.randn(*w.shape) for n, w in w0.items()} for _ in range(steps)]
  lrs = [1e-2, 8e-3, 5e-3, 2e-3, 1e-3]
  with tf.Graph().as_default(), _session() as sess:
    global_step = tf.train.get_or_create_global_step()
    params = {n: tf.get_variable(n, initializer=tf.constant(w, tf.float32)) for n, w in w0.items()}
    grads = {n: tf.placeholder(tf.float32, w.shape) for n, w in w0.items()}
    lr = tf.placeholder(tf.float32, [])
    optimizer = optimizers.make_optimizer("adamw", lr, global_step)
    update = optimizer.apply_gradients([(grads[n], params[n]) for n in w0])
    sess.run(tf.global_variables_initializer())
    want = {n: (w, np.zeros_like(w), np.zeros_like(w)) for n, w in w0.items()}
    google = dict(want)
    for step in range(steps):
      feed = {grads[n]: grads_np[step][n] for n in w0}
      feed[lr] = lrs[step]
      sess.run(update, feed)
      for n in w0:
        decay = 0.0 if ("bias" in n or "LayerNorm" in n) else 0.01
        want[n] = _numpy_torch_adamw(*want[n], grads_np[step][n], lrs[step], decay, step + 1)
        google[n] = _numpy_adamw(*google[n], grads_np[step][n], lrs[step], decay)
      got = sess.run(params)
      for n in w0:
        np.testing.assert_allclose(got[n], want[n][0], rtol=0, atol=1e-6)
      np.testing.assert_allclose(sess.run(optimizer.get_slot(params["dense/kernel"], "adam_v")),
                                 want["dense/kernel"][2], rtol=1e-5, atol=1e-9)
      assert sess.run(tf.train.get_global_step()) == 0  # t is adamw's own counter
    counter = [v for v in optimizer.variables() if v.op.name == optimizers.STEP_COUNTER]
    assert sess.run(counter[0]) == steps
  # The bias correction matters: google's uncorrected steps end elsewhere.
  assert np.abs(google["dense/kernel"][0] - want["dense/kernel"][0]).max() > 1e-3


def _lamb_first_step_graph(init_lr, num_warmup_steps, w_init, grad):
  global_step = tf.train.get_or_create_global_step()
  w = tf.get_variable("encoder/dense/kernel", initializer=tf.constant(w_init, tf.float32))
  lr = schedule.learning_rate_schedule(init_lr, global_step, 100, num_warmup_steps)
  optimizer = optimizers.LAMBOptimizer(lr, global_step, weight_decay_rate=0.01)
  update = optimizer.apply_gradients([(tf.constant(grad, tf.float32), w)])
  train_op = tf.group(update, optimizers.increment_global_step(global_step, after=update))
  return w, train_op


def test_lamb_step_zero_with_warmup_keeps_weights_finite_and_unchanged():
  w_init = np.array([[0.5, -1.0], [2.0, 0.25]])
  grad = np.array([[0.1, -0.3], [0.2, 0.05]])
  with tf.Graph().as_default(), _session() as sess:
    w, train_op = _lamb_first_step_graph(1e-3, 10, w_init, grad)  # lr(step 0) = 0
    sess.run(tf.global_variables_initializer())
    sess.run(train_op)
    got = sess.run(w)
  assert np.all(np.isfinite(got))
  np.testing.assert_allclose(got, w_init, rtol=1e-7)
  # The bug this guards against: correcting with t = global_step = 0 divides by 1 - beta^0 = 0.
  nan_step, _, _ = _numpy_lamb(w_init, 0 * w_init, 0 * w_init, grad, 0.0, 0.01, step=0)
  assert not np.all(np.isfinite(nan_step))


def test_lamb_step_zero_update_equals_numpy():
  w_init = np.array([[0.5, -1.0], [2.0, 0.25]])
  grad = np.array([[0.1, -0.3], [0.2, 0.05]])
  with tf.Graph().as_default(), _session() as sess:
    w, train_op = _lamb_first_step_graph(1e-2, 0, w_init, grad)  # no warmup: lr(0) = 1e-2
    sess.run(tf.global_variables_initializer())
    sess.run(train_op)
    got_1 = sess.run(w)
    sess.run(train_op)  # the second update is corrected with t = 2
    got_2 = sess.run(w)
  zeros = np.zeros_like(w_init)
  want_1, m, v = _numpy_lamb(w_init, zeros, zeros, grad, 1e-2, 0.01, step=1)
  want_2, _, _ = _numpy_lamb(want_1, m, v, grad, 1e-2 * (1 - 1 / 100), 0.01, step=2)
  np.testing.assert_allclose(got_1, want_1, rtol=1e-5)
  np.testing.assert_allclose(got_2, want_2, rtol=1e-5)
  assert not np.allclose(got_1, w_init)


def test_trust_ratio_is_one_when_a_norm_is_zero():
  with tf.Graph().as_default(), _session() as sess:
    ratios = sess.run([optimizers.trust_ratio(tf.constant(a), tf.constant(b))
                       for a, b in [(0.0, 2.0), (3.0, 0.0), (0.0, 0.0), (3.0, 2.0)]])
  assert ratios == [1.0, 1.0, 1.0, 1.5]


def test_lamb_zero_weights_and_zero_update_stay_finite():
  grad = np.array([0.3, -0.4])
  with tf.Graph().as_default(), _session() as sess:
    global_step = tf.train.get_or_create_global_step()
    zero_w = tf.get_variable("zero/kernel", initializer=tf.zeros([2]))
    still_w = tf.get_variable("still/kernel", initializer=tf.constant([1.0, 2.0]))
    optimizer = optimizers.LAMBOptimizer(0.1, global_step, weight_decay_rate=0.0)
    update = optimizer.apply_gradients([(tf.constant(grad, tf.float32), zero_w),
                                        (tf.zeros([2]), still_w)])
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    got_zero, got_still = sess.run([zero_w, still_w])
  want_zero, _, _ = _numpy_lamb(np.zeros(2), np.zeros(2), np.zeros(2), grad, 0.1, 0.0, step=1)
  np.testing.assert_allclose(got_zero, want_zero, rtol=1e-5)  # ratio 1: plain bias-corrected Adam
  np.testing.assert_array_equal(got_still, [1.0, 2.0])  # ||update|| = 0: no NaN, no move


@pytest.fixture(params=["control_flow_v1", "control_flow_v2"])
def control_flow_version(request):
  was_v2 = tf.control_flow_v2_enabled()
  if request.param == "control_flow_v1":
    tf.disable_control_flow_v2()
  else:
    tf.enable_control_flow_v2()
  yield request.param
  if was_v2:
    tf.enable_control_flow_v2()
  else:
    tf.disable_control_flow_v2()


@pytest.mark.parametrize("optimizer_type", ["adam", "adamw", "lamb"])
def test_apply_inside_cond_for_gradient_accumulation(optimizer_type, control_flow_version):
  # The training loop applies accumulated gradients under tf.cond (only when the step's gradients
  # are finite): the slots created there must initialise, and the update happen only if true.
  del control_flow_version
  grad = np.array([1.0, -1.0])
  with tf.Graph().as_default(), _session() as sess:
    global_step = tf.train.get_or_create_global_step()
    w = tf.get_variable("dense/kernel", initializer=tf.constant([1.0, 1.0]))
    apply_now = tf.placeholder(tf.bool, [])
    optimizer = optimizers.make_optimizer(optimizer_type, 0.1, global_step)
    step = tf.cond(apply_now,
                   lambda: optimizer.apply_gradients([(tf.constant(grad, tf.float32), w)]),
                   tf.no_op)
    sess.run(tf.global_variables_initializer())
    sess.run(step, {apply_now: False})
    np.testing.assert_array_equal(sess.run(w), [1.0, 1.0])
    sess.run(step, {apply_now: True})
    got = sess.run(w)
  zeros = np.zeros(2)
  if optimizer_type == "adam":
    want, _, _ = _numpy_adamw(np.ones(2), zeros, zeros, grad, 0.1, 0.01)
  elif optimizer_type == "adamw":  # the skipped update did not count: this is t = 1
    want, _, _ = _numpy_torch_adamw(np.ones(2), zeros, zeros, grad, 0.1, 0.01, step=1)
  else:
    want, _, _ = _numpy_lamb(np.ones(2), zeros, zeros, grad, 0.1, 0.01, step=1)
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_clip_gradients_uses_global_norm_and_keeps_none():
  with tf.Graph().as_default(), _session() as sess:
    grads = [tf.constant([3.0, 0.0]), None, tf.constant([0.0, 4.0])]  # global norm 5
    clipped = optimizers.clip_gradients(grads, clip_norm=1.0)
    assert clipped[1] is None
    a, b = sess.run([clipped[0], clipped[2]])
    small = sess.run(optimizers.clip_gradients([tf.constant([0.3, 0.4])])[0])
  np.testing.assert_allclose(a, [0.6, 0.0], rtol=1e-6)
  np.testing.assert_allclose(b, [0.0, 0.8], rtol=1e-6)
  np.testing.assert_allclose(small, [0.3, 0.4], rtol=1e-6)  # under the norm: unchanged


def test_make_optimizer_rejects_unknown_type():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="unknown optimizer_type 'sgd'"):
      optimizers.make_optimizer("sgd", 0.1, tf.train.get_or_create_global_step())


def test_google_checkpoint_with_optimizer_slots_restores(tmp_path):
  # A checkpoint laid out as google's run_pretraining writes it (variables created by name the
  # way google's AdamWeightDecayOptimizer does) restores into our optimizer's slots.
  path = str(tmp_path / "model.ckpt")
  with tf.Graph().as_default(), _session() as sess:
    for name, value in [("bert/pooler/dense/kernel", 1.0), ("bert/pooler/dense/kernel/adam_m", 2.0),
                        ("bert/pooler/dense/kernel/adam_v", 3.0), ("global_step", None)]:
      if value is None:
        tf.train.get_or_create_global_step()
      else:
        tf.get_variable(name, initializer=tf.fill([2, 2], value))
    sess.run(tf.global_variables_initializer())
    tf.train.Saver().save(sess, path)
  for optimizer_type in ("adam", "lamb"):
    with tf.Graph().as_default(), _session() as sess:
      global_step = tf.train.get_or_create_global_step()
      kernel = tf.get_variable("bert/pooler/dense/kernel", [2, 2])
      optimizer = optimizers.make_optimizer(optimizer_type, 0.1, global_step)
      optimizer.apply_gradients([(tf.ones([2, 2]), kernel)])
      tf.train.Saver().restore(sess, path)  # fails on any missing or renamed variable
      m, v = sess.run([optimizer.get_slot(kernel, "adam_m"), optimizer.get_slot(kernel, "adam_v")])
    assert (m == 2.0).all() and (v == 3.0).all()
