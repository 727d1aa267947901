"""The optimizers of BERT pretraining and fine-tuning (weight updates only), by their names.

Faithful to google-research/bert optimization.py: the same `AdamWeightDecayOptimizer` (no bias
correction, decoupled weight decay, slots `<var>/adam_m` and `<var>/adam_v` created with
tf.get_variable so google checkpoints with optimizer slots restore), global-norm clipping at 1.0
and a global step incremented by the caller, not by apply_gradients.
`LAMBOptimizer` adds the layer-wise trust ratio and Adam bias correction (as NVIDIA's BERT), but
corrects with the post-increment step t = global_step + 1: NVIDIA's TF1 LAMB uses t = global_step,
so 1 - beta**0 = 0 and its very first update divides by zero (NaN weights, even with lr = 0).
`AdamWeightDecayOptimizer(bias_correction=True)` ("adamw") is torch.optim.AdamW's update with
google's slots: the same bias correction, counted by its own step variable `adam_step`.
Every optimizer takes `learning_rate_multipliers` ({variable name: factor}): that variable is
updated with learning_rate * factor (fine-tuning's layer-wise decay, finetune/recipes.py). The
factor multiplies the whole step (Adam direction and weight decay): scaling the gradient instead
would change nothing, Adam's update being invariant to the gradient's scale.

The pieces are public so the training loop can compose them with loss scaling, gradient
accumulation and the Horovod allreduce: gradients in (`clip_gradients`), update op out
(`optimizer.apply_gradients`), then `increment_global_step` after it. `create_optimizer` is google's
single-process convenience built from the same pieces and schedule.py's learning rate.
"""
import re

import tensorflow.compat.v1 as tf

from bert_fin.modeling.checkpoint import variable_name
from bert_fin.optimization import names
from bert_fin.optimization import schedule

STEP_COUNTER = "adam_step"  # adamw's count of applied updates (torch's state["step"]): int64 []
# google's create_optimizer: no weight decay for LayerNorm parameters and biases.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
DEFAULT_WEIGHT_DECAY_RATE = 0.01
DEFAULT_CLIP_NORM = 1.0


def clip_gradients(grads, clip_norm=DEFAULT_CLIP_NORM, use_norm=None):
  """google's clipping: scales all gradients by clip_norm / max(global_norm, clip_norm).

  Args:
    grads: list of gradient tensors (IndexedSlices allowed); None entries stay None.
    clip_norm: float > 0.
    use_norm: optional precomputed global norm (e.g. a finite stand-in when loss scaling found
      an overflow and the step is skipped anyway).

  Returns:
    list of clipped gradients, same length and order as `grads`.

  Raises:
    ValueError: clip_norm <= 0.
  """
  if clip_norm <= 0:
    raise ValueError("clip_norm must be > 0, got %r" % (clip_norm,))
  clipped, _ = tf.clip_by_global_norm(list(grads), clip_norm=clip_norm, use_norm=use_norm)
  return clipped


def increment_global_step(global_step, after):
  """global_step += 1 once `after` (the update op) has run, as google's create_optimizer.

  The control dependency matters: the learning rate and LAMB's bias correction read global_step,
  and must see the value before this update's increment.

  Args:
    global_step: the global step variable (int64 []).
    after: the update op the increment waits for.

  Returns:
    the assign op (also named `step_update` via its new value, as NVIDIA's graphs).
  """
  with tf.control_dependencies([after]):
    new_global_step = tf.identity(global_step + 1, name="step_update")
    return global_step.assign(new_global_step)


