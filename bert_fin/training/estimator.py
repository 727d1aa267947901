"""run_pretraining's orchestration: a TrainingRun (training/run.py) -> Estimator train / eval.

Every rank runs `train_and_evaluate(run, dist)`. Rank 0 (the chief) owns output_dir: checkpoints,
TensorBoard summaries, graph.pbtxt, data_order.json, optimizer.json and eval_results.txt. The other
ranks give the Estimator a private temporary model_dir with checkpoints and summaries switched off
(removed at the end), so nothing of theirs lands in output_dir; they start from rank 0's weights
through dist.broadcast_hooks().

Training is one Estimator.train call from the checkpoint's step and data position to
--num_train_steps, reading the data stream's view (input/stream.py); hooks.StreamHook keeps the
stream's epochs recorded ahead and ends the call early only where the view ends (a corpus whose
files changed at a new epoch, or the end of a DALI view): then the next call starts from there
with a new view (a new graph). Bad data met while training (a corrupt record, an id beyond the
vocab, a vanished file) is raised as preflight.InputError naming the file.
"""
import shutil
import tempfile

import tensorflow.compat.v1 as tf

from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.optimization import recorded
from bert_fin.records import masking_source
from bert_fin.input import stream as stream_lib
from bert_fin.input import tfdata
from bert_fin.training import cpu_precision
from bert_fin.training.monitor import eval_results
from bert_fin.training.monitor import flops
from bert_fin.training.graph import head_warmup
from bert_fin.training.monitor import hooks
from bert_fin.training.graph import model_fn
from bert_fin.training.graph import train_setup as train_setup_lib
from bert_fin.training.init_regularizer import penalty
from bert_fin.training import preflight
from bert_fin.training import run as run_lib
from bert_fin.training import run_lock


def session_config(settings, dist):
  """dist's ConfigProto (device, XLA ON_1 without lazy compilation, AMP) + thread counts.

  settings: a training/settings.py EstimatorSettings. XLA also needs TF_XLA_FLAGS set before
  TensorFlow starts: see training/xla_env.py.
  """
  config = dist.session_config(use_xla=settings.use_xla, use_amp=settings.amp,
                               num_gpus=settings.num_gpus)
  if settings.cpu_bf16:
    cpu_precision.enable_bf16_rewrite(config)
  if settings.intra_op_parallelism_threads:
    config.intra_op_parallelism_threads = settings.intra_op_parallelism_threads
  if settings.inter_op_parallelism_threads:
    config.inter_op_parallelism_threads = settings.inter_op_parallelism_threads
  return config


def run_config(settings, dist, model_dir):
  """tf.estimator.RunConfig of an EstimatorSettings: checkpoints on the chief only, graph
  summaries by hooks.SummaryHook (model_fn adds it; RunConfig's own summary saver is off), the
  run's one seed."""
  chief = dist.is_chief
  return tf.estimator.RunConfig(
      model_dir=model_dir,
      tf_random_seed=settings.seed,
      session_config=session_config(settings, dist),
      save_checkpoints_steps=settings.save_checkpoints_steps if chief else None,
      save_checkpoints_secs=None,
      save_summary_steps=None,
      log_step_count_steps=settings.log_every_n_steps if chief else None)


