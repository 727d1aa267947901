"""The learning-rate schedule of BERT pretraining and fine-tuning (google-research/bert's).

google's linear warmup + polynomial decay (`learning_rate_schedule`), and the same behind a head
warm-up at the constant peak rate (`head_warmup_schedule`, run_pretraining's --head_warmup_steps).
"""
import tensorflow.compat.v1 as tf


def learning_rate_schedule(init_lr, global_step, num_train_steps, num_warmup_steps, power=1.0):
  """google's pretraining schedule: linear warmup, then polynomial decay to 0.

  lr(step) = init_lr * step / num_warmup_steps                     if step < num_warmup_steps
           = init_lr * (1 - min(step, num_train_steps) / num_train_steps) ** power   otherwise
  (the decay is computed from step 0, so it does not restart after warmup: google's blend with
  is_warmup in {0, 1}). At step 0 with warmup the rate is exactly 0.

  Args:
    init_lr: python float > 0, the peak learning rate.
    global_step: int scalar tensor or variable, the number of updates already applied.
    num_train_steps: int >= 1, the step at which the rate reaches 0.
    num_warmup_steps: int >= 0; 0 or None means no warmup.
    power: float > 0, exponent of the polynomial decay (1.0: linear).

  Returns:
    float32 scalar tensor.

  Raises:
    ValueError: num_train_steps < 1, num_warmup_steps < 0 or power <= 0.
  """
  if num_train_steps is None or num_train_steps < 1:
    raise ValueError("num_train_steps must be >= 1, got %r" % (num_train_steps,))
  if num_warmup_steps is not None and num_warmup_steps < 0:
    raise ValueError("num_warmup_steps must be >= 0, got %r" % (num_warmup_steps,))
  if power <= 0:
    raise ValueError("power must be > 0, got %r" % (power,))
  with tf.name_scope("learning_rate_schedule"):
    init = tf.constant(value=init_lr, shape=[], dtype=tf.float32)
    learning_rate = tf.train.polynomial_decay(
        init, global_step, num_train_steps, end_learning_rate=0.0, power=power, cycle=False)
    if num_warmup_steps:
      step_int = tf.cast(global_step, tf.int32)
      warmup_int = tf.constant(num_warmup_steps, dtype=tf.int32)
      warmup_learning_rate = init_lr * (
          tf.cast(step_int, tf.float32) / tf.cast(warmup_int, tf.float32))
      is_warmup = tf.cast(step_int < warmup_int, tf.float32)
      learning_rate = (1.0 - is_warmup) * learning_rate + is_warmup * warmup_learning_rate
    return tf.identity(learning_rate, name="learning_rate")


def head_warmup_schedule(init_lr, global_step, num_train_steps, num_warmup_steps,
                         head_warmup_steps, power=1.0):
  """learning_rate_schedule with a head warm-up of H = head_warmup_steps updates in front.

  lr(step) = init_lr                                                        if step < H
           = learning_rate_schedule(init_lr, step - H, num_train_steps - H, num_warmup_steps)
                                                                            otherwise
  The head phase (training/graph/step.py: only the variables an --init_checkpoint did not provide
  are updated) runs at the constant peak rate; at step H the usual schedule starts as if the run
  began there: linear warm-up from 0 over num_warmup_steps (the encoder's optimizer moments start
  then), then polynomial decay to 0 at num_train_steps, which counts the H head steps.

  Args:
    init_lr, global_step, num_train_steps, num_warmup_steps, power: as learning_rate_schedule.
    head_warmup_steps: H, in [0, num_train_steps); 0 or None is learning_rate_schedule itself.

  Returns:
    float32 scalar tensor.

  Raises:
    ValueError: H outside [0, num_train_steps), or as learning_rate_schedule.
  """
  if not head_warmup_steps:
    return learning_rate_schedule(init_lr, global_step, num_train_steps, num_warmup_steps, power)
  if not 0 < head_warmup_steps < num_train_steps:
    raise ValueError("head_warmup_steps must be in [0, num_train_steps=%d), got %r"
                     % (num_train_steps, head_warmup_steps))
  with tf.name_scope("head_warmup_schedule"):
    step = tf.cast(global_step, tf.int64)
    after = learning_rate_schedule(init_lr, tf.maximum(step - head_warmup_steps, 0),
                                   num_train_steps - head_warmup_steps, num_warmup_steps, power)
    return tf.where(step < head_warmup_steps, tf.constant(init_lr, tf.float32), after,
                    name="learning_rate")

