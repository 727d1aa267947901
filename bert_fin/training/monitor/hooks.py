"""The training's SessionRunHooks: ThroughputHook (the step line), SummaryHook (the graph's
TensorBoard summaries) and StreamHook (the data stream's epochs and stops).

ThroughputHook: every N optimizer steps, log and summarise losses, rates and MFU (rank 0 only).

One log line on stdout (printed once: not also through tf.logging), e.g.
  step 201: total_loss = 6.912, mlm_loss = 6.21, nsp_loss = 0.702, learning_rate = 2e-05,
  loss_scale = 65536, sentences/s = 412.3, real_tokens/s = 4.8e+04, mfu = 0.3121,
  sec/step = 0.155, elapsed = 0:05:31, eta = 4:12:09
and the same numbers in TensorBoard: "train/<name>" for the fetched tensors, google's
"examples/sec" (sentences/s), "throughput/real_tokens_per_sec", "throughput/mfu",
"throughput/sec_per_step". eta = (num_train_steps - step) x sec/step of the last window.

When (the Cadence rule, shared with SummaryHook): on the first session.run, then on the first run
that reaches each multiple of N, labelled with the global step read after the run: 1, 10, 20, 30
... from a fresh start with N = 10 (a resumed run: its first step, then the multiples). The tensors
are fetched only on runs predicted to reach the next multiple. SummaryHook writes the graph's
summaries (the Estimator's `loss`, `loss_scale`) by the same rule every --save_summaries_steps, so
each `loss` point falls on a `train/total_loss` point when N divides that cadence.

Rates are measured between two log points on the global step (optimizer updates), so they stay
right with gradient accumulation (several session.run calls per update): sentences/s = updates x
global_batch_size / seconds (packed rows: the real sequences of every session.run / seconds); real tokens/s = the real-token counts of every session.run in the
window / seconds; MFU = updates x flops_per_step / seconds / peak_flops. The first line (first
run, graph warm-up) has no rates; the window starts after it, so warm-up is not counted.
"""
import collections
import os
import time

import numpy as np
import tensorflow.compat.v1 as tf

# The order of the log line; other tensor names follow, sorted.
TENSOR_ORDER = ("loss", "total_loss", "mlm_loss", "nsp_loss", "init_penalty", "mlm_accuracy",
                "grad_norm", "learning_rate", "loss_scale")
# TensorBoard tags of the measured (not fetched) fields; google's TPUEstimator tag for examples/s.
RATE_TAGS = {"sentences/s": "examples/sec", "examples/s": "examples/sec",
             "real_tokens/s": "throughput/real_tokens_per_sec",
             "mfu": "throughput/mfu", "sec/step": "throughput/sec_per_step"}
SENTENCES, EXAMPLES = "sentences/s", "examples/s"  # the rate's name: pretraining, fine-tuning


class Cadence(object):
  """The first run, then the first run reaching each multiple of every_n global steps.

  Before a run, `wanted()` says whether to fetch (the step after the next run is predicted from
  the stale global step of the last one); after it, `due(step)` says whether the step read after
  the run is a log step, and `done(step)` / `skipped(stale_step)` advance the rule."""

  def __init__(self, every_n):
    if not isinstance(every_n, int) or every_n < 1:
      raise ValueError("every_n_steps must be an int >= 1, got %r" % (every_n,))
    self.every_n, self.next_step, self.last = every_n, None, None

  def _target(self):
    return (self.last // self.every_n + 1) * self.every_n

  def wanted(self):
    return self.next_step is None or self.next_step >= self._target()

  def due(self, step):
    return self.last is None or step >= self._target()

  def done(self, step):
    """After a wanted run: step is the global step read after it (logged when due)."""
    if self.due(step):
      self.last = step
    self.next_step = step + 1

  def skipped(self, stale_step):
    """After a run that was not wanted: stale_step is the global step read before its update."""
    self.next_step = stale_step + 2


def _scalar(value):
  return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])


def format_duration(seconds):
  """Seconds -> 'H:MM:SS' (hours unbounded: '52:03:09'); negative counts as 0."""
  seconds = max(0, int(round(seconds)))
  return "%d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


