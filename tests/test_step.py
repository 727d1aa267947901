"""Training step: accumulation == big batch, loss scaling, overflow skip, allreduce placement.

Single process (SingleProcess, and HorovodProcess at size 1 when horovod is installed: real
HorovodAllreduce ops, counted at run time from FULL_TRACE step stats). The 2-rank checks live in
tests/test_distributed_mpi.py.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

from bert_fin.optimization import optimizers  # noqa: E402
from bert_fin.training import distributed  # noqa: E402
from bert_fin.training.graph import loss_scale  # noqa: E402
from bert_fin.training.graph.step import StepConfig  # noqa: E402

import tiny_model  # noqa: E402


# Graph mode per test (tests/conftest.py), eager stays on for the rest of the suite.
pytestmark = pytest.mark.usefixtures("fresh_graph")



ATOL = 1e-5


def _assert_weights_close(left, right, atol=ATOL):
  assert sorted(left) == sorted(right)
  for name in left:
    np.testing.assert_allclose(left[name], right[name], atol=atol, rtol=1e-5, err_msg=name)


def _assert_weights_differ(left, right):
  assert any(not np.allclose(left[n], right[n], atol=1e-4) for n in left)


def _adamw(global_step):
  return optimizers.make_optimizer("adam", 0.05, global_step)


def _lamb(global_step):
  return optimizers.make_optimizer("lamb", 0.05, global_step)


def _sgd(_):
  return tf.train.GradientDescentOptimizer(0.5)


@pytest.mark.parametrize("make_optimizer,clip_norm,target_scale", [
    (_sgd, None, 1.0),  # plain SGD, no clipping: a missing 1/N would show directly
    (_sgd, 1.0, 20.0),  # clipping active (norm > 1): clip after accumulation, as one batch
    (_adamw, 1.0, 1.0),
    (_lamb, 1.0, 1.0),
])
def test_accumulation_equals_big_batch(make_optimizer, clip_norm, target_scale):
  _check_accumulation_equals_big_batch(make_optimizer, clip_norm, target_scale)


@pytest.mark.parametrize("make_optimizer", [_adamw, _lamb])
def test_accumulation_equals_big_batch_tf1_cond(make_optimizer):
  tf.disable_control_flow_v2()
  try:
    _check_accumulation_equals_big_batch(make_optimizer, 1.0, 1.0)
  finally:
    tf.enable_control_flow_v2()


def _check_accumulation_equals_big_batch(make_optimizer, clip_norm, target_scale):
  num_steps, micro, updates = 4, 2, 2
  ids, targets = tiny_model.make_data(num_steps * micro * updates, target_scale=target_scale)
  dist = distributed.init(False)
  big = tiny_model.train(StepConfig(clip_norm=clip_norm), tiny_model.split(ids, targets, updates),
                         dist, make_optimizer)
  accumulated = tiny_model.train(
      StepConfig(num_accumulation_steps=num_steps, clip_norm=clip_norm),
      tiny_model.split(ids, targets, num_steps * updates), dist, make_optimizer)
  _assert_weights_close(big["weights"], accumulated["weights"])
  assert [h["global_step"] for h in big["history"]] == [1, 2]
  assert [h["global_step"] for h in accumulated["history"]] == [0, 0, 0, 1, 1, 1, 1, 2]
  assert [h["update_step"] for h in accumulated["history"]] == [False, False, False, True] * 2
  # The micro-batch split matters only through the mean: an unaccumulated run on the first
  # micro-batch alone ends elsewhere (the test can tell a wrong update from a right one).
  single = tiny_model.train(StepConfig(clip_norm=clip_norm),
                            tiny_model.split(ids, targets, num_steps * updates)[:updates],
                            dist, make_optimizer)
  _assert_weights_differ(single["weights"], accumulated["weights"])


def test_clipping_bounds_the_update_norm():
  ids, targets = tiny_model.make_data(8, target_scale=50.0)
  before = tiny_model.train(StepConfig(), [], distributed.init(False))["weights"]
  after = tiny_model.train(StepConfig(clip_norm=1.0), [(ids, targets)], distributed.init(False),
                           lambda _: tf.train.GradientDescentOptimizer(1.0))["weights"]
  update_norm = np.sqrt(sum(np.sum((after[n] - before[n]) ** 2) for n in after))
  assert update_norm == pytest.approx(1.0, rel=1e-4)


@pytest.mark.parametrize("num_steps", [1, 2])
def test_grad_norm_is_the_norm_before_clipping(num_steps):
  """SGD at rate 1 without clipping moves the weights by the gradient itself: its norm is the
  logged grad_norm. With clip 1.0 the same norm is logged (taken before the clip) while the
  update is cut to 1; with loss scaling the norm is the unscaled one."""
  ids, targets = tiny_model.make_data(4 * num_steps, target_scale=50.0)
  batches = tiny_model.split(ids, targets, num_steps)
  sgd = lambda _: tf.train.GradientDescentOptimizer(1.0)
  before = tiny_model.train(StepConfig(), [], distributed.init(False))["weights"]
  free = tiny_model.train(StepConfig(clip_norm=None, num_accumulation_steps=num_steps), batches,
                          distributed.init(False), sgd)
  update_norm = np.sqrt(sum(np.sum((free["weights"][n] - before[n]) ** 2) for n in before))
  assert update_norm > 1.5  # large enough for the clip below to act
  assert [h["grad_norm"] for h in free["history"][:-1]] == [0.0] * (num_steps - 1)
  assert free["history"][-1]["grad_norm"] == pytest.approx(update_norm, rel=1e-4)
  clipped = tiny_model.train(
      StepConfig(clip_norm=1.0, num_accumulation_steps=num_steps, use_loss_scaling=True,
                 init_loss_scale=2.0 ** 10), batches, distributed.init(False), sgd)
  assert clipped["history"][-1]["grad_norm"] == pytest.approx(update_norm, rel=1e-4)
  clipped_norm = np.sqrt(sum(np.sum((clipped["weights"][n] - before[n]) ** 2) for n in before))
  assert clipped_norm == pytest.approx(1.0, rel=1e-4)


@pytest.mark.parametrize("num_steps", [1, 3])
def test_loss_scaling_does_not_change_the_update(num_steps):
  ids, targets = tiny_model.make_data(6 * num_steps)
  batches = tiny_model.split(ids, targets, 2 * num_steps)
  plain = tiny_model.train(StepConfig(num_accumulation_steps=num_steps), batches,
                           distributed.init(False), _adamw)
  scaled = tiny_model.train(
      StepConfig(num_accumulation_steps=num_steps, use_loss_scaling=True, init_loss_scale=2.0 ** 20),
      batches, distributed.init(False), _adamw)
  _assert_weights_close(plain["weights"], scaled["weights"])
  assert all(h["loss_scale"] == 2.0 ** 20 for h in scaled["history"])
  assert all(h["loss_scale"] == 1.0 for h in plain["history"])


def _state_without_step_bookkeeping(variables):
  """Weights and optimizer slots: everything but global_step and train_step/ bookkeeping."""
  return {n: v for n, v in variables.items()
          if not n.startswith("train_step/") and n != "global_step"}


@pytest.mark.parametrize("num_steps,poison_at", [(1, 0), (3, 1)])
def test_overflow_skips_update_halves_scale_keeps_weights(control_flow, num_steps, poison_at):
  ids, targets = tiny_model.make_data(2 * num_steps)
  batches = tiny_model.split(ids, targets, num_steps)
  config = StepConfig(num_accumulation_steps=num_steps, use_loss_scaling=True,
                      init_loss_scale=2.0 ** 16)
  untouched = tiny_model.train(config, [], distributed.init(False), _adamw)
  poisoned = tiny_model.train(config, batches, distributed.init(False), _adamw,
                              poison_at={poison_at})
  last = poisoned["history"][-1]
  assert last["update_step"] and not last["all_finite"]
  assert last["global_step"] == 0
  assert poisoned["variables"]["train_step/loss_scale/scale"] == 2.0 ** 15
  state = _state_without_step_bookkeeping(poisoned["variables"])
  assert any("adam_m" in n for n in state)  # the optimizer slots are compared too
  for name, value in state.items():
    assert np.all(np.isfinite(value)), name
    np.testing.assert_array_equal(value, untouched["variables"][name], err_msg=name)


def test_after_an_overflow_the_next_window_trains_normally():
  """A poisoned window leaves inf in the accumulators; the next window must not inherit it."""
  num_steps = 2
  ids, targets = tiny_model.make_data(4 * num_steps)
  batches = tiny_model.split(ids, targets, 2 * num_steps)
  config = StepConfig(num_accumulation_steps=num_steps, use_loss_scaling=True,
                      init_loss_scale=2.0 ** 16)
  clean_second_window = tiny_model.train(
      StepConfig(num_accumulation_steps=num_steps, use_loss_scaling=True,
                 init_loss_scale=2.0 ** 15), batches[num_steps:], distributed.init(False), _adamw)
  recovered = tiny_model.train(config, batches, distributed.init(False), _adamw, poison_at={1})
  assert [h["global_step"] for h in recovered["history"]] == [0, 0, 0, 1]
  assert [h["all_finite"] for h in recovered["history"]] == [True, False, True, True]
  _assert_weights_close(recovered["weights"], clean_second_window["weights"])


def test_loss_scale_grows_after_interval_of_finite_updates():
  ids, targets = tiny_model.make_data(10)
  config = StepConfig(use_loss_scaling=True, init_loss_scale=2.0 ** 10, loss_scale_growth_interval=2)
  result = tiny_model.train(config, tiny_model.split(ids, targets, 5), distributed.init(False),
                            poison_at={3})
  assert [h["loss_scale"] for h in result["history"]] == [2.0 ** 10, 2.0 ** 10, 2.0 ** 11,
                                                          2.0 ** 11, 2.0 ** 10]
  assert [h["global_step"] for h in result["history"]] == [1, 2, 3, 3, 4]


@pytest.mark.parametrize("scale,good,finite,expected", [
    (8.0, 0, True, (8.0, 1)),
    (8.0, 2, True, (16.0, 0)),      # 3rd consecutive finite update with interval 3: grow
    (8.0, 2, False, (4.0, 0)),      # overflow: halve, restart the count
    (1.0, 1, False, (1.0, 0)),      # never below 1
    (2.0 ** 127, 2, True, (2.0 ** 127, 0)),  # doubling would overflow float32: keep
])
def test_next_loss_scale_rule(scale, good, finite, expected):
  with tf.Graph().as_default():
    new_scale, new_good = loss_scale.next_loss_scale(
        tf.constant(scale, tf.float32), tf.constant(good, tf.int64), tf.constant(finite), 3)
    with tf.Session(config=tiny_model.session_config()) as sess:
      assert tuple(sess.run([new_scale, new_good])) == expected


def test_manual_fp16_compute_overflows_then_trains():
  """fp16 model (fp32 variables via modeling.precision): scale 2**24 overflows fp16 gradients,
  the scale halves until they fit, skipped steps leave the weights untouched, then it trains."""
  ids, targets = tiny_model.make_data(2)
  config = StepConfig(use_loss_scaling=True, init_loss_scale=2.0 ** 24)
  result = tiny_model.train(config, [(ids, targets)] * 14, distributed.init(False), _adamw,
                            compute_type=tf.float16)
  finite = [h["all_finite"] for h in result["history"]]
  first_good = finite.index(True)
  assert first_good >= 1 and all(finite[first_good:])
  assert result["history"][first_good]["loss_scale"] == 2.0 ** (24 - first_good)
  assert result["history"][-1]["global_step"] == len(finite) - first_good
  for name, value in result["weights"].items():
    assert value.dtype == np.float32 and np.all(np.isfinite(value)), name


def test_sparse_gradients_without_densify_match_dense():
  ids, targets = tiny_model.make_data(6)
  batches = tiny_model.split(ids, targets, 3)
  dense = tiny_model.train(StepConfig(sparse_as_dense=True), batches, distributed.init(False), _adamw)
  sparse = tiny_model.train(StepConfig(sparse_as_dense=False), batches, distributed.init(False),
                            _adamw)
  _assert_weights_close(dense["weights"], sparse["weights"])


def test_variables_without_gradient_are_left_out_and_missing_all_raises():
  from bert_fin.training.graph import step
  with tf.Graph().as_default():
    used = tf.get_variable("used", initializer=tf.constant(2.0))
    unused = tf.get_variable("unused", initializer=tf.constant(3.0))
    global_step = tf.train.get_or_create_global_step()
    dist = distributed.init(False)
    train_op, _ = step.build_train_op(tf.square(used), _sgd(None), global_step, dist, StepConfig())
    assert dist.allreduce_count == 1
    with tf.Session(config=tiny_model.session_config()) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(train_op)
      # d(used^2) = 4, clipped to norm 1.0, SGD lr 0.5: 2 - 0.5 * 1 = 1.5; `unused` untouched.
      assert sess.run([used, unused, global_step]) == [pytest.approx(1.5), 3.0, 1]
    with pytest.raises(ValueError, match="depends on none"):
      step.build_train_op(tf.square(used), _sgd(None), global_step, dist, StepConfig(),
                          tvars=[unused])


@pytest.mark.parametrize("kwargs", [
    {"num_accumulation_steps": 0}, {"num_accumulation_steps": 2.5}, {"init_loss_scale": 0.5},
    {"init_loss_scale": float("inf")}, {"loss_scale_growth_interval": 0}, {"clip_norm": 0.0}])
def test_step_config_rejects_bad_values(kwargs):
  with pytest.raises(ValueError):
    StepConfig(**kwargs)


def test_single_process_interface():
  dist = distributed.init(False)
  assert (dist.size, dist.rank, dist.local_rank, dist.is_chief) == (1, 0, 0, True)
  assert dist.broadcast_hooks() == []
  with tf.Graph().as_default():
    table = tf.get_variable("table", initializer=tf.ones([4, 2]))
    sparse_grad = tf.gradients(tf.reduce_sum(tf.gather(table, [1, 1, 3])), [table])[0]
    assert isinstance(sparse_grad, tf.IndexedSlices)
    dense, none, kept = dist.allreduce([sparse_grad, None, sparse_grad], sparse_as_dense=True)
    assert none is None and isinstance(dense, tf.Tensor)
    assert isinstance(dist.allreduce([sparse_grad], sparse_as_dense=False)[0], tf.IndexedSlices)
    assert dist.allreduce_count == 3
    with tf.Session(config=tiny_model.session_config()) as sess:
      sess.run(tf.global_variables_initializer())
      np.testing.assert_array_equal(sess.run(dense)[:, 0], [0, 2, 0, 1])


def test_chief_decides_single_process():
  dist = distributed.init(False)
  assert dist.chief_decides(lambda: '{"a": 1}') == '{"a": 1}'

  def refuse():
    raise OSError("no such file: x")

  with pytest.raises(KeyError, match="no such file: x"):
    dist.chief_decides(refuse, error_type=KeyError)

  def crash():
    raise RuntimeError("a bug, not a refusal")

  with pytest.raises(RuntimeError, match="a bug"):  # only `catch` types become refusals
    dist.chief_decides(crash)
  with pytest.raises(TypeError, match="not JSON-able"):  # a bug of decide(), not a refusal
    dist.chief_decides(lambda: {"a": object()})
  # any JSON-able value travels (as JSON carries it: a tuple arrives as a list), no call site
  # wraps it in JSON by hand
  assert dist.chief_decides(lambda: {"a": 1, "b": ("x", None)}) == {"a": 1, "b": ["x", None]}


def test_session_config_xla_and_amp(monkeypatch):
  monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=2")
  dist = distributed.init(False)
  plain = dist.session_config()
  assert plain.graph_options.optimizer_options.global_jit_level == tf.OptimizerOptions.DEFAULT
  assert plain.graph_options.rewrite_options.auto_mixed_precision == 0  # DEFAULT (off)
  assert plain.gpu_options.visible_device_list == ""  # no GPU on this host
  config = dist.session_config(use_xla=True, use_amp=True)
  assert config.graph_options.optimizer_options.global_jit_level == tf.OptimizerOptions.ON_1
  from tensorflow.core.protobuf import rewriter_config_pb2
  assert (config.graph_options.rewrite_options.auto_mixed_precision ==
          rewriter_config_pb2.RewriterConfig.ON)
  # TF has read TF_XLA_FLAGS long before a session config exists: xla_env.py alone writes it
  assert os.environ["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=2"
  gpu = distributed.build_session_config(local_rank=3, local_size=4, use_xla=False, use_amp=False,
                                         num_gpus=4)
  assert gpu.gpu_options.visible_device_list == "3"
  assert gpu.intra_op_parallelism_threads == max(1, (os.cpu_count() or 1) // 4)
  assert gpu.inter_op_parallelism_threads == 0  # TF's default on GPU ranks
  cpu = distributed.build_session_config(local_rank=3, local_size=4, use_xla=False, use_amp=False,
                                         num_gpus=0)
  assert cpu.inter_op_parallelism_threads == 2


def _horovod_or_skip():
  hvd = pytest.importorskip("horovod.tensorflow")
  if not hvd.mpi_built() and not hvd.gloo_built():
    pytest.skip("horovod built without a controller")
  return distributed.init(True)


@pytest.mark.parametrize("post", [True, False])
def test_horovod_allreduce_placement_size1(control_flow, post):
  """Counts HorovodAllreduce ops that executed on each micro-step (hvd at size 1 = real ops)."""
  dist = _horovod_or_skip()
  num_steps = 3
  ids, targets = tiny_model.make_data(2 * num_steps)
  config = StepConfig(num_accumulation_steps=num_steps, allreduce_post_accumulation=post)
  result = tiny_model.train(config, tiny_model.split(ids, targets, 2 * num_steps), dist,
                            _adamw, trace=True)
  num_tensors = len(result["weights"])
  assert dist.allreduce_count == num_tensors  # each gradient tensor allreduced in one place
  per_micro_step = [h["allreduces"] for h in result["history"]]
  # no allreduce beyond the gradients' (the finite check reads the already averaged gradients)
  if post:
    assert per_micro_step == [0, 0, num_tensors] * 2
  else:
    assert per_micro_step == [num_tensors, num_tensors, num_tensors] * 2
  plain = tiny_model.train(config, tiny_model.split(ids, targets, 2 * num_steps),
                           distributed.init(False), _adamw)
  _assert_weights_close(plain["weights"], result["weights"])


@pytest.mark.parametrize("num_steps,post", [(1, False), (2, False), (2, True)])
def test_graph_has_one_allreduce_per_gradient_tensor_and_no_more(num_steps, post):
  """The finite check reads the averaged gradients: no collective of its own in the graph."""
  from bert_fin.training.graph import step
  dist = _horovod_or_skip()
  with tf.Graph().as_default() as graph:
    ids = tf.placeholder(tf.int32, [None, tiny_model.SEQ])
    targets = tf.placeholder(tf.float32, [None])
    global_step = tf.train.get_or_create_global_step()
    config = StepConfig(num_accumulation_steps=num_steps, allreduce_post_accumulation=post,
                        use_loss_scaling=True)
    step.build_train_op(tiny_model.build_loss(ids, targets, tf.constant(0.0)),
                        _adamw(global_step), global_step, dist, config)
    graph_def = graph.as_graph_def()
  # tf.cond branches (control flow v2) live in the function library
  nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
  allreduces = [n for n in nodes if n.op == "HorovodAllreduce"]
  assert len(allreduces) == 4  # tiny model: embeddings, hidden kernel + bias, output kernel
  assert all(n.attr["T"].type == tf.float32.as_datatype_enum for n in allreduces)  # no int flag


def test_monitored_session_checkpoint_keeps_loss_scale_not_accumulators(tmp_path):
  """As under an Estimator: the Scaffold initialises the local accumulators, a restart resumes
  global_step and the loss scale from the checkpoint, which holds no accumulator."""
  from bert_fin.training.graph import step
  ids, targets = tiny_model.make_data(8)
  config = StepConfig(num_accumulation_steps=2, use_loss_scaling=True, init_loss_scale=2.0 ** 12)

  def run(micro_batches, poison_at=()):
    with tf.Graph().as_default():
      ids_in = tf.placeholder(tf.int32, [None, tiny_model.SEQ])
      targets_in = tf.placeholder(tf.float32, [None])
      poison = tf.placeholder_with_default(0.0, [])
      global_step = tf.train.get_or_create_global_step()
      train_op, scalars = step.build_train_op(
          tiny_model.build_loss(ids_in, targets_in, poison), _adamw(global_step), global_step,
          distributed.init(False), config)
      local_names = {v.op.name for v in tf.local_variables()}
      assert {"train_step/micro_step", "train_step/accum/tiny/embeddings"} <= local_names
      assert "train_step/loss_scale/scale" in {v.op.name for v in tf.global_variables()}
      assert not any(v.op.name.startswith("train_step/") for v in tf.trainable_variables())
      with tf.train.MonitoredTrainingSession(
          checkpoint_dir=str(tmp_path), save_checkpoint_steps=1, save_summaries_steps=None,
          config=tiny_model.session_config()) as sess:
        for index, (batch_ids, batch_targets) in enumerate(micro_batches):
          feed = {ids_in: batch_ids, targets_in: batch_targets}
          if index in poison_at:
            feed[poison] = np.inf
          _, values = sess.run([train_op, scalars], feed)
        steps = sess.run(global_step)  # after the run: a fetch beside train_op may race it
    return None, values, steps

  batches = tiny_model.split(ids, targets, 4)
  # Window 1 overflows (skipped, scale halved to 2**11), window 2 updates: global_step 1.
  _, scalars, steps = run(batches, poison_at={0})
  assert steps == 1 and scalars["loss_scale"] == 2.0 ** 11
  saved = dict(tf.train.list_variables(str(tmp_path)))
  assert "train_step/loss_scale/scale" in saved and "global_step" in saved
  assert not any(name.startswith("train_step/accum") or "micro_step" in name for name in saved)
  assert tf.train.load_variable(str(tmp_path), "train_step/loss_scale/scale") == 2.0 ** 11
  # Restart: resumes at global_step 1 with the halved scale.
  _, scalars, steps = run(batches[:2])
  assert steps == 2 and scalars["loss_scale"] == 2.0 ** 11


def test_step_runs_under_xla_and_amp_session_config(monkeypatch):
  """The XLA (ON_1, lazy compilation off) + auto_mixed_precision session config accepts the
  step's graph (tf.cond, resource variables); on this CPU host both leave the numbers alone."""
  monkeypatch.delenv("TF_XLA_FLAGS", raising=False)  # restored after the test
  dist = distributed.init(False)
  ids, targets = tiny_model.make_data(8)
  batches = tiny_model.split(ids, targets, 4)
  config = StepConfig(num_accumulation_steps=2, use_loss_scaling=True, init_loss_scale=2.0 ** 10)
  session_config = dist.session_config(use_xla=True, use_amp=True)
  session_config.intra_op_parallelism_threads = session_config.inter_op_parallelism_threads = 1
  tuned = tiny_model.train(config, batches, dist, _adamw, config=session_config)
  plain = tiny_model.train(config, batches, dist, _adamw)
  assert [h["global_step"] for h in tuned["history"]] == [0, 1, 1, 2]
  _assert_weights_close(tuned["weights"], plain["weights"])
