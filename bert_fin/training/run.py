"""A pretraining run resolved once: run_pretraining's flags -> one immutable TrainingRun.

`resolve(values, dist)` is the only reader of the parsed flags below the command line. Rank 0
decides, before anything is written, everything that depends on files:
  the input globs expanded once (absolute paths: train, eval) and their records checked and read
  once (training/preflight.py: layout, vocab ids, empty files, files % workers for tf.data);
  the checkpoint of --output_dir (its step and data position);
  the one seed (data_order.json's, --seed, or drawn) used for RunConfig, the data order and dropout;
  the data order (input/stream.py resume_order: exact resume, a growing corpus, a refusal naming
  what changed, or --data_order=restart), its epochs recorded up to the start position;
  DALI's indexes (built in the cache --index_dir when missing; checksums verified);
and broadcasts them; every rank then builds the same TrainingRun with its own rank. Refusals raise
RunError on every rank alike (run_pretraining.py prints it once, from rank 0, and exits 2).
"""
import dataclasses
import json
import os
import typing

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin import modeling
from bert_fin.data import records
from bert_fin.input import stream as stream_lib
from bert_fin.training import cpu_precision
from bert_fin.training import flags as flags_lib
from bert_fin.training import preflight
from bert_fin.training import step


class RunError(ValueError):
  """A refusal found while resolving the run (the same one-line message on every rank)."""


@dataclasses.dataclass(frozen=True)
class TrainingRun:  # pylint: disable=too-many-instance-attributes
  """Everything a pretraining run needs, resolved and checked once (see the module docstring).

  Files are absolute paths; layout / eval_layout are records.RecordLayout; order_json is the
  stream.DataOrder to continue (None without --do_train); start_step / start_position: the
  checkpoint's global step and data position; global_batch_size = train_batch_size *
  num_accumulation_steps * num_workers; learning_rate already scaled when --scale_lr_by_workers.
  """
  bert_config: modeling.BertConfig
  init_checkpoint: typing.Optional[str]
  objective: str
  recompute: bool
  do_train: bool
  do_eval: bool
  eval_continuous: bool
  eval_timeout_secs: typing.Optional[float]
  output_dir: str
  input_file: str
  input_pipeline: str
  index_dir: str
  train_files: tuple
  eval_files: tuple
  layout: typing.Optional[records.RecordLayout]
  eval_layout: typing.Optional[records.RecordLayout]
  seed: int
  order_json: typing.Optional[str]
  order_restarted: bool
  start_step: int
  start_position: int
  num_workers: int
  worker_index: int
  is_chief: bool
  local_size: int
  num_gpus: int
  train_batch_size: int
  eval_batch_size: int
  num_accumulation_steps: int
  global_batch_size: int
  learning_rate: float
  num_train_steps: int
  num_warmup_steps: int
  optimizer_type: str
  step_config: step.StepConfig
  max_eval_steps: int
  save_checkpoints_steps: int
  save_summaries_steps: int
  log_every_n_steps: int
  peak_tflops: typing.Optional[float]
  use_xla: bool
  amp: bool
  cpu_bf16: bool
  deterministic: bool
  intra_op_parallelism_threads: int
  inter_op_parallelism_threads: int
  ignored_tpu_flags: tuple

  def order(self):
    """A fresh stream.DataOrder of the run (None without --do_train)."""
    return stream_lib.DataOrder.from_json(self.order_json) if self.order_json else None


def resolve(values, dist):
  """TrainingRun of the parsed flags `values` on this rank; raises RunError (every rank alike)."""
  flags_lib.validate_flags(values)
  num_gpus = _gpu_count()  # this host's, decided once
  decided, error = {}, ""
  if dist.is_chief:
    try:
      decided = _decide(values, dist.size, num_gpus)
    except (ValueError, OSError) as e:
      error = str(e)
  error = dist.broadcast_bytes(error.encode("utf-8")).decode("utf-8")
  if error:
    raise RunError(error)
  text = json.dumps(decided).encode("utf-8") if dist.is_chief else b""
  decided = json.loads(dist.broadcast_bytes(text).decode("utf-8"))
  return _build(values, dist, decided, num_gpus)


def _config(path, max_seq_length):
  try:
    config = modeling.BertConfig.from_json_file(path)
  except (OSError, ValueError) as e:
    raise ValueError("--bert_config_file %s: %s" % (path, e)) from e
  if max_seq_length > config.max_position_embeddings:
    raise ValueError("Cannot use sequence length %d because the BERT model was only trained up "
                     "to sequence length %d" % (max_seq_length, config.max_position_embeddings))
  return config


def _checked_files(values, config, pattern, num_workers, flag):
  """(files, layout) of one --input_file-like flag, every check of preflight.py done."""
  files = stream_lib.expand_input_files(pattern)
  preflight.check_not_empty(files, num_workers, values.input_pipeline == "tfdata", flag)
  layout = preflight.check_records(files, values.max_seq_length, values.max_predictions_per_seq,
                                   values.legacy_input_mask, config.vocab_size)
  return files, layout


def _checkpoint(output_dir):
  """(global step, data position) of the latest checkpoint of output_dir; (0, 0) without one."""
  latest = tf.train.latest_checkpoint(output_dir) if os.path.isdir(output_dir) else None
  if not latest:
    return 0, 0
  return (int(tf.train.load_variable(latest, tf.GraphKeys.GLOBAL_STEP)),
          stream_lib.checkpoint_position(latest))


