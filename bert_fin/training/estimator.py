"""run_pretraining's orchestration: flags -> checks -> RunConfig -> Estimator train / eval.

Every rank runs `run(values)`. Rank 0 (the chief) owns output_dir: checkpoints, TensorBoard
summaries, graph.pbtxt and eval_results.txt. The other ranks give the Estimator a private temporary
model_dir with checkpoints and summaries switched off (removed at the end), so nothing of theirs
lands in output_dir; they start from rank 0's weights through dist.broadcast_hooks().

Everything that can be refused is checked in `preflight` before the first graph is built, on every
rank alike, so a bad file count stops all ranks with the same message instead of stalling them;
the data checks (records vs flags, empty files, token ids, DALI checksums) are in preflight.py.
Bad data met while training (a corrupt record, an id beyond the vocab) is raised as
preflight.InputError naming the file.
"""
import collections
import shutil
import tempfile

import tensorflow.compat.v1 as tf

from bert_fin import modeling
from bert_fin.input import tfdata
from bert_fin.training import cpu_precision
from bert_fin.training import data_position
from bert_fin.training import distributed
from bert_fin.training import epoch_plan
from bert_fin.training import eval_results
from bert_fin.training import flags as train_flags
from bert_fin.training import flops
from bert_fin.training import model_fn
from bert_fin.training import preflight as preflight_lib
from bert_fin.training import step


Plan = collections.namedtuple("Plan", [
    "bert_config", "train_files", "eval_files", "num_workers", "worker_index", "is_chief",
    "learning_rate", "global_batch_size"])


def _input_module(input_pipeline):
  if input_pipeline == "dali":
    from bert_fin.input import dali  # pylint: disable=g-import-not-at-top
    return dali
  return tfdata


def preflight(values, dist):
  """Validates the run before any graph exists; returns a Plan. Raises ValueError with a message.

  values: the flag values (attributes named as in training/flags.py); dist: distributed.init().
  """
  train_flags.validate_flags(values)
  bert_config = modeling.BertConfig.from_json_file(values.bert_config_file)
  if values.max_seq_length > bert_config.max_position_embeddings:
    raise ValueError(
        "Cannot use sequence length %d because the BERT model was only trained up to sequence "
        "length %d" % (values.max_seq_length, bert_config.max_position_embeddings))
  train_files = eval_files = None
  if values.do_train:
    train_files = tfdata.expand_input_files(values.input_file)
    if values.input_pipeline == "tfdata":
      # tf.data shards whole files; DALI shards records (input/dali.py checks its own split).
      tfdata.check_files_divisible(train_files, dist.size)
    _check_data(values, bert_config, train_files, dist.size, "--input_file")
  if values.do_eval:
    eval_files = tfdata.expand_input_files(values.eval_input_file or values.input_file)
    if eval_files != train_files:
      _check_data(values, bert_config, eval_files, 1, "--eval_input_file")
  if dist.is_chief:
    preflight_lib.check_output_dir(values.output_dir)
  cpu_precision.check_cpu_bf16(values.cpu_bf16, distributed.gpu_count(), cpu_precision.cpu_flags())
  learning_rate = values.learning_rate * (dist.size if values.scale_lr_by_workers else 1)
  global_batch_size = values.train_batch_size * values.num_accumulation_steps * dist.size
  return Plan(bert_config, train_files, eval_files, dist.size, dist.rank, dist.is_chief,
              learning_rate, global_batch_size)


def _check_data(values, bert_config, files, num_workers, flag):
  """preflight.py's checks of one file set (records, emptiness, flags, ids; DALI's indexes and
  checksums when DALI reads them)."""
  preflight_lib.check_not_empty(files, num_workers, values.input_pipeline == "tfdata", flag)
  preflight_lib.check_records(files, values.max_seq_length, values.max_predictions_per_seq,
                              values.legacy_input_mask, bert_config.vocab_size)
  if values.input_pipeline == "dali":  # indexes, CRC32C checksums, sharding: before any write
    _input_module("dali").input_fn_builder(
        files, values.max_seq_length, values.max_predictions_per_seq, False,
        values.train_batch_size, legacy_input_mask=values.legacy_input_mask)


def session_config(values, dist):
  """dist's ConfigProto (device, XLA ON_1 without lazy compilation, AMP) + thread flags.

  XLA also needs TF_XLA_FLAGS set before TensorFlow starts: see training/xla_env.py.
  """
  config = dist.session_config(use_xla=values.use_xla, use_amp=values.amp)
  if getattr(values, "cpu_bf16", False):  # run_classifier shares this and has no --cpu_bf16
    cpu_precision.enable_bf16_rewrite(config)
  if values.intra_op_parallelism_threads:
    config.intra_op_parallelism_threads = values.intra_op_parallelism_threads
  if values.inter_op_parallelism_threads:
    config.inter_op_parallelism_threads = values.inter_op_parallelism_threads
  return config


