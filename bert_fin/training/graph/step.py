"""The training step: one micro-batch in; an optimizer update on every Nth micro-batch.

`build_train_op(loss, optimizer, global_step, dist, step_config)` builds, for the micro-batch
mean loss `loss` (float scalar, unscaled):

  every micro-step:  g = d(loss * loss_scale / N)/d(tvars)
                     [allreduce g across ranks here unless allreduce_post_accumulation]
                     accum = g on the first micro-step of a window, accum + g after (N > 1)
  every Nth:         [allreduce accum here if allreduce_post_accumulation: once per update]
                     g = accum / loss_scale
                     [g += the regularizer's gradient, float32, the same on every rank]
                     all_finite = every g finite (g is already averaged over the ranks, so
                                  it is the same on every rank: no extra collective)
                     if all_finite: clip by global norm (google order: clip, then apply),
                                    optimizer.apply_gradients, global_step += 1
                     else:          nothing touches the weights or global_step
                     loss scale: grow after growth_interval finite updates, halve on overflow

Head warm-up (StepConfig.head_warmup_steps = H > 0, head_warmup_variables = names): while
global_step < H, the update applies to those variables only; the others (the encoder an
--init_checkpoint provided) get no update at all, so neither their values nor their optimizer slots
move (no zero-gradient step that momentum or weight decay would still turn into a change). The
clip and the logged grad_norm use the warmed-up variables' norm then. Everything else is the same
in both phases: every gradient is computed, allreduced (the same collectives on every rank at
every step) and checked for inf/NaN; the phase is read from global_step, so a resume continues it
exactly.

So global_step counts optimizer updates, N micro-batches of size b give the same update as one
batch of N*b (the loss of each micro-batch is a mean, hence the 1/N), and the weights never see
an inf or NaN. The optimizer is a plain one (never hvd.DistributedOptimizer): each gradient is
averaged exactly once, where the config says. Optimizers that read global_step (LAMB, learning
rate schedules) read the value before this update's increment (the increment runs after
apply_gradients). Bookkeeping lives under `train_step/`: the loss scale is a global
(checkpointed) variable, so a resumed job keeps its scale; the accumulators and the micro-step
counter are local variables (initialised by the Scaffold's local_init_op, not checkpointed).

Regularizer (--init_regularizer, training/init_regularizer/penalty.py): a penalty of the weights
whose gradient is added once an update to the averaged, unscaled gradients, so it is neither
scaled, nor averaged, nor accumulated N times; the clip and grad_norm include it, and its value
at the update's weights is kept in a local variable (`penalty`, 0 before the first update).

AMP: compute in fp16 comes from the grappler auto_mixed_precision rewrite
(distributed.build_session_config(use_amp=True), GPU only) or from a model built with
compute_type=float16 and fp32 variables; either way, turn on `use_loss_scaling` here.
"""
import dataclasses
import math

import tensorflow.compat.v1 as tf

from bert_fin.optimization import optimizers
from bert_fin.modeling.checkpoint import variable_name
from bert_fin.training.graph import loss_scale as loss_scale_lib
from bert_fin.training.distributed import densify

SCOPE = "train_step"