def format_record(record):
  """'step N: name = value, ...' with %.6g numbers (strings as they are); "step" goes first."""
  fields = ["%s = %s" % (name, value if isinstance(value, str) else "%.6g" % value)
            for name, value in record.items() if name != "step"]
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
    num_train_steps: optional int, the run's last global step: adds `eta` to the line.
    log: callable taking the formatted line (default print, flushed).
    summary_dir: optional directory for TensorBoard scalars (shares the FileWriterCache writer,
      so it can be the Estimator's model_dir).
    clock: callable returning seconds (default time.time; tests inject a fake one).
    examples_name: the name of the sequences-a-second rate, SENTENCES (pretraining) or EXAMPLES
      (fine-tuning: its rows are examples or NER windows).
  """

  def __init__(self, every_n_steps, global_batch_size, tensors, real_tokens_tensor=None,
               flops_per_step=None, peak_flops=None, num_train_steps=None, log=None,
               summary_dir=None, clock=time.time, sequences_tensor=None,
               examples_name=SENTENCES):
    self._every_n_steps = every_n_steps
    Cadence(every_n_steps)  # checks it
    if global_batch_size < 1:
      raise ValueError("global_batch_size must be >= 1, got %r" % (global_batch_size,))
    for name, value in (("flops_per_step", flops_per_step), ("peak_flops", peak_flops)):
      if value is not None and not value > 0:
        raise ValueError("%s must be > 0 or None, got %r" % (name, value))
    self._global_batch_size = global_batch_size
    present = {name: t for name, t in (tensors or {}).items() if t is not None}
    order = [n for n in TENSOR_ORDER if n in present] + sorted(set(present) - set(TENSOR_ORDER))
    self._tensors = collections.OrderedDict((name, present[name]) for name in order)
    self._real_tokens_tensor = real_tokens_tensor
    self._sequences_tensor = sequences_tensor
    self._flops_per_step = flops_per_step
    self._peak_flops = peak_flops
    self._num_train_steps = num_train_steps
    self._log = log or _print_flushed
    self._summary_dir = summary_dir
    self._clock = clock
    if examples_name not in (SENTENCES, EXAMPLES):
      raise ValueError("examples_name must be %r or %r, got %r" % (SENTENCES, EXAMPLES,
                                                                examples_name))
    self._examples_name = examples_name

  def begin(self):
    self._global_step = tf.train.get_global_step()
    if self._global_step is None:
      raise RuntimeError("ThroughputHook needs a global step: call "
                         "tf.train.get_or_create_global_step() when building the graph")
    for name, tensor in self._tensors.items():
      if tensor.shape.num_elements() not in (None, 1):
        raise ValueError("ThroughputHook tensor %r must be a scalar, has shape %s"
                         % (name, tensor.shape))
    self._every_run = {"global_step": self._global_step}
    if self._real_tokens_tensor is not None:
      self._every_run["real_tokens"] = self._real_tokens_tensor
    if self._sequences_tensor is not None:
      self._every_run["sequences"] = self._sequences_tensor
    self._writer = None
    if self._summary_dir:
      self._writer = tf.summary.FileWriterCache.get(self._summary_dir)
    self._begin_time = self._clock()
    self._cadence = Cadence(self._every_n_steps)
    self._window_start = None  # (global step, clock) of the last log point
    self._window_tokens = self._window_sequences = 0.0
    self._log_this_run = False

  def before_run(self, run_context):
    self._log_this_run = self._cadence.wanted()
    fetches = dict(self._every_run)
    if self._log_this_run:
      fetches["tensors"] = dict(self._tensors)
    return tf.estimator.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    results = run_values.results
    self._window_tokens += _scalar(results.get("real_tokens", 0))
    self._window_sequences += _scalar(results.get("sequences", 0))
    if not self._log_this_run:
      self._cadence.skipped(int(results["global_step"]))
      return
    step = int(run_context.session.run(self._global_step))
    if not self._cadence.due(step):
      self._cadence.done(step)  # not there yet (accumulation: a micro-batch without an update)
      return
    self._cadence.done(step)
    now = self._clock()
    record = self._make_record(step, now, results["tensors"])
    self._log(format_record(record))
    self._write_summaries(record)
    self._window_start, self._window_tokens = (step, now), 0.0  # logging time: next window
    self._window_sequences = 0.0

  def end(self, session):
    if self._writer is not None:
      self._writer.flush()

  def _make_record(self, step, now, tensor_values):
    """OrderedDict step, tensors, rates, mfu, sec/step, elapsed, eta for the window ending now."""
    record = collections.OrderedDict(step=step)
    for name in self._tensors:
      record[name] = _scalar(tensor_values[name])
    rates = self._rates(step, now)
    record.update(rates)
    record["elapsed"] = format_duration(now - self._begin_time)
    if self._num_train_steps and "sec/step" in rates:
      record["eta"] = format_duration((self._num_train_steps - step) * rates["sec/step"])
    return record

  def _rates(self, step, now):
    """{sentences/s, real_tokens/s, mfu, sec/step} of the window ending now ({} when empty)."""
    if self._window_start is None:
      return {}
    start_step, start_time = self._window_start
    elapsed, updates = now - start_time, step - start_step
    if elapsed <= 0 or updates <= 0:  # a clock that did not move, or no update yet
      return {}
    rates = collections.OrderedDict()
    if self._sequences_tensor is not None:
      rates[self._examples_name] = self._window_sequences / elapsed
    else:
      rates[self._examples_name] = updates * self._global_batch_size / elapsed
    if self._real_tokens_tensor is not None:
      rates["real_tokens/s"] = self._window_tokens / elapsed
    if self._flops_per_step and self._peak_flops:
      rates["mfu"] = updates * self._flops_per_step / elapsed / self._peak_flops
    rates["sec/step"] = elapsed / updates
    return rates

  def _write_summaries(self, record):
    if self._writer is None:
      return
    values = []
    for name, value in record.items():
      if name == "step" or isinstance(value, str):
        continue
      tag = RATE_TAGS.get(name, "train/" + name)
      values.append(tf.Summary.Value(tag=tag, simple_value=value))
    self._writer.add_summary(tf.Summary(value=values), global_step=record["step"])
    self._writer.flush()


def _print_flushed(line):
  print(line, flush=True)


class SummaryHook(tf.estimator.SessionRunHook):
  """Writes the graph's merged summaries (the Estimator's `loss`, step.py's `loss_scale`) to
  output_dir by the Cadence rule every every_n_steps (chief only; replaces the Estimator's own
  SummarySaverHook, whose rule gives 1, N+1, 2N+1, ...)."""

  def __init__(self, every_n_steps, output_dir):
    self._every_n_steps, self._output_dir = every_n_steps, output_dir

  def begin(self):
    self._global_step = tf.train.get_global_step()
    self._summary = tf.summary.merge_all()
    self._writer = tf.summary.FileWriterCache.get(self._output_dir)
    self._cadence = Cadence(self._every_n_steps)

  def before_run(self, run_context):
    self._wanted = self._summary is not None and self._cadence.wanted()
    fetches = {"global_step": self._global_step}
    if self._wanted:
      fetches["summary"] = self._summary
    return tf.estimator.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    if not self._wanted:
      self._cadence.skipped(int(run_values.results["global_step"]))
      return
    step = int(run_context.session.run(self._global_step))
    if self._cadence.due(step):
      self._writer.add_summary(run_values.results["summary"], step)
    self._cadence.done(step)

  def end(self, session):
    self._writer.flush()


class StreamHook(tf.estimator.SessionRunHook):
  """Every rank: keeps the data stream's epochs recorded one update ahead of the position
  (input/stream.py DataStream.record_ahead, after every update) and stops training where the
  reader's view ends: at the first new epoch whose files differ from those the view assumed, or at
  the end of a bounded (DALI) view; stops fall on update boundaries. On the chief (model_dir given)
  a stop also saves a checkpoint when the last one holds an older position (updates skipped on
  overflow leave global_step, the Estimator's save trigger, unchanged).

  After the session: `position` / `step` where it ended (None before the first run) and
  `stopped` (True when the view ended before --num_train_steps: train again with a new view).
  """

  def __init__(self, data_stream, view, num_accumulation_steps, model_dir=None):
    self._stream, self._view, self._window = data_stream, view, num_accumulation_steps
    self._end = view.end_position(num_accumulation_steps)
    self._model_dir = model_dir
    self.position = self.step = None
    self.stopped = False

  def begin(self):
    from bert_fin.input import stream as stream_lib  # pylint: disable=import-outside-toplevel
    self._position_after = tf.get_collection(stream_lib.POSITION_AFTER)[-1]
    self._global_step = tf.train.get_global_step()

  def before_run(self, run_context):
    return tf.estimator.SessionRunArgs(self._position_after)

  def after_run(self, run_context, run_values):
    self.position = int(run_values.results)
    if self.position % self._window:
      return
    self._stream.record_ahead(self.position)
    stop = self._end
    change = self._stream.first_change(self._view)
    if change is not None:
      at_change = self._stream.order.stop_position(self._window, num_epochs=change)
      stop = at_change if stop is None else min(stop, at_change)
    if stop is not None and self.position >= stop:
      self.stopped = True
      run_context.request_stop()

  def end(self, session):
    from bert_fin.input import stream as stream_lib  # pylint: disable=import-outside-toplevel
    self.step = int(session.run(self._global_step))
    if self.position is None or not self.stopped or not self._model_dir:
      return
    latest = tf.train.latest_checkpoint(self._model_dir)
    savers = tf.get_collection(tf.GraphKeys.SAVERS)
    if savers and not (latest and stream_lib.checkpoint_position(latest) == self.position):
      tf.logging.info("Saving the data position %d at step %d", self.position, self.step)
      savers[0].save(session, os.path.join(self._model_dir, "model.ckpt"), global_step=self.step)