def run_config(values, dist, model_dir):
  """tf.estimator.RunConfig: checkpoints and summaries on the chief only."""
  chief = dist.is_chief
  return tf.estimator.RunConfig(
      model_dir=model_dir,
      tf_random_seed=values.seed,
      session_config=session_config(values, dist),
      save_checkpoints_steps=values.save_checkpoints_steps if chief else None,
      save_checkpoints_secs=None,
      save_summary_steps=summary_steps(values) if chief else None,
      log_step_count_steps=values.log_every_n_steps if chief else None)


def summary_steps(values):
  """Updates between the Estimator's summary writes: --save_summaries_steps, else the checkpoint
  cadence (not --log_every_n_steps: each summary step costs the chief a second set of fetches)."""
  return values.save_summaries_steps or values.save_checkpoints_steps


def train_setup(values, plan, dist):
  """model_fn.TrainSetup from the flags (step config, lr, batch and MFU figures)."""
  step_config = step.StepConfig(
      num_accumulation_steps=values.num_accumulation_steps,
      allreduce_post_accumulation=values.allreduce_post_accumulation,
      use_loss_scaling=values.amp,
      init_loss_scale=values.init_loss_scale,
      sparse_as_dense=values.sparse_as_dense,
      fp16_allreduce=values.fp16_allreduce)
  per_sequence = flops.model_flops_per_sequence(
      plan.bert_config, values.max_seq_length, values.max_predictions_per_seq, values.objective)
  return model_fn.TrainSetup(
      learning_rate=plan.learning_rate, num_train_steps=values.num_train_steps,
      num_warmup_steps=values.num_warmup_steps, optimizer_type=values.optimizer_type,
      step_config=step_config, log_every_n_steps=values.log_every_n_steps,
      global_batch_size=plan.global_batch_size, flops_per_sequence=per_sequence,
      peak_flops=total_peak_flops(values, dist),
      output_dir=values.output_dir if dist.is_chief else None)


