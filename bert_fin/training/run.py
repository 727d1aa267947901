"""A pretraining run resolved once: run_pretraining's flags -> one immutable TrainingRun.

`resolve(values, dist)` is the only reader of the parsed flags below the command line. Rank 0
decides, before anything is written, everything that depends on files:
  --init_checkpoint naming a transformers folder: imported into the output dir
  (interop/init_checkpoint.py; its config is used when --bert_config_file is left out);
  the input globs expanded once (absolute paths: train, eval) and their records checked and read
  once (training/preflight.py: layout, vocab ids, empty files, files % workers for tf.data);
  the checkpoint of --output_dir (its step and data position);
  the one seed (data_order.json's, --seed, or drawn) used for RunConfig, the data order and dropout;
  the data order (input/stream.py resume_order: exact resume, a growing corpus, a refusal naming
  what changed, or --data_order=restart), its epochs recorded up to the start position;
  dynamic-masking records: their masking config (data/masking_source.py: the creation stats JSON
  beside them, or --dynamic_masking_config), google's --max_predictions_per_seq checked against it
  (unpacked records), and the layout's max_predictions_per_seq set to the width of the masks the
  readers draw (dynamic_layout);
  DALI's indexes (built in the cache --index_dir when missing; checksums verified);
  --head_warmup_steps: the variables the head phase trains (training/head_warmup.py);
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
from bert_fin.data.create import masking
from bert_fin.records import masking_source
from bert_fin.records import schema as records
from bert_fin.input import stream as stream_lib
from bert_fin.interop import init_checkpoint as init_lib
from bert_fin.training import cpu_precision
from bert_fin.training import flags as flags_lib
from bert_fin.training import head_warmup
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
  masking_config: the data.masking.MaskingConfig of dynamic-masking records (train or eval), else
  None (their layouts' max_predictions_per_seq is the width of the masks drawn: dynamic_layout);
  dynamic_masking_config: the flag (a path or None).
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
  masking_config: typing.Optional[masking.MaskingConfig]
  dynamic_masking_config: typing.Optional[str]
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


def dynamic_layout(layout, config):
  """layout with, for dynamic-masking records, max_predictions_per_seq = P of the masks the readers
  draw (config's cap unpacked, the most a packed row can get packed); other layouts unchanged."""
  if layout is None or not layout.dynamic_masking:
    return layout
  from bert_fin.input import dynamic_masking  # pylint: disable=import-outside-toplevel
  width = config.max_predictions_per_seq
  if layout.max_sequences_per_pack:
    width = dynamic_masking.packed_predictions_width(layout.max_seq_length,
                                                     layout.max_sequences_per_pack, config)
  return layout._replace(max_predictions_per_seq=width)


def masking_of(values, train_files, layout, eval_files, eval_layout):
  """The MaskingConfig of the run's dynamic-masking records (None without any); raises ValueError:
  no config found, configs that differ, --max_predictions_per_seq other than the config's cap for
  unpacked records, --dynamic_masking_config without dynamic records."""
  files = list(train_files) if layout and layout.dynamic_masking else []
  if eval_layout and eval_layout.dynamic_masking:
    files += [f for f in eval_files if f not in files]
  if not files:
    if values.dynamic_masking_config:
      raise ValueError("--dynamic_masking_config=%s: the records read hold masks drawn at creation "
                       "(--masking=static); leave the flag out" % values.dynamic_masking_config)
    return None
  config, source = masking_source.resolve(files, values.dynamic_masking_config)
  unpacked = [l for l in (layout, eval_layout)
              if l and l.dynamic_masking and not l.max_sequences_per_pack]
  if unpacked and values.max_predictions_per_seq != config.max_predictions_per_seq:
    raise ValueError("--max_predictions_per_seq=%d, but the dynamic-masking records were made for "
                     "max_predictions_per_seq=%d (%s): pass --max_predictions_per_seq=%d"
                     % (values.max_predictions_per_seq, config.max_predictions_per_seq, source,
                        config.max_predictions_per_seq))
  tf.logging.info("input: dynamic masking (masks drawn per epoch while training) with the config "
                  "of %s: masked_lm_prob %g, at most %d predictions a sequence", source,
                  config.masked_lm_prob, config.max_predictions_per_seq)
  return config


def _checkpoint(output_dir):
  """(global step, data position) of the latest checkpoint of output_dir; (0, 0) without one."""
  latest = tf.train.latest_checkpoint(output_dir) if os.path.isdir(output_dir) else None
  if not latest:
    return 0, 0
  return (int(tf.train.load_variable(latest, tf.GraphKeys.GLOBAL_STEP)),
          stream_lib.checkpoint_position(latest))


def _decide(values, num_workers, num_gpus):
  """Rank 0's decisions as a JSON-able dict (see the module docstring); raises ValueError."""
  io_utils.check_output_dir(values.output_dir, "--output_dir")  # a probe file, root too
  init_checkpoint, config_file = values.init_checkpoint, values.bert_config_file
  imported = init_lib.resolve(values.init_checkpoint,
                              os.path.join(values.output_dir, init_lib.IMPORT_DIR),
                              values.bert_config_file)
  if imported:  # a transformers folder, now a google-named checkpoint in the output dir
    init_checkpoint, config_file = imported.checkpoint, imported.bert_config_file
    for line in imported.lines:
      print("[run_pretraining] " + line, flush=True)
  config = _config(config_file, values.max_seq_length)
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
  masking_config = masking_of(values, train_files, layout, eval_files, eval_layout)
  layout = dynamic_layout(layout, masking_config)
  eval_layout = dynamic_layout(eval_layout, masking_config)
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
  warmed_up = ()
  if values.do_train:
    warmed_up = head_warmup.warmup_variables(init_checkpoint, config, values.objective,
                                             values.head_warmup_steps)
  if values.input_pipeline == "dali":  # after every refusal: this writes to the cache
    from bert_fin.input import dali  # pylint: disable=import-outside-toplevel
    index_of = dali.prepare_indexes(sorted(set(train_files) | set(eval_files)),
                                    os.path.abspath(index_dir))
  if order is not None:
    stream_lib.record_epochs(order, position, values.num_accumulation_steps, train_files,
                             lambda path: stream_lib.record_count(path, index_of.get(path)))
  if seed is None:
    seed = int(np.random.SeedSequence().entropy % 2 ** 31)
  return {"config": config.to_dict(), "init_checkpoint": init_checkpoint,
          "train_files": train_files, "eval_files": eval_files,
          "layout": layout, "eval_layout": eval_layout, "seed": seed,
          "masking": masking.config_to_json(masking_config) if masking_config else None,
          "order": order.to_json() if order else None, "restarted": bool(changes),
          "start_step": start_step, "start_position": position,
          "index_dir": os.path.abspath(index_dir), "head_warmup_variables": list(warmed_up)}


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
      sparse_as_dense=values.sparse_as_dense, fp16_allreduce=values.fp16_allreduce,
      head_warmup_steps=values.head_warmup_steps if decided["head_warmup_variables"] else 0,
      head_warmup_variables=tuple(decided["head_warmup_variables"]))
  return TrainingRun(
      bert_config=modeling.BertConfig.from_dict(decided["config"]),
      init_checkpoint=decided["init_checkpoint"], objective=values.objective,
      recompute=values.recompute, do_train=values.do_train, do_eval=values.do_eval,
      eval_continuous=values.eval_continuous, eval_timeout_secs=values.eval_timeout_secs,
      output_dir=values.output_dir, input_file=values.input_file,
      input_pipeline=values.input_pipeline, index_dir=decided["index_dir"],
      train_files=tuple(decided["train_files"]), eval_files=tuple(decided["eval_files"]),
      layout=_layout(decided["layout"]), eval_layout=_layout(decided["eval_layout"]),
      masking_config=(masking.config_from_json(decided["masking"]) if decided["masking"]
                      else None),
      dynamic_masking_config=values.dynamic_masking_config,
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
