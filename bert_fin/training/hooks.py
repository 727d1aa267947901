"""ThroughputHook: every N optimizer steps, log and summarise losses, rates and MFU (rank 0 only).

One log line, e.g.
  step 200: loss = 6.912, mlm_loss = 6.21, nsp_loss = 0.702, learning_rate = 2e-05,
  loss_scale = 65536, sentences/s = 412.3, real_tokens/s = 4.8e+04, mfu = 0.3121
and the same scalars in TensorBoard: "train/<name>" for the fetched tensors, "throughput/
sentences_per_sec", "throughput/real_tokens_per_sec", "throughput/mfu".

Rates are measured between two log points on the global step (optimizer updates), so they stay
right with gradient accumulation (several session.run calls per update): sentences/s = updates x
global_batch_size / seconds (packed rows: the real sequences of every session.run / seconds); real tokens/s = the real-token counts of every session.run in the
window / seconds; MFU = updates x flops_per_step / seconds / peak_flops. The window starts after
the first session.run, so graph warm-up is not counted.
"""
import collections
import time

import numpy as np
import tensorflow.compat.v1 as tf

# The order of the log line; other tensor names follow, sorted.
TENSOR_ORDER = ("loss", "total_loss", "mlm_loss", "nsp_loss", "learning_rate", "loss_scale")


def _scalar(value):
  return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])


def format_record(record):
  """'step N: name = value, ...' with %.6g numbers; the record's "step" goes first."""
  fields = ["%s = %.6g" % (name, value) for name, value in record.items() if name != "step"]
  return "step %d: %s" % (record["step"], ", ".join(fields))