def total_peak_flops(values, dist):
  """Peak FLOP/s of all workers together for MFU, or None (logged) when it cannot be known.

  GPUs: one device a rank, so peak x ranks (fp16 tensor-core peak with --amp, else TF32: TF 2.15
  runs fp32 matmuls on TF32 tensor cores by default). CPU: the ranks of
  one host share its cores, so peak x hosts. --peak_tflops overrides the per-device figure.
  """
  on_gpu = bool(tf.config.list_physical_devices("GPU"))
  override = values.peak_tflops * 1e12 if values.peak_tflops else None
  try:
    peak, source = flops.peak_flops_with_source(
        "gpu" if on_gpu else "cpu", override,
        precision=("fp16" if values.amp else "tf32") if on_gpu else "fp32")
  except (ValueError, OSError) as e:
    tf.logging.warning("MFU not logged: %s", e)
    return None
  devices = dist.size if on_gpu else max(1, dist.size // max(1, dist.local_size))
  tf.logging.info("  Peak for MFU = %.4g TFLOP/s a device x %d device(s), from %s%s", peak / 1e12,
                  devices, source, " (fp32 peak; --cpu_bf16 computes in bfloat16)"
                  if values.cpu_bf16 else "")
  return peak * devices


def log_startup_notes(values):
  """Says once what the flags really do here: TPU flags ignored, --amp / --cpu_bf16 precision."""
  ignored = train_flags.ignored_tpu_flags(values)
  if ignored:
    tf.logging.warning("TPU flags accepted and ignored (no TPU support): %s",
                       ", ".join("--" + name for name in ignored))
  for note in cpu_precision.precision_notes(values.amp, values.cpu_bf16, distributed.gpu_count(),
                                            cpu_precision.cpu_flags()):
    tf.logging.warning(note)


def checkpoint_step(model_dir):
  """global_step of the latest checkpoint in model_dir, 0 when there is none."""
  latest = tf.train.latest_checkpoint(model_dir) if model_dir else None
  if not latest:
    return 0
  return int(tf.train.load_variable(latest, tf.GraphKeys.GLOBAL_STEP))


def _input_fn(values, plan, files, is_training, order=None, position=0):
  module = _input_module(values.input_pipeline)
  training = {"order": order, "position": position, "seed": order.seed} if is_training else {}
  return module.input_fn_builder(
      files, values.max_seq_length, values.max_predictions_per_seq, is_training,
      values.train_batch_size if is_training else values.eval_batch_size,
      num_workers=plan.num_workers if is_training else 1,
      worker_index=plan.worker_index if is_training else 0,
      legacy_input_mask=values.legacy_input_mask, **training)


def _train(estimator, values, plan, dist, seed, extra_hooks):
  """Trains in chunks, each up to where the recorded epochs end (training/epoch_plan.py), each
  resuming exactly from the chief's last checkpoint: its step and data position."""
  first = True
  while True:
    # Rank 0's checkpoint decides for every rank (output_dir need not be visible on other hosts),
    # so no rank trains while a skipping chief has left.
    latest = tf.train.latest_checkpoint(values.output_dir) if dist.is_chief else None
    start = dist.broadcast_int(checkpoint_step(values.output_dir) if dist.is_chief else 0)
    if start >= values.num_train_steps:
      if first:
        tf.logging.info("Skipping training: %s is at step %d >= num_train_steps %d",
                        values.output_dir, start, values.num_train_steps)
      return
    position = dist.broadcast_int(
        data_position.checkpoint_position(latest, values.num_accumulation_steps) or 0
        if dist.is_chief else 0)
    order, stop = epoch_plan.next_chunk(values, dist, seed, position, start)
    if first:
      tf.logging.info("***** Running training *****")
      tf.logging.info("  Num steps = %d (from step %d)", values.num_train_steps, start)
      tf.logging.info("  Batch size = %d per worker, %d workers, %d accumulation steps: %d per "
                      "update", values.train_batch_size, plan.num_workers,
                      values.num_accumulation_steps, plan.global_batch_size)
    if first and tfdata.packed_layout(plan.train_files, values.max_seq_length):
      per_pack = tfdata.average_sequences_per_pack(plan.train_files)
      line = ("packed records: %.3f sequences a pack on average (first records of %s); "
              "--train_batch_size counts packs: %d packs = ~%.0f sequences per update"
              % (per_pack, plan.train_files[0], plan.global_batch_size,
                 per_pack * plan.global_batch_size))
      tf.logging.info(line)
      if dist.is_chief:
        print(line, flush=True)
    first = False
    stop_hook = data_position.StopAtPositionHook(
        stop, values.num_accumulation_steps, values.output_dir if dist.is_chief else None)
    estimator.train(input_fn=_input_fn(values, plan, plan.train_files, True, order, position),
                    hooks=dist.broadcast_hooks() + [stop_hook] + list(extra_hooks or []),
                    max_steps=values.num_train_steps)


def _evaluate(estimator, values, plan):
  tf.logging.info("***** Running evaluation *****")
  tf.logging.info("  Batch size = %d", values.eval_batch_size)
  result = estimator.evaluate(input_fn=_input_fn(values, plan, plan.eval_files, False),
                              steps=values.max_eval_steps)
  eval_results.write_eval_results(values.output_dir, result)
  return result


def _estimator(values, plan, dist, model_dir, seed=None):
  setup = train_setup(values, plan, dist) if values.do_train else None
  return tf.estimator.Estimator(
      model_fn=model_fn.model_fn_builder(plan.bert_config, values.init_checkpoint, dist, setup,
                                         objective=values.objective, recompute=values.recompute,
                                         seed=seed),
      config=run_config(values, dist, model_dir))


def run(values, dist=None, plan=None, extra_hooks=None):
  """Trains and/or evaluates as the flags say. Returns the eval result dict (chief) or None.

  values: flag values (training/flags.py names); dist: distributed.init(values.horovod) result,
  created here when None; plan: preflight(values, dist), computed here when None;
  extra_hooks: more SessionRunHooks for training on this rank (tests, profiling).
  """
  tf.logging.set_verbosity(tf.logging.INFO)
  dist = dist or distributed.init(values.horovod)
  plan = plan or preflight(values, dist)
  if values.deterministic:
    import tensorflow as tf2  # pylint: disable=g-import-not-at-top
    tf2.config.experimental.enable_op_determinism()  # not in tf.compat.v1
  if dist.is_chief:
    tf.io.gfile.makedirs(values.output_dir)
    log_startup_notes(values)
  seed = epoch_plan.resolve_seed(values, dist) if values.do_train else None
  if values.eval_continuous:
    from bert_fin.training import continuous_eval  # pylint: disable=g-import-not-at-top
    return continuous_eval.run(values, plan, _estimator(values, plan, dist, values.output_dir),
                               _input_fn(values, plan, plan.eval_files, False))
  model_dir = values.output_dir if dist.is_chief else tempfile.mkdtemp(
      prefix="bert_fin_rank%d_" % dist.rank)
  try:
    estimator = _estimator(values, plan, dist, model_dir, seed)
    try:
      if values.do_train:
        _train(estimator, values, plan, dist, seed, extra_hooks)
      if values.do_eval and dist.is_chief:
        return _evaluate(estimator, values, plan)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
      user_error = preflight_lib.run_error(
          error, (plan.train_files or []) + [f for f in plan.eval_files or []
                                              if f not in (plan.train_files or [])],
          checkpoint_step(values.output_dir) if dist.is_chief else 0)
      if user_error is None:
        raise
      raise user_error from error
    return None
  finally:
    if not dist.is_chief:
      shutil.rmtree(model_dir, ignore_errors=True)