class _DecoupledWeightDecayOptimizer(tf.train.Optimizer):
  """Shared machinery of the two optimizers: google-named slots and decay exclusion by name.

  Subclasses implement `_param_update(grad, param, m, v, param_name)` returning
  (next_param, next_m, next_v), from `_adam_update` (the Adam direction, bias-corrected when
  `_update_number()`, the 1-based number t of the update being built, is not None, plus the
  decoupled weight decay).
  """

  def __init__(self, learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
               exclude_from_weight_decay, name, learning_rate_multipliers=None):
    super(_DecoupledWeightDecayOptimizer, self).__init__(False, name)
    if not 0.0 <= beta_1 < 1.0 or not 0.0 <= beta_2 < 1.0:
      raise ValueError("beta_1 and beta_2 must be in [0, 1), got %r, %r" % (beta_1, beta_2))
    if weight_decay_rate < 0:
      raise ValueError("weight_decay_rate must be >= 0, got %r" % (weight_decay_rate,))
    self.learning_rate = learning_rate
    self.weight_decay_rate = weight_decay_rate
    self.beta_1 = beta_1
    self.beta_2 = beta_2
    self.epsilon = epsilon
    self.exclude_from_weight_decay = list(exclude_from_weight_decay or [])
    self.learning_rate_multipliers = dict(learning_rate_multipliers or {})
    self._slot_variables = {}  # param name -> {"adam_m": var, "adam_v": var}
    self._step_number = None  # float32 [] t of the update being built, or None (no correction)

  def create_slots(self, var_list):
    """Creates `<var>/adam_m` and `<var>/adam_v` for every variable that has none yet.

    Called by apply_gradients (TF lifts variable initializers out of a tf.cond, so applying
    inside one works); calling it first just builds the slots where you choose. Slot variables
    are float32, zero-initialised, non-trainable, named in the current variable scope as
    google's (so build them outside any variable_scope to match google's checkpoints).
    """
    for param in var_list:
      param_name = variable_name(param)
      if param_name in self._slot_variables:
        continue
      self._slot_variables[param_name] = {
          slot: tf.get_variable(
              name=param_name + "/" + slot,
              shape=param.shape.as_list(),
              dtype=tf.float32,
              trainable=False,
              initializer=tf.zeros_initializer())
          for slot in ("adam_m", "adam_v")}

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    """Builds the update of every (grad, var) pair with a gradient; never touches global_step.

    Args:
      grads_and_vars: iterable of (gradient, variable); pairs whose gradient (or variable) is
        None are skipped, IndexedSlices gradients are densified.
      global_step: ignored, as google's (increment it with `increment_global_step`).
      name: name of the returned op.

    Returns:
      an op grouping the parameter and slot assignments.
    """
    del global_step  # google's optimizers leave the increment to the caller.
    pairs = [(grad, param) for grad, param in grads_and_vars
             if grad is not None and param is not None]
    self.create_slots([param for _, param in pairs])
    assignments = []
    with tf.name_scope(name, self._name):
      self._step_number = self._update_number()
      for grad, param in pairs:
        if isinstance(grad, tf.IndexedSlices):
          grad = tf.convert_to_tensor(grad)
        param_name = variable_name(param)
        slots = self._slot_variables[param_name]
        m, v = slots["adam_m"], slots["adam_v"]
        next_param, next_m, next_v = self._param_update(
            tf.cast(grad, tf.float32), param, m, v, param_name)
        assignments.extend([param.assign(next_param), m.assign(next_m), v.assign(next_v)])
      return tf.group(*assignments, name=name)

  def _update_number(self):
    """float32 [] t >= 1 of the update apply_gradients builds, or None: no bias correction."""
    return None

  def _adam_update(self, grad, param, m, v, param_name):
    """(update, next_m, next_v): w <- w - lr * update, with

      m <- beta_1 m + (1 - beta_1) g;  v <- beta_2 v + (1 - beta_2) g^2
      m_hat, v_hat = m / (1 - beta_1^t), v / (1 - beta_2^t)   (m, v without a step number)
      update = m_hat / (sqrt(v_hat) + epsilon) + weight_decay_rate * w   (decay unless excluded)
    """
    next_m = self.beta_1 * m + (1.0 - self.beta_1) * grad
    next_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad)
    m_hat, v_hat = next_m, next_v
    if self._step_number is not None:
      m_hat = next_m / (1.0 - tf.pow(self.beta_1, self._step_number))
      v_hat = next_v / (1.0 - tf.pow(self.beta_2, self._step_number))
    update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
    return self._with_weight_decay(update, param, param_name), next_m, next_v

  def _learning_rate_of(self, param_name):
    """The learning rate of one variable: learning_rate x its multiplier (1 when unlisted)."""
    factor = self.learning_rate_multipliers.get(param_name, 1.0)
    return self.learning_rate if factor == 1.0 else self.learning_rate * factor

  def _do_use_weight_decay(self, param_name):
    """False when the rate is 0 or any exclude pattern re.search-es the variable name."""
    if not self.weight_decay_rate:
      return False
    return not any(re.search(pattern, param_name) for pattern in self.exclude_from_weight_decay)

  def _with_weight_decay(self, update, param, param_name):
    if self._do_use_weight_decay(param_name):
      return update + self.weight_decay_rate * param
    return update

  def get_slot(self, var, name):
    return self._slot_variables.get(variable_name(var), {}).get(name)

  def get_slot_names(self):
    return ["adam_m", "adam_v"]

  def variables(self):
    """The slot variables created so far (there are no non-slot variables)."""
    return [slots[k] for slots in self._slot_variables.values() for k in ("adam_m", "adam_v")]