def total_peak_flops(run):
  """Peak FLOP/s of all workers together for MFU, or None (logged) when it cannot be known.

  GPUs: one device a rank, so peak x ranks (fp16 tensor-core peak with --amp, else TF32: TF 2.15
  runs fp32 matmuls on TF32 tensor cores by default). CPU: the ranks of one host share its cores,
  so peak x hosts. --peak_tflops overrides the per-device figure.
  """
  on_gpu = run.worker.num_gpus > 0
  override = run.settings.output.peak_tflops * 1e12 if run.settings.output.peak_tflops else None
  try:
    peak, source = flops.peak_flops_with_source(
        "gpu" if on_gpu else "cpu", override,
        precision=("fp16" if run.settings.execution.amp else "tf32") if on_gpu else "fp32")
  except (ValueError, OSError) as e:
    tf.logging.warning("MFU not logged: %s", e)
    return None
  workers, per_host = run.worker.num_workers, max(1, run.worker.local_size)
  devices = workers if on_gpu else max(1, workers // per_host)
  tf.logging.info("  Peak for MFU = %.4g TFLOP/s a device x %d device(s), from %s%s", peak / 1e12,
                  devices, source, " (fp32 peak; --cpu_bf16 computes in bfloat16)"
                  if run.settings.execution.cpu_bf16 else "")
  return peak * devices


def train_setup(run):
  """train_setup.TrainSetup of the run (step config, lr, batch and MFU figures)."""
  per_sequence = flops.model_flops_per_sequence(
      run.decided.bert_config, run.decided.layout.max_seq_length,
      run.decided.layout.max_predictions_per_seq, run.settings.model.objective)
  return train_setup_lib.TrainSetup(
      learning_rate=run.learning_rate, num_train_steps=run.settings.optimizer.num_train_steps,
      num_warmup_steps=run.settings.optimizer.num_warmup_steps,
      optimizer_type=run.settings.optimizer.optimizer_type,
      step_config=run.step_config, log_every_n_steps=run.settings.output.log_every_n_steps,
      save_summaries_steps=run.save_summaries_steps, global_batch_size=run.global_batch_size,
      flops_per_sequence=per_sequence, peak_flops=total_peak_flops(run),
      summary_dir=run.settings.output.output_dir if run.worker.is_chief else None,
      init_regularizer=init_regularizer_spec(run))


def init_regularizer_spec(run):
  """penalty.Spec of the run's --init_regularizer (None without it)."""
  if not run.decided.init_regularizer_variables:
    return None
  model = run.settings.model
  return penalty.Spec(model.init_regularizer, model.init_regularizer_weight,
                      run.decided.init_checkpoint, run.decided.fisher_checkpoint,
                      run.decided.init_regularizer_variables)


def log_startup_notes(run):
  """Says once what the flags really do here: TPU flags ignored, --amp / --cpu_bf16 precision."""
  if run.step_config.head_warmup_steps:
    tf.logging.info(head_warmup.describe(run.step_config.head_warmup_steps,
                                         run.step_config.head_warmup_variables))
  spec = init_regularizer_spec(run)
  if spec:
    tf.logging.info(penalty.describe(spec))
  if run.ignored_tpu_flags:
    tf.logging.warning("TPU flags accepted and ignored (no TPU support): %s",
                       ", ".join("--" + name for name in run.ignored_tpu_flags))
  for note in cpu_precision.precision_notes(run.settings.execution.amp, run.settings.execution.cpu_bf16,
                                            run.worker.num_gpus,
                                            cpu_precision.cpu_flags()):
    tf.logging.warning(note)


def checkpoint_step(model_dir):
  """global_step of the latest checkpoint in model_dir, 0 when there is none."""
  latest = checkpoint_lib.resolve_checkpoint(model_dir, run_dir=True)
  if not latest:
    return 0
  return int(tf.train.load_variable(latest, tf.GraphKeys.GLOBAL_STEP))


class Reader(object):
  """The run's reader (tf.data or DALI) as Estimator input_fns; DALI's indexes found once (each
  rank; ranks other than 0 never create the cache)."""

  def __init__(self, run):
    self._run, self._index_of = run, None
    if run.settings.data.input_pipeline == "dali":
      from bert_fin.input import dali  # pylint: disable=import-outside-toplevel
      self._dali = dali
      files = sorted(set(run.decided.train_files) | set(run.decided.eval_files))
      self._index_of = dali.prepare_indexes(files,
                                            run.decided.index_dir, may_create=run.worker.is_chief)

  def view_micro_batches(self, step):
    """Micro-batches a view must cover from `step` (None: tf.data reads endless views)."""
    if self._index_of is None:
      return None
    optimizer = self._run.settings.optimizer
    remaining = (optimizer.num_train_steps - step) * optimizer.num_accumulation_steps
    return min(remaining, max(optimizer.num_accumulation_steps,
                              stream_lib.DALI_VIEW_RECORDS // self._run.settings.data.train_batch_size))

  def training_input_fn(self, view):
    run = self._run
    layout, batch_size = run.decided.layout, run.settings.data.train_batch_size
    masking = run.decided.masking_config if layout.dynamic_masking else None
    if self._index_of is None:
      return lambda params: tfdata.training_dataset(view, layout, batch_size, masking)
    index_of = dict(self._index_of)
    for path in view.order.files() - set(index_of):
      index_of.update(self._dali.prepare_indexes([path], run.decided.index_dir,
                                                 run.worker.is_chief))
    return lambda params: self._dali.training_dataset(view, layout, batch_size, index_of,
                                                      masking_config=masking)

  def eval_input_fn(self, files):
    """The input_fn of one eval set's files."""
    run = self._run
    masking = run.decided.masking_config if run.decided.eval_layout.dynamic_masking else None
    if self._index_of is None:
      return lambda params: tfdata.eval_dataset(files, run.decided.eval_layout,
                                                run.settings.data.eval_batch_size, masking)
    return lambda params: self._dali.eval_dataset(files, run.decided.eval_layout,
                                                  run.settings.data.eval_batch_size, self._index_of,
                                                  masking_config=masking)

  def eval_sets(self):
    """[(name, input_fn)] of the run's eval sets (name "": the unprefixed one)."""
    return [(s.name, self.eval_input_fn(s.files)) for s in self._run.decided.eval_sets]


def _check_new_files(run):
  """The checks of files joining a growing corpus (the run's preflight of --input_file)."""
  def check(files):
    preflight.check_not_empty(files, 1, False)
    run_layout = run.decided.layout
    layout = preflight.check_records(files, run_layout.max_seq_length,
                                     run_layout.max_predictions_per_seq,
                                     run_layout.legacy_input_mask,
                                     run.decided.bert_config.vocab_size)
    if layout.dynamic_masking and run.decided.layout.dynamic_masking:
      config, source = masking_source.resolve(files, run.settings.data.dynamic_masking_config)
      if config != run.decided.masking_config:
        raise ValueError("new files %s: their masking config (%s) is not the run's"
                         % (", ".join(files[:3]), source))
      layout = run_lib.dynamic_layout(layout, config)
    if layout != run.decided.layout:
      raise ValueError("new files %s hold records of another layout (%s, the run reads %s)"
                       % (", ".join(files[:3]), layout, run.decided.layout))
  return check


def _log_training_start(run):
  tf.logging.info("***** Running training *****")
  tf.logging.info("  Num steps = %d (from step %d)", run.settings.optimizer.num_train_steps,
                  run.decided.start_step)
  tf.logging.info("  Batch size = %d per worker, %d workers, %d accumulation steps: %d per update",
                  run.settings.data.train_batch_size, run.worker.num_workers,
                  run.settings.optimizer.num_accumulation_steps, run.global_batch_size)
  order = run.order()
  if order.sources[0].name is not None:  # --input_source: a line a source
    tf.logging.info("  Mixture of %d sources: %s", len(order.sources),
                    "; ".join(_source_line(run, order, s) for s in range(len(order.sources))))
  if run.decided.layout.max_sequences_per_pack:
    per_pack = preflight.average_sequences_per_pack(run.decided.train_files[0])
    line = ("packed records: %.3f sequences a pack on average (first records of %s); "
            "--train_batch_size counts packs: %d packs = ~%.0f sequences per update"
            % (per_pack, run.decided.train_files[0], run.global_batch_size,
               per_pack * run.global_batch_size))
    tf.logging.info(line)
    if run.worker.is_chief:
      print(line, flush=True)


def _source_line(run, order, index):
  """'NAME 80.0% (N records, E epochs of it by step S)': source `index` of the mixture, E counted
  from the order's start to --num_train_steps."""
  optimizer = run.settings.optimizer
  end = order.first_example(optimizer.num_train_steps * optimizer.num_accumulation_steps)
  read = order.schedule.counts(max(0, end))[index]  # records a worker reads of it
  per_epoch = max(1, order.orders[index].stop_position(1, 1))  # ... in its first epoch
  return "%s %.1f%% (%d records, %.2f epochs of it by step %d)" % (
      order.sources[index].name, 100.0 * order.schedule.fractions[index],
      sum(order.orders[index].epochs[0].records), read / float(per_epoch),
      optimizer.num_train_steps)


def _train(estimator, run, dist, reader, extra_hooks):
  """Trains from the run's checkpoint to --num_train_steps: one Estimator.train call unless the
  data stream's view ends first (see the module docstring)."""
  step, position = run.decided.start_step, run.decided.start_position
  if step >= run.settings.optimizer.num_train_steps:
    tf.logging.info("Skipping training: %s is at step %d >= num_train_steps %d",
                    run.settings.output.output_dir, step, run.settings.optimizer.num_train_steps)
    return
  data_stream = stream_lib.DataStream(run.order(), dist, run.settings.output.output_dir,
                                      _check_new_files(run),
                                      run.settings.optimizer.num_accumulation_steps)
  if run.worker.is_chief:
    if run.decided.order_restarted:
      stream_lib.archive_order(run.settings.output.output_dir, step)
    stream_lib.save_order(run.settings.output.output_dir, data_stream.order)
    recorded.write_optimizer(run.settings.output.output_dir,  # run.py checked it on resume
                             run.settings.optimizer.optimizer_type)
  _log_training_start(run)
  call = 0
  while step < run.settings.optimizer.num_train_steps:
    call += 1
    view = data_stream.view(position, reader.view_micro_batches(step))
    end = view.end_position(run.settings.optimizer.num_accumulation_steps)
    tf.logging.info("training call %d: from step %d, data position %d (rank %d at %s)%s", call,
                    step, position, dist.rank, view.where(),
                    "" if end is None else "; the view ends at position %d" % end)
    stream_hook = hooks.StreamHook(data_stream, view, run.settings.optimizer.num_accumulation_steps,
                                   run.settings.output.output_dir if run.worker.is_chief else None)
    estimator.train(input_fn=reader.training_input_fn(view),
                    hooks=dist.broadcast_hooks() + [stream_hook] + list(extra_hooks or []),
                    max_steps=run.settings.optimizer.num_train_steps)
    if not stream_hook.stopped or stream_hook.position is None:
      return
    step, position = stream_hook.step, stream_hook.position


def _evaluate(estimator, run, reader):
  tf.logging.info("***** Running evaluation *****")
  tf.logging.info("  Batch size = %d", run.settings.data.eval_batch_size)
  result = eval_results.evaluate_sets(estimator, reader.eval_sets(),
                                      run.settings.mode.max_eval_steps)
  eval_results.write_eval_results(run.settings.output.output_dir, result)
  return result


def _estimator(run, dist, model_dir):
  return tf.estimator.Estimator(
      model_fn=model_fn.model_fn_builder(
          run.decided.bert_config, run.decided.layout or run.decided.eval_layout,
          run.decided.init_checkpoint, dist,
          train_setup(run) if run.settings.mode.do_train else None, objective=run.settings.model.objective,
          recompute=run.settings.model.recompute, seed=run.decided.seed if run.settings.mode.do_train else None),
      config=run_config(run.estimator_settings(), dist, model_dir))


def train_and_evaluate(run, dist, extra_hooks=None):
  """Trains and/or evaluates as the TrainingRun says. Returns the eval result dict (chief) or None.

  run: training/run.py resolve(...); dist: distributed.init(...); extra_hooks: more
  SessionRunHooks for training on this rank (tests, profiling).
  """
  tf.logging.set_verbosity(tf.logging.INFO)
  if run.settings.execution.deterministic:
    import tensorflow as tf2  # pylint: disable=g-import-not-at-top
    tf2.config.experimental.enable_op_determinism()  # not in tf.compat.v1
  lock = _lock_output_dir(run, dist)
  try:
    return _train_and_evaluate(run, dist, extra_hooks)
  finally:
    if lock:
      lock.release()


def _lock_output_dir(run, dist):
  """The chief's RunLock when training (after removing what a killed trainer left); a live
  trainer in output_dir is refused on every rank alike (RunLockError)."""
  locks = []

  def lock_output_dir():
    tf.io.gfile.makedirs(run.settings.output.output_dir)
    if run.settings.mode.do_train and "://" not in run.settings.output.output_dir:
      locks.append(run_lock.RunLock(run.settings.output.output_dir).acquire())
      run_lock.remove_stale_tf_temp(run.settings.output.output_dir)
    return ""

  dist.chief_decides(lock_output_dir, run_lock.RunLockError, catch=(run_lock.RunLockError,))
  return locks[0] if locks else None


def _train_and_evaluate(run, dist, extra_hooks):
  if run.worker.is_chief:
    log_startup_notes(run)
  reader = Reader(run)
  if run.settings.mode.eval_continuous:
    from bert_fin.training.monitor import continuous_eval  # pylint: disable=g-import-not-at-top
    return continuous_eval.run(run, _estimator(run, dist, run.settings.output.output_dir),
                               reader.eval_sets())
  model_dir = run.settings.output.output_dir if run.worker.is_chief else tempfile.mkdtemp(
      prefix="bert_fin_rank%d_" % run.worker.worker_index)
  try:
    estimator = _estimator(run, dist, model_dir)
    try:
      if run.settings.mode.do_train:
        _train(estimator, run, dist, reader, extra_hooks)
      if run.settings.mode.do_eval and run.worker.is_chief:
        return _evaluate(estimator, run, reader)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError,
            tf.errors.NotFoundError) as error:
      decided = run.decided
      files = list(decided.train_files) + [f for f in decided.eval_files
                                           if f not in decided.train_files]
      user_error = preflight.run_error(
          error, files, checkpoint_step(run.settings.output.output_dir) if run.worker.is_chief else 0)
      if user_error is None:
        raise
      raise user_error from error
    return None
  finally:
    if not run.worker.is_chief:
      shutil.rmtree(model_dir, ignore_errors=True)