@dataclasses.dataclass(frozen=True)
class StepConfig(object):
  """How gradients become an update. Field defaults follow google-research/bert + NVIDIA.

  num_accumulation_steps: micro-batches a update (N >= 1).
  allreduce_post_accumulation: allreduce the accumulated gradients once an update instead of
    every micro-batch's gradients (NVIDIA's flag; fewer, larger collectives).
  use_loss_scaling: dynamic loss scaling (needed with fp16 compute).
  init_loss_scale / loss_scale_growth_interval: start value (2**32 as NVIDIA) and the number of
    consecutive finite updates after which the scale doubles.
  clip_norm: clip by global norm to this value before applying (1.0 as google); None: no clip.
  sparse_as_dense: densify IndexedSlices gradients (embeddings) before the allreduce.
  fp16_allreduce: Horovod fp16 compression of the allreduced gradients.
  head_warmup_steps / head_warmup_variables: the first head_warmup_steps updates apply to the
    variables named in head_warmup_variables (a tuple of names) only (module docstring).
  """
  num_accumulation_steps: int = 1
  allreduce_post_accumulation: bool = False
  use_loss_scaling: bool = False
  init_loss_scale: float = 2.0 ** 32
  loss_scale_growth_interval: int = 1000
  clip_norm: float = 1.0
  sparse_as_dense: bool = True
  fp16_allreduce: bool = False
  head_warmup_steps: int = 0
  head_warmup_variables: tuple = ()

  def __post_init__(self):
    if not isinstance(self.num_accumulation_steps, int) or self.num_accumulation_steps < 1:
      raise ValueError("num_accumulation_steps must be an int >= 1, got %r" %
                       (self.num_accumulation_steps,))
    if not (math.isfinite(self.init_loss_scale) and self.init_loss_scale >= 1.0):
      raise ValueError("init_loss_scale must be finite and >= 1, got %r" % (self.init_loss_scale,))
    if not isinstance(self.loss_scale_growth_interval, int) or self.loss_scale_growth_interval < 1:
      raise ValueError("loss_scale_growth_interval must be an int >= 1, got %r" %
                       (self.loss_scale_growth_interval,))
    if self.clip_norm is not None and not self.clip_norm > 0:
      raise ValueError("clip_norm must be > 0 or None, got %r" % (self.clip_norm,))
    if not isinstance(self.head_warmup_steps, int) or self.head_warmup_steps < 0:
      raise ValueError("head_warmup_steps must be an int >= 0, got %r" % (self.head_warmup_steps,))
    if self.head_warmup_steps and not self.head_warmup_variables:
      raise ValueError("head_warmup_steps=%d needs the names of the variables to warm up"
                       % self.head_warmup_steps)


def build_train_op(loss, optimizer, global_step, dist, step_config, tvars=None,
                   regularizer=None):
  """Returns (train_op, scalars) for one micro-batch; see the module docstring for the order.

  loss: float scalar, mean loss of this micro-batch (unscaled; fp16 is cast to fp32).
  optimizer: a tf.compat.v1.train.Optimizer-like object with apply_gradients(grads_and_vars).
  global_step: int variable; incremented here, once a finite update.
  dist: bert_fin.training.distributed.init(...) result.
  step_config: StepConfig.
  tvars: variables to train (default tf.trainable_variables()); those without a gradient are
    logged and left out.
  regularizer: None, or an object whose gradients_and_value(tvars) returns ([float32 gradient or
    None a variable], float32 [] value): a penalty of the weights (module docstring).
  scalars: {'loss_scale': float32 [] (scale used this micro-step, 1.0 without scaling),
            'all_finite': bool [] (on update steps: all ranks' gradients finite, i.e. the update
                          was applied; on other micro-steps: this micro-batch's local gradients),
            'update_step': bool [] (this micro-step applied or skipped an update),
            'grad_norm': float32 [] (global norm of the last update's averaged, unscaled
                         gradients before clipping; inf/NaN on a skipped update; 0 before the
                         first update). The norm the clip computes anyway, kept in a local
                         variable: no extra collective, one scalar to fetch;
            'penalty': float32 [] (with a regularizer only: its value at the weights of the
                       last update, 0 before the first);
            'penalty_nonfinite': float32 [] (with a regularizer only: 1 when the last update's
                       penalty gradient held an inf or NaN, else 0).}
  """
  cfg = step_config
  tvars = list(tf.trainable_variables() if tvars is None else tvars)
  with tf.name_scope(SCOPE):
    scale_state, scale_value = _loss_scale(cfg)
    scaled_loss = tf.cast(loss, tf.float32) * (scale_value / float(cfg.num_accumulation_steps))
    grads, tvars = gradients_or_raise(scaled_loss, tvars)
    if hasattr(optimizer, "create_slots"):
      optimizer.create_slots(tvars)  # optimization/optimizers.py: slots built outside the tf.cond.
    update = _Update(optimizer, tvars, global_step, dist, cfg, scale_state, scale_value,
                     regularizer)
    if cfg.num_accumulation_steps == 1:
      update_op, all_finite = update(update.allreduce(grads))
      with tf.control_dependencies([update_op]):
        all_finite = tf.identity(all_finite, name="all_finite")
      update_step = tf.constant(True, name="update_step")
      train_op = tf.group(update_op, name="train_op")
      scalars = _scalars(scale_value, all_finite, update_step)
    else:
      train_op, scalars = _accumulating_train_op(grads, tvars, update, cfg)
    with tf.control_dependencies([train_op]):
      scalars["grad_norm"] = tf.identity(update.grad_norm.read_value(), name="grad_norm")
      if update.penalty is not None:
        scalars["penalty"] = tf.identity(update.penalty.read_value(), name="penalty")
        scalars["penalty_nonfinite"] = tf.identity(update.penalty_nonfinite.read_value(),
                                                   name="penalty_nonfinite")
    return train_op, scalars