class AdamWeightDecayOptimizer(_DecoupledWeightDecayOptimizer):
  """google's "Adam with correct L2 weight decay"; with bias_correction, torch's AdamW.

    m <- beta_1 m + (1 - beta_1) g;  v <- beta_2 v + (1 - beta_2) g^2
    w <- w - lr * (m / (sqrt(v) + epsilon) + weight_decay_rate * w)   (decay unless excluded)

  bias_correction=False: google's optimizer, exactly (no correction, slots adam_m / adam_v only).
  bias_correction=True: m and v above become m / (1 - beta_1^t) and v / (1 - beta_2^t), t the
  number of this update (1, 2, ...) counted by the int64 variable `adam_step` (STEP_COUNTER,
  incremented by each applied update, checkpointed with the slots): torch.optim.AdamW's update,
  w <- w (1 - lr wd) - lr m_hat / (sqrt(v_hat) + epsilon), epsilon outside the square root of the
  corrected v, as torch puts it.

  Args:
    learning_rate: python float or float32 scalar tensor (e.g. schedule.learning_rate_schedule).
    weight_decay_rate: float >= 0 (google's create_optimizer: 0.01).
    beta_1, beta_2: Adam's moment decays, in [0, 1).
    epsilon: added to sqrt(v).
    exclude_from_weight_decay: regexes re.search-ed in variable names; None: decay everything.
    learning_rate_multipliers: {variable name: factor}; that variable's step uses
      learning_rate * factor (None or unlisted: 1).
    name: the optimizer's name (its ops' name scope).
    bias_correction: see above.

  Raises:
    ValueError: a beta outside [0, 1) or a negative weight_decay_rate.
  """

  def __init__(self,
               learning_rate,
               weight_decay_rate=0.0,
               beta_1=0.9,
               beta_2=0.999,
               epsilon=1e-6,
               exclude_from_weight_decay=None,
               name="AdamWeightDecayOptimizer",
               bias_correction=False,
               learning_rate_multipliers=None):
    super(AdamWeightDecayOptimizer, self).__init__(
        learning_rate, weight_decay_rate, beta_1, beta_2, epsilon, exclude_from_weight_decay,
        name, learning_rate_multipliers)
    self.bias_correction = bias_correction
    self._step_counter = None

  def _update_number(self):
    if not self.bias_correction:
      return None
    if self._step_counter is None:
      self._step_counter = tf.get_variable(
          STEP_COUNTER, shape=[], dtype=tf.int64, trainable=False,
          initializer=tf.zeros_initializer())
    return tf.cast(self._step_counter.assign_add(1), tf.float32)  # t of this update

  def _param_update(self, grad, param, m, v, param_name):
    update, next_m, next_v = self._adam_update(grad, param, m, v, param_name)
    return param - self._learning_rate_of(param_name) * update, next_m, next_v

  def variables(self):
    """The slot variables created so far, and adamw's step counter."""
    counter = [self._step_counter] if self._step_counter is not None else []
    return super(AdamWeightDecayOptimizer, self).variables() + counter


def trust_ratio(param_norm, update_norm):
  """LAMB's layer-wise ratio ||w|| / ||update||, 1.0 when either norm is 0 (float32 scalars)."""
  both_positive = tf.logical_and(param_norm > 0.0, update_norm > 0.0)
  safe_update_norm = tf.where(both_positive, update_norm, tf.ones_like(update_norm))
  return tf.where(both_positive, param_norm / safe_update_norm, tf.ones_like(param_norm))