def _decide(values, num_workers, num_gpus):
  """Rank 0's decisions as a JSON-able dict (see the module docstring); raises ValueError."""
  config = _config(values.bert_config_file, values.max_seq_length)
  io_utils.check_output_dir(values.output_dir, "--output_dir")  # a probe file, root too
  cpu_precision.check_cpu_bf16(values.cpu_bf16, num_gpus, cpu_precision.cpu_flags())
  train_files, layout = [], None
  if values.do_train:
    train_files, layout = _checked_files(values, config, values.input_file, num_workers,
                                         "--input_file")
    if values.input_pipeline == "tfdata":  # tf.data shards whole files; DALI shards records
      stream_lib.check_files_divisible(len(train_files), num_workers)
  eval_files, eval_layout = [], None
  if values.do_eval:
    eval_files = stream_lib.expand_input_files(values.eval_input_file or values.input_file)
    if eval_files != train_files:
      eval_files, eval_layout = _checked_files(values, config, eval_files, 1, "--eval_input_file")
    else:
      eval_layout = layout
  start_step, position = _checkpoint(values.output_dir) if values.do_train else (0, 0)
  index_dir = values.index_dir or os.path.join(os.path.abspath(values.output_dir),
                                               "dali_index")
  index_of = {}
  order, changes, seed = None, [], values.seed
  if values.do_train and start_step < values.num_train_steps:
    try:
      saved = stream_lib.load_order(values.output_dir)
    except stream_lib.StreamError:
      if values.data_order != "restart":
        raise
      saved = None  # unreadable: restart begins a new order at the checkpoint's position
    order, changes = stream_lib.resume_order(
        saved, values.seed, num_workers,
        values.train_batch_size, stream_lib.SHARDING_OF_PIPELINE[values.input_pipeline],
        values.input_file, train_files, position, values.data_order == "restart",
        preflight.describe_layout)
    seed = order.seed
    if changes:
      tf.logging.warning("--data_order=restart: a new data order from step %d (data position %d):"
                         " %s", start_step, position, "; ".join(changes))
  if values.input_pipeline == "dali":  # after every refusal: this writes to the cache
    from bert_fin.input import dali  # pylint: disable=import-outside-toplevel
    index_of = dali.prepare_indexes(sorted(set(train_files) | set(eval_files)),
                                    os.path.abspath(index_dir))
  if order is not None:
    stream_lib.record_epochs(order, position, values.num_accumulation_steps, train_files,
                             lambda path: stream_lib.record_count(path, index_of.get(path)))
  if seed is None:
    seed = int(np.random.SeedSequence().entropy % 2 ** 31)
  return {"config": config.to_dict(), "train_files": train_files, "eval_files": eval_files,
          "layout": layout, "eval_layout": eval_layout, "seed": seed,
          "order": order.to_json() if order else None, "restarted": bool(changes),
          "start_step": start_step, "start_position": position,
          "index_dir": os.path.abspath(index_dir)}


def _gpu_count():
  from bert_fin.training import distributed  # pylint: disable=import-outside-toplevel
  return distributed.gpu_count()


def _layout(value):
  return records.RecordLayout(*value) if value else None


def _build(values, dist, decided, num_gpus):
  """The TrainingRun of this rank from rank 0's decisions and the flags."""
  step_config = step.StepConfig(
      num_accumulation_steps=values.num_accumulation_steps,
      allreduce_post_accumulation=values.allreduce_post_accumulation,
      use_loss_scaling=values.amp, init_loss_scale=values.init_loss_scale,
      sparse_as_dense=values.sparse_as_dense, fp16_allreduce=values.fp16_allreduce)
  return TrainingRun(
      bert_config=modeling.BertConfig.from_dict(decided["config"]),
      init_checkpoint=values.init_checkpoint, objective=values.objective,
      recompute=values.recompute, do_train=values.do_train, do_eval=values.do_eval,
      eval_continuous=values.eval_continuous, eval_timeout_secs=values.eval_timeout_secs,
      output_dir=values.output_dir, input_file=values.input_file,
      input_pipeline=values.input_pipeline, index_dir=decided["index_dir"],
      train_files=tuple(decided["train_files"]), eval_files=tuple(decided["eval_files"]),
      layout=_layout(decided["layout"]), eval_layout=_layout(decided["eval_layout"]),
      seed=decided["seed"], order_json=decided["order"], order_restarted=decided["restarted"],
      start_step=decided["start_step"], start_position=decided["start_position"],
      num_workers=dist.size, worker_index=dist.rank, is_chief=dist.is_chief,
      local_size=dist.local_size, num_gpus=num_gpus,
      train_batch_size=values.train_batch_size, eval_batch_size=values.eval_batch_size,
      num_accumulation_steps=values.num_accumulation_steps,
      global_batch_size=values.train_batch_size * values.num_accumulation_steps * dist.size,
      learning_rate=values.learning_rate * (dist.size if values.scale_lr_by_workers else 1),
      num_train_steps=values.num_train_steps, num_warmup_steps=values.num_warmup_steps,
      optimizer_type=values.optimizer_type, step_config=step_config,
      max_eval_steps=values.max_eval_steps,
      save_checkpoints_steps=values.save_checkpoints_steps,
      save_summaries_steps=values.save_summaries_steps or values.save_checkpoints_steps,
      log_every_n_steps=values.log_every_n_steps, peak_tflops=values.peak_tflops,
      use_xla=values.use_xla, amp=values.amp, cpu_bf16=values.cpu_bf16,
      deterministic=values.deterministic,
      intra_op_parallelism_threads=values.intra_op_parallelism_threads,
      inter_op_parallelism_threads=values.inter_op_parallelism_threads,
      ignored_tpu_flags=tuple(flags_lib.ignored_tpu_flags(values)))