def _loss_scale(cfg):
  """(LossScaleState or None, float32 [] scale read once for this micro-step)."""
  if not cfg.use_loss_scaling:
    return None, tf.constant(1.0, name="loss_scale")
  with tf.variable_scope(SCOPE):
    state = loss_scale_lib.create_loss_scale(cfg.init_loss_scale)
  value = tf.identity(state.scale.read_value(), name="loss_scale")
  tf.summary.scalar("loss_scale", value)
  return state, value


class _Update(object):
  """Summed, scaled gradients -> (update op, all_finite): unscale, add the regularizer's
  gradient, finite check on all ranks, clip, apply + global_step += 1 when finite, loss-scale
  update. Also owns the allreduce."""

  def __init__(self, optimizer, tvars, global_step, dist, cfg, scale_state, scale_value,
               regularizer=None):
    self.optimizer, self.tvars, self.global_step = optimizer, tvars, global_step
    self.dist, self.cfg = dist, cfg
    self.scale_state, self.scale_value = scale_state, scale_value
    self.regularizer, self.penalty, self.penalty_nonfinite = regularizer, None, None
    self.warmed_up = head_warmup_indices(tvars, cfg)
    with tf.variable_scope(SCOPE):
      self.grad_norm = _local_scalar("grad_norm")
      if regularizer is not None:
        self.penalty = _local_scalar("penalty")
        self.penalty_nonfinite = _local_scalar("penalty_nonfinite")

  def allreduce(self, grads):
    return self.dist.allreduce(grads, sparse_as_dense=self.cfg.sparse_as_dense,
                               fp16_compression=self.cfg.fp16_allreduce)

  def __call__(self, summed_grads):
    unscaled = [scale_gradient(sum_duplicate_indices(g), 1.0 / self.scale_value)
                for g in summed_grads]
    records = []
    if self.regularizer is not None:  # once an update, after the allreduce, in float32
      extra, value = self.regularizer.gradients_and_value(self.tvars)
      unscaled = [g if e is None else tf.cast(densify(g), tf.float32) + e
                  for g, e in zip(unscaled, extra)]
      records.append(self.penalty.assign(value))
      penalty_finite = all_gradients_finite([e for e in extra if e is not None])
      records.append(self.penalty_nonfinite.assign(1.0 - tf.cast(penalty_finite, tf.float32)))
    # summed_grads went through the allreduce: identical on every rank, and so is this flag (no
    # second collective needed).
    finite = all_gradients_finite(unscaled)
    norm = tf.global_norm(unscaled)
    warmup = None
    if self.warmed_up:
      in_warmup = tf.less(tf.cast(self.global_step, tf.int64), self.cfg.head_warmup_steps,
                          name="in_head_warmup")
      norm = tf.where(in_warmup, tf.global_norm([unscaled[i] for i in self.warmed_up]), norm)
    clipped = clip_if_finite(unscaled, self.cfg.clip_norm, finite, norm=norm)
    grads_and_vars = list(zip(clipped, self.tvars))
    if self.warmed_up:
      warmup = (in_warmup, [grads_and_vars[i] for i in self.warmed_up])
    step_op = apply_if_finite(self.optimizer, grads_and_vars, self.global_step, finite, warmup)
    step_op = tf.group(step_op, self.grad_norm.assign(norm), *records)
    if self.scale_state is None:
      return step_op, finite
    with tf.control_dependencies([step_op]):
      scale_op = loss_scale_lib.update_loss_scale(
          self.scale_state, self.scale_value, finite, self.cfg.loss_scale_growth_interval)
    return tf.group(step_op, scale_op), finite