class LAMBOptimizer(_DecoupledWeightDecayOptimizer):
  """LAMB (You et al. 2019, arXiv:1904.00962) with Adam bias correction, as NVIDIA's BERT.

    t = global_step + 1  (this is the t-th update; NVIDIA's TF1 code uses t = global_step -> NaN)
    m, v as Adam;  m_hat = m / (1 - beta_1^t);  v_hat = v / (1 - beta_2^t)
    u = m_hat / (sqrt(v_hat) + epsilon) + weight_decay_rate * w   (decay unless excluded)
    w <- w - lr * r * u,  r = ||w|| / ||u|| (1.0 if either is 0, or if the layer is excluded)

  global_step must be read BEFORE this update's increment: use `increment_global_step`, which
  runs after the update op.

  Args:
    learning_rate, weight_decay_rate, beta_1, beta_2, epsilon, exclude_from_weight_decay, name:
      as AdamWeightDecayOptimizer (the defaults differ: decay 0.01, LayerNorm and bias excluded).
    global_step: the global step tensor t is derived from.
    exclude_from_layer_adaptation: regexes of variables updated without the trust ratio (r = 1);
      None means the same list as exclude_from_weight_decay (google ALBERT's LAMB); pass [] to
      adapt every variable (NVIDIA's).
    learning_rate_multipliers: as AdamWeightDecayOptimizer's (lr * factor * r * u).

  Raises:
    ValueError: global_step is None, a beta outside [0, 1) or a negative weight_decay_rate.
  """

  def __init__(self,
               learning_rate,
               global_step,
               weight_decay_rate=DEFAULT_WEIGHT_DECAY_RATE,
               beta_1=0.9,
               beta_2=0.999,
               epsilon=1e-6,
               exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
               exclude_from_layer_adaptation=None,
               name="LAMBOptimizer",
               learning_rate_multipliers=None):
    super(LAMBOptimizer, self).__init__(
        learning_rate, weight_decay_rate, beta_1, beta_2, epsilon, exclude_from_weight_decay,
        name, learning_rate_multipliers)
    if global_step is None:
      raise ValueError("LAMBOptimizer needs the global step tensor for its bias correction")
    self.global_step = global_step
    if exclude_from_layer_adaptation is None:
      exclude_from_layer_adaptation = self.exclude_from_weight_decay
    self.exclude_from_layer_adaptation = list(exclude_from_layer_adaptation)

  def _do_layer_adaptation(self, param_name):
    return not any(re.search(pattern, param_name)
                   for pattern in self.exclude_from_layer_adaptation)

  def _update_number(self):
    return tf.cast(self.global_step, tf.float32) + 1.0  # read before increment_global_step

  def _param_update(self, grad, param, m, v, param_name):
    update, next_m, next_v = self._adam_update(grad, param, m, v, param_name)
    if self._do_layer_adaptation(param_name):
      update *= trust_ratio(tf.norm(param, ord=2), tf.norm(update, ord=2))
    return param - self._learning_rate_of(param_name) * update, next_m, next_v


def make_optimizer(optimizer_type, learning_rate, global_step, learning_rate_multipliers=None):
  """The optimizer a name of names.py stands for, with google's create_optimizer settings.

  All use weight decay 0.01, beta_1 0.9, beta_2 0.999, epsilon 1e-6, no decay for
  LayerNorm/layer_norm/bias.

  Args:
    optimizer_type: a name of names.ACCEPTED: "adam" (or its earlier spelling
      "adamweightdecay": google's create_optimizer settings), "adamw" (the same with Adam's bias
      correction, torch.optim.AdamW's update) or "lamb".
    learning_rate: python float or float32 scalar tensor.
    global_step: used by LAMB's bias correction only.
    learning_rate_multipliers: {variable name: factor} (module docstring); None: none.

  Returns:
    AdamWeightDecayOptimizer or LAMBOptimizer.

  Raises:
    ValueError: an unknown optimizer_type.
  """
  optimizer_type = names.canonical(optimizer_type)
  settings = dict(learning_rate=learning_rate, weight_decay_rate=DEFAULT_WEIGHT_DECAY_RATE,
                  beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                  exclude_from_weight_decay=list(DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY),
                  learning_rate_multipliers=learning_rate_multipliers)
  if optimizer_type == names.LAMB:
    return LAMBOptimizer(global_step=global_step, **settings)
  return AdamWeightDecayOptimizer(bias_correction=optimizer_type == names.ADAMW, **settings)


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps,
                     optimizer_type=names.DEFAULT):
  """google's create_optimizer for one process: gradients, clip 1.0, update, global_step + 1.

  Args:
    loss: float32 scalar tensor to minimise over tf.trainable_variables().
    init_lr, num_train_steps, num_warmup_steps: see schedule.learning_rate_schedule.
    optimizer_type: a name of names.ACCEPTED.

  Returns:
    the train op (update, then increment of the global step).

  Raises:
    ValueError: an unknown optimizer_type, or as schedule.learning_rate_schedule.
  """
  global_step = tf.train.get_or_create_global_step()
  learning_rate = schedule.learning_rate_schedule(init_lr, global_step, num_train_steps,
                                                  num_warmup_steps)
  optimizer = make_optimizer(optimizer_type, learning_rate, global_step)
  tvars = tf.trainable_variables()
  grads = clip_gradients(tf.gradients(loss, tvars))
  update = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)
  return tf.group(update, increment_global_step(global_step, after=update), name="train_op")