class ThroughputHook(tf.estimator.SessionRunHook):
  """Logs step, tensors (losses, lr, loss scale), sentences/s, real tokens/s and MFU.

  Add it on rank 0 only (the chief's training_hooks); it fetches its tensors on every
  session.run, so none of them may be a collective (Horovod allreduce) that only rank 0 runs.

  Args:
    every_n_steps: int >= 1, log every N global steps (optimizer updates).
    global_batch_size: sequences per optimizer update over all workers and accumulation steps.
    tensors: {name: scalar tensor or None}, e.g. {'loss', 'mlm_loss', 'nsp_loss',
      'learning_rate', 'loss_scale'}; None entries are skipped. Logged as their value at the
      log step (the last micro-batch), not averaged.
    real_tokens_tensor: optional int/float scalar, the real (non-padding) tokens consumed by ONE
      session.run of the train op summed over ALL workers: e.g. tf.reduce_sum(input_len) *
      num_workers (this worker's count times the workers, no collective needed).
    sequences_tensor: optional scalar, the real sequences of ONE session.run over ALL workers
      (packed rows hold several; like real_tokens_tensor); when given, sentences/s counts these
      instead of updates x global_batch_size.
    flops_per_step: optional training FLOPs of one optimizer update over all workers
      (flops.model_flops_per_sequence(...) x global_batch_size).
    peak_flops: optional peak FLOP/s of all devices together (flops.peak_flops x GPUs);
      MFU is logged when both flops_per_step and peak_flops are set.
    log: callable taking the formatted line (default print).
    summary_dir: optional directory for TensorBoard scalars (shares the FileWriterCache writer,
      so it can be the Estimator's model_dir).
    clock: callable returning seconds (default time.time; tests inject a fake one).
  """

  def __init__(self, every_n_steps, global_batch_size, tensors, real_tokens_tensor=None,
               flops_per_step=None, peak_flops=None, log=print, summary_dir=None,
               clock=time.time, sequences_tensor=None):
    if not isinstance(every_n_steps, int) or every_n_steps < 1:
      raise ValueError("every_n_steps must be an int >= 1, got %r" % (every_n_steps,))
    if global_batch_size < 1:
      raise ValueError("global_batch_size must be >= 1, got %r" % (global_batch_size,))
    for name, value in (("flops_per_step", flops_per_step), ("peak_flops", peak_flops)):
      if value is not None and not value > 0:
        raise ValueError("%s must be > 0 or None, got %r" % (name, value))
    self._every_n_steps = every_n_steps
    self._global_batch_size = global_batch_size
    present = {name: t for name, t in (tensors or {}).items() if t is not None}
    order = [n for n in TENSOR_ORDER if n in present] + sorted(set(present) - set(TENSOR_ORDER))
    self._tensors = collections.OrderedDict((name, present[name]) for name in order)
    self._real_tokens_tensor = real_tokens_tensor
    self._sequences_tensor = sequences_tensor
    self._flops_per_step = flops_per_step
    self._peak_flops = peak_flops
    self._log = log
    self._summary_dir = summary_dir
    self._clock = clock

  def begin(self):
    self._global_step = tf.train.get_global_step()
    if self._global_step is None:
      raise RuntimeError("ThroughputHook needs a global step: call "
                         "tf.train.get_or_create_global_step() when building the graph")
    for name, tensor in self._tensors.items():
      if tensor.shape.num_elements() not in (None, 1):
        raise ValueError("ThroughputHook tensor %r must be a scalar, has shape %s"
                         % (name, tensor.shape))
    self._fetches = {"global_step": self._global_step, "tensors": dict(self._tensors)}
    if self._real_tokens_tensor is not None:
      self._fetches["real_tokens"] = self._real_tokens_tensor
    if self._sequences_tensor is not None:
      self._fetches["sequences"] = self._sequences_tensor
    self._writer = None
    if self._summary_dir:
      self._writer = tf.summary.FileWriterCache.get(self._summary_dir)
    self._window_start = None  # (global step, clock) of the last log point

  def before_run(self, run_context):
    return tf.estimator.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    results = run_values.results
    if self._window_start is None:
      self._start_window(run_context.session.run(self._global_step), self._clock())
      return
    self._window_tokens += _scalar(results.get("real_tokens", 0))
    self._window_sequences += _scalar(results.get("sequences", 0))
    # The fetched step may be read before or after this run's increment: +1 is the optimistic
    # guess, confirmed by an exact read only when a log may be due.
    if results["global_step"] + 1 < self._next_log_step:
      return
    step = int(run_context.session.run(self._global_step))
    if step < self._next_log_step:
      return
    now = self._clock()
    record = self._make_record(step, now, results["tensors"])
    self._log(format_record(record))
    self._write_summaries(record)
    self._start_window(step, now)  # the logging time belongs to the next window

  def end(self, session):
    if self._writer is not None:
      self._writer.flush()

  def _start_window(self, step, now):
    self._window_start = (int(step), now)
    self._window_tokens = 0.0
    self._window_sequences = 0.0
    # Log at multiples of N (steps 10, 20, ... for N = 10); the first window may be shorter.
    self._next_log_step = (int(step) // self._every_n_steps + 1) * self._every_n_steps

  def _make_record(self, step, now, tensor_values):
    """OrderedDict step, tensors, sentences/s, real_tokens/s, mfu for the window ending now."""
    start_step, start_time = self._window_start
    record = collections.OrderedDict(step=step)
    for name in self._tensors:
      record[name] = _scalar(tensor_values[name])
    elapsed = now - start_time
    if elapsed <= 0:  # a clock that did not move: no rates rather than a division by zero
      return record
    updates = step - start_step
    if self._sequences_tensor is not None:
      record["sentences/s"] = self._window_sequences / elapsed
    else:
      record["sentences/s"] = updates * self._global_batch_size / elapsed
    if self._real_tokens_tensor is not None:
      record["real_tokens/s"] = self._window_tokens / elapsed
    if self._flops_per_step and self._peak_flops:
      record["mfu"] = updates * self._flops_per_step / elapsed / self._peak_flops
    return record

  def _write_summaries(self, record):
    if self._writer is None:
      return
    rate_tags = {"sentences/s": "throughput/sentences_per_sec",
                 "real_tokens/s": "throughput/real_tokens_per_sec", "mfu": "throughput/mfu"}
    values = []
    for name, value in record.items():
      if name == "step":
        continue
      tag = rate_tags.get(name, "train/" + name)
      values.append(tf.Summary.Value(tag=tag, simple_value=value))
    self._writer.add_summary(tf.Summary(value=values), global_step=record["step"])
    self._writer.flush()