def _local_scalar(name):
  """A float32 [] local variable (not checkpointed) starting at 0: a value the step keeps."""
  return tf.get_variable(name, shape=[], dtype=tf.float32, trainable=False, use_resource=True,
                         initializer=tf.zeros_initializer(),
                         collections=[tf.GraphKeys.LOCAL_VARIABLES])


def _accumulating_train_op(grads, tvars, update, cfg):
  """N > 1: accumulate every micro-step, run `update` inside a tf.cond on the Nth."""
  num_steps = cfg.num_accumulation_steps
  if not cfg.allreduce_post_accumulation:
    grads = update.allreduce(grads)  # every micro-batch (NVIDIA's default)
  with tf.variable_scope(SCOPE):
    micro_step = tf.get_variable(
        "micro_step", shape=[], dtype=tf.int64, trainable=False, use_resource=True,
        initializer=tf.zeros_initializer(), collections=[tf.GraphKeys.LOCAL_VARIABLES])
    accumulators = create_accumulators(tvars)
  step_in_window = micro_step.read_value()
  is_first = tf.equal(step_in_window, 0)
  update_step = tf.equal(step_in_window, num_steps - 1, name="update_step")
  accumulated = accumulate(accumulators, grads, is_first)

  def update_branch():
    # Built inside the branch: with post accumulation the allreduce runs once an update.
    summed = update.allreduce(accumulated) if cfg.allreduce_post_accumulation else accumulated
    op, finite = update(summed)
    with tf.control_dependencies([op]):
      return tf.identity(finite)

  def micro_branch():
    return all_gradients_finite(grads)

  all_finite = tf.identity(tf.cond(update_step, update_branch, micro_branch), name="all_finite")
  with tf.control_dependencies([all_finite]):
    advance = micro_step.assign(tf.floormod(step_in_window + 1, num_steps))
  return tf.group(all_finite, advance, name="train_op"), _scalars(
      update.scale_value, all_finite, update_step)


def _scalars(scale_value, all_finite, update_step):
  return {"loss_scale": scale_value, "all_finite": all_finite, "update_step": update_step}


def gradients_or_raise(loss, tvars):
  """tf.gradients of loss w.r.t. tvars, without the variables that get no gradient (logged).

  Returns (grads, tvars) of equal length; raises ValueError if no variable gets a gradient.
  """
  if not tvars:
    raise ValueError("build_train_op: no trainable variables")
  grads = tf.gradients(loss, tvars)
  missing = [v.op.name for g, v in zip(grads, tvars) if g is None]
  if missing:
    tf.logging.warning("No gradient for %d variable(s), not trained: %s", len(missing),
                       ", ".join(missing))
  kept = [(g, v) for g, v in zip(grads, tvars) if g is not None]
  if not kept:
    raise ValueError("build_train_op: the loss depends on none of the %d variables" % len(tvars))
  return [g for g, _ in kept], [v for _, v in kept]


def sum_duplicate_indices(grad):
  """IndexedSlices with each row index once (values of repeated indices summed); else unchanged.

  tf.global_norm over IndexedSlices squares the raw slices, so a token seen twice in a batch
  would count as 2 * g**2 instead of (2g)**2; after this the norm equals the dense gradient's.
  """
  if not isinstance(grad, tf.IndexedSlices):
    return grad
  unique_indices, positions = tf.unique(grad.indices)
  values = tf.math.unsorted_segment_sum(grad.values, positions, tf.shape(unique_indices)[0])
  return tf.IndexedSlices(values, unique_indices, grad.dense_shape)


def scale_gradient(grad, factor):
  """grad * factor for a Tensor or the values of IndexedSlices."""
  if isinstance(grad, tf.IndexedSlices):
    return tf.IndexedSlices(grad.values * factor, grad.indices, grad.dense_shape)
  return grad * factor


def all_gradients_finite(grads):
  """bool []: no inf/NaN in any gradient (Tensor or IndexedSlices values)."""
  flags = []
  for grad in grads:
    values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
    flags.append(tf.reduce_all(tf.is_finite(values)))
  return tf.reduce_all(tf.stack(flags))


def clip_if_finite(grads, clip_norm, finite, norm=None):
  """optimizers.clip_gradients (google's global-norm clip), norm replaced by 1.0 if not finite.

  norm: tf.global_norm(grads) when the caller has it already (computed here otherwise).

  The clipped values of a non-finite step are never applied (apply_if_finite); the guard only
  keeps inf/NaN norms out of the graph's arithmetic.
  """
  if clip_norm is None:
    return grads
  norm = tf.global_norm(grads) if norm is None else norm
  safe_norm = tf.where(finite, norm, tf.ones_like(norm))
  return optimizers.clip_gradients(grads, clip_norm, use_norm=safe_norm)


def head_warmup_indices(tvars, cfg):
  """Positions in tvars of cfg.head_warmup_variables ([] without head warm-up); ValueError when
  a named variable is not among tvars (the names were decided for another model)."""
  if not cfg.head_warmup_steps:
    return []
  names = [variable_name(v) for v in tvars]
  unknown = sorted(set(cfg.head_warmup_variables) - set(names))
  if unknown:
    raise ValueError("head warm-up: no trained variable named %s" % ", ".join(unknown))
  wanted = set(cfg.head_warmup_variables)
  return [i for i, name in enumerate(names) if name in wanted]


def apply_in_phase(optimizer, grads_and_vars, in_warmup, warmup_grads_and_vars):
  """bool [] tensor that runs optimizer.apply_gradients on warmup_grads_and_vars while in_warmup
  (the other variables and their slots untouched), on every pair of grads_and_vars after."""

  def applied(pairs):
    with tf.control_dependencies([optimizer.apply_gradients(pairs)]):
      return tf.constant(True)

  return tf.cond(in_warmup, lambda: applied(warmup_grads_and_vars),
                 lambda: applied(grads_and_vars), name="head_warmup_phase")


def apply_if_finite(optimizer, grads_and_vars, global_step, finite, warmup=None):
  """Op: if finite, optimizer.apply_gradients then global_step += 1; else nothing.

  warmup: None, or (in_warmup bool [], the pairs of the warmed-up variables): apply_in_phase.
  """

  def apply_and_count():
    if warmup is None:
      apply_op = optimizer.apply_gradients(grads_and_vars)
    else:
      apply_op = apply_in_phase(optimizer, grads_and_vars, *warmup)
    increment = optimizers.increment_global_step(global_step, after=apply_op)
    with tf.control_dependencies([increment]):
      return tf.identity(finite)

  def skip():
    return tf.identity(finite)

  return tf.cond(finite, apply_and_count, skip).op


def create_accumulators(tvars):
  """One float32 zero-initialised local variable a trained variable, same shape.

  Local (tf.GraphKeys.LOCAL_VARIABLES), not global: checkpoints are written right after an update
  (when global_step moves), where the accumulators hold nothing worth keeping, so saving them
  would only double the checkpoint size and tie checkpoints to num_accumulation_steps.
  """
  return [
      tf.get_variable(
          "accum/" + v.op.name, shape=v.shape, dtype=tf.float32, trainable=False,
          use_resource=True, initializer=tf.zeros_initializer(),
          collections=[tf.GraphKeys.LOCAL_VARIABLES]) for v in tvars]


def accumulate(accumulators, grads, is_first):
  """accum = g on the first micro-step of a window, accum + g otherwise; returns new values.

  IndexedSlices are densified. tf.where (not accum * 0 + g) so an inf/NaN left over from a
  skipped window cannot leak into the next one.
  """
  new_values = []
  for accum, grad in zip(accumulators, grads):
    grad = tf.cast(densify(grad), tf.float32)
    summed = tf.where_v2(is_first, grad, accum.read_value() + grad)
    new_values.append(accum.assign(summed, read_value=True))
  return new_values
