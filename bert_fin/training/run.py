"""A pretraining run resolved once: run_pretraining's flags -> one immutable TrainingRun.

`resolve(flag_values, dist)` is the only reader of the parsed flags below the command line (it
reads them into a training/settings.py Settings). Rank 0 decides, before anything is written,
everything that depends on files:
  --init_checkpoint naming a transformers folder: imported into the output dir
  (interop/init_checkpoint.py; its config is used when --bert_config_file is left out);
  the input globs expanded once (absolute paths: train, eval) and their records checked and read
  once (training/preflight.py: layout, vocab ids, empty files, files % workers for tf.data); a
  mixture's sources (--input_source, training/sources.py) and the eval sets (--eval_input_file,
  --eval_source) each checked so, after checking that they share one layout;
  the checkpoint of --output_dir (its step and data position), and its optimizer: optimizer.json's
  (optimization/recorded.py; a different --optimizer_type is refused, a directory without the
  record is checked by its slots alone; the chief writes it as training starts);
  the one seed (data_order.json's, --seed, or drawn) used for RunConfig, the data order and dropout;
  the data order (input/stream.py resume_order: exact resume, a growing corpus, a
  refusal naming what changed, or --data_order=restart), its epochs recorded up to the start
  position; data_order.json binds only once a checkpoint holds a data position > 0 (a start
  that crashed before its first update left nothing to resume: a corrected command starts anew);
  dynamic-masking records: their masking config (records/masking_source.py: the creation stats JSON
  beside them, or --dynamic_masking_config), google's --max_predictions_per_seq checked against it
  (unpacked records), and the layout's max_predictions_per_seq set to the width of the masks the
  readers draw (dynamic_layout);
  DALI's indexes (built in the cache --index_dir when missing; checksums verified);
  --head_warmup_steps: the variables the head phase trains (training/graph/head_warmup.py);
  --init_regularizer: the variables it holds near --init_checkpoint, and --fisher_file checked
  against that checkpoint (training/init_regularizer/);
and broadcasts them (a typed Decisions, as JSON); every rank then builds the same TrainingRun with
its own Worker. Refusals raise RunError on every rank alike (run_pretraining.py prints it once,
from rank 0, and exits 2).
"""
import dataclasses
import json
import os
import typing

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin import modeling
from bert_fin.records import masking_config as masking_config_lib
from bert_fin.records import masking_source
from bert_fin.records import schema as records
from bert_fin.input import stream as stream_lib
from bert_fin.interop import init_checkpoint as init_lib
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.modeling import config as config_lib
from bert_fin.optimization import names as optimizer_names
from bert_fin.optimization import optimizers
from bert_fin.optimization import recorded
from bert_fin.training import cpu_precision
from bert_fin.training import flags as flags_lib
from bert_fin.training.graph import head_warmup
from bert_fin.training.graph import model_fn
from bert_fin.training.init_regularizer import fisher_file as fisher_lib
from bert_fin.training.init_regularizer import penalty
from bert_fin.training import preflight
from bert_fin.training import settings as settings_lib
from bert_fin.training import sources as sources_lib
from bert_fin.training.graph import step


class RunError(ValueError):
  """A refusal found while resolving the run (the same one-line message on every rank)."""


@dataclasses.dataclass(frozen=True)
class Decisions:  # pylint: disable=too-many-instance-attributes
  """Rank 0's decisions (see the module docstring), the same on every rank: broadcast as JSON.

  init_checkpoint: the checkpoint to start from (a transformers folder's import, else the flag);
  train_files / eval_files: absolute paths (every source's, every eval set's); eval_sets: the
  sources.EvalSet of each eval set (name "" for the unprefixed one); layout / eval_layout:
  records.RecordLayout (None when not read); masking_config: the records.masking_config.MaskingConfig of dynamic-masking records, else None
  (their layouts' max_predictions_per_seq is the width of the masks drawn: dynamic_layout); seed:
  the run's one seed; order_json: the stream.MixedOrder to continue (None without --do_train),
  order_restarted: --data_order=restart changed it; start_step / start_position: the checkpoint's
  global step and data position; index_dir: DALI's index cache (absolute);
  head_warmup_variables: the variables the head phase trains (none: no head phase);
  init_regularizer_variables: the variables --init_regularizer holds (none: no penalty);
  fisher_checkpoint: the checked Fisher prefix of --init_regularizer=ewc (absolute), else None.
  """
  bert_config: modeling.BertConfig
  init_checkpoint: typing.Optional[str]
  train_files: tuple
  eval_files: tuple
  eval_sets: typing.Tuple[sources_lib.EvalSet, ...]
  layout: typing.Optional[records.RecordLayout]
  eval_layout: typing.Optional[records.RecordLayout]
  masking_config: typing.Optional[masking_config_lib.MaskingConfig]
  seed: int
  order_json: typing.Optional[str]
  order_restarted: bool
  start_step: int
  start_position: int
  index_dir: str
  head_warmup_variables: tuple
  init_regularizer_variables: tuple = ()
  fisher_checkpoint: typing.Optional[str] = None

  def to_plain(self):
    """The decisions as a JSON-able dict (from_plain reads it back equal): each field by its
    type."""
    return {field.name: _to_plain(_field_type(field), getattr(self, field.name))
            for field in dataclasses.fields(self)}

  @classmethod
  def from_plain(cls, value):
    return cls(**{field.name: _from_plain(_field_type(field), value[field.name])
                  for field in dataclasses.fields(cls)})

  def to_json(self):
    """The decisions as JSON text (from_json reads it back equal)."""
    return json.dumps(self.to_plain())

  @classmethod
  def from_json(cls, text):
    return cls.from_plain(json.loads(text))


# How a Decisions field of each type travels as JSON: type -> (to plain value, from plain value).
# Types not listed (str, int, bool) are JSON already; None stays None.
_PLAIN = {
    modeling.BertConfig: (lambda config: config.to_dict(), modeling.BertConfig.from_dict),
    records.RecordLayout: (list, lambda fields: records.RecordLayout(*fields)),
    masking_config_lib.MaskingConfig: (masking_config_lib.config_to_json,
                                       masking_config_lib.config_from_json),
    sources_lib.EvalSet: (list, lambda fields: sources_lib.EvalSet(fields[0], tuple(fields[1]))),
    tuple: (list, tuple),
}


def _field_type(field):
  """The type of a dataclass field, Optional[X] read as X."""
  args = [arg for arg in typing.get_args(field.type) if arg is not type(None)]
  return args[0] if typing.get_origin(field.type) is typing.Union and len(args) == 1 else field.type


def _element_type(kind):
  """X of Tuple[X, ...] (a tuple of values of one type), else None."""
  args = typing.get_args(kind)
  return args[0] if typing.get_origin(kind) is tuple and args[1:] == (Ellipsis,) else None


def _to_plain(kind, value):
  if value is not None and _element_type(kind):
    return [_to_plain(_element_type(kind), item) for item in value]
  return value if value is None or kind not in _PLAIN else _PLAIN[kind][0](value)


def _from_plain(kind, value):
  if value is not None and _element_type(kind):
    return tuple(_from_plain(_element_type(kind), item) for item in value)
  return value if value is None or kind not in _PLAIN else _PLAIN[kind][1](value)


@dataclasses.dataclass(frozen=True)
class Worker:
  """This rank: num_workers ranks in all (worker_index is ours, 0 the chief), local_size ranks on
  this host, num_gpus GPUs on this host."""
  num_workers: int
  worker_index: int
  is_chief: bool
  local_size: int
  num_gpus: int


@dataclasses.dataclass(frozen=True)
class TrainingRun:  # pylint: disable=too-many-instance-attributes
  """Everything a pretraining run needs, resolved and checked once (see the module docstring).

  settings: the settings (training/settings.py) as the flags gave them, whole; decided: rank 0's
  Decisions; worker: this rank; step_config: the step.StepConfig of the flags and decisions;
  ignored_tpu_flags: google's TPU flags given on the command line. The properties are what the
  run derives from them (global batch, the learning rate used, the summary cadence).
  """
  settings: settings_lib.Settings
  decided: Decisions
  worker: Worker
  step_config: step.StepConfig
  ignored_tpu_flags: tuple

  @property
  def global_batch_size(self):
    """Sequences (packs) one update sees: train_batch_size * num_accumulation_steps * workers."""
    return (self.settings.data.train_batch_size * self.settings.optimizer.num_accumulation_steps
            * self.worker.num_workers)

  @property
  def learning_rate(self):
    """The learning rate used: --learning_rate, times the workers with --scale_lr_by_workers."""
    scale = self.worker.num_workers if self.settings.optimizer.scale_lr_by_workers else 1
    return self.settings.optimizer.learning_rate * scale

  @property
  def save_summaries_steps(self):
    """The graph summaries' cadence: --save_summaries_steps, else --save_checkpoints_steps."""
    return self.settings.output.save_summaries_steps or self.settings.output.save_checkpoints_steps

  def estimator_settings(self):
    """What estimator.session_config / run_config read."""
    return settings_lib.EstimatorSettings(
        seed=self.decided.seed, save_checkpoints_steps=self.settings.output.save_checkpoints_steps,
        log_every_n_steps=self.settings.output.log_every_n_steps, use_xla=self.settings.execution.use_xla,
        amp=self.settings.execution.amp, cpu_bf16=self.settings.execution.cpu_bf16, num_gpus=self.worker.num_gpus,
        intra_op_parallelism_threads=self.settings.execution.intra_op_parallelism_threads,
        inter_op_parallelism_threads=self.settings.execution.inter_op_parallelism_threads)

  def order(self):
    """A fresh stream.MixedOrder of the run (its one source --input_file, or the --input_source
    mixture; None without --do_train)."""
    return (stream_lib.order_from_json(self.decided.order_json) if self.decided.order_json
            else None)


def resolve(flag_values, dist):
  """TrainingRun of the parsed absl flag values on this rank; raises RunError (every rank alike)."""
  settings = settings_lib.from_flags(flag_values)
  input_sources = flags_lib.validate(settings)
  num_gpus = _gpu_count()  # this host's, decided once
  decided = Decisions.from_plain(dist.chief_decides(
      lambda: _decide(settings, input_sources, dist.size, num_gpus).to_plain(), RunError))
  worker = Worker(num_workers=dist.size, worker_index=dist.rank, is_chief=dist.is_chief,
                  local_size=dist.local_size, num_gpus=num_gpus)
  return build(settings, decided, worker, tuple(flags_lib.ignored_tpu_flags(flag_values)))


def _checked_files(data, config, pattern, num_workers, flag):
  """(files, layout) of one --input_file-like flag (data: the settings.Data), every check of
  preflight.py done."""
  files = stream_lib.expand_input_files(pattern)
  preflight.check_not_empty(files, num_workers, data.input_pipeline == "tfdata", flag)
  layout = preflight.check_records(files, data.max_seq_length, data.max_predictions_per_seq,
                                   data.legacy_input_mask, config.vocab_size)
  return files, layout


def _checked_sources(data, config, input_sources, num_workers):
  """([[files]] a source, layout) of the run's sources (one --input_file, or the --input_source
  mixture): the sources share one layout (else a line naming two), no file is in two sources,
  each source's files are checked (tf.data: they split evenly over the workers)."""
  named = [(stream_lib.flag_of(s), stream_lib.expand_input_files(s.input_file))
           for s in input_sources]
  preflight.check_same_layout(named)
  owner, layout = {}, None
  for what, files in named:
    for path in files:
      if path in owner:
        raise ValueError("%s is a file of %s and of %s: give each source its own files"
                         % (path, owner[path], what))
      owner[path] = what
    _, layout = _checked_files(data, config, files, num_workers, what)
    if data.input_pipeline == "tfdata":  # tf.data shards whole files; DALI shards records
      stream_lib.check_files_divisible(len(files), num_workers, "input files"
                                       if what == "--input_file" else "files of %s" % what)
  return [files for _, files in named], layout


def _checked_eval_sets(data, config, input_sources, train_files, layout):
  """([sources.EvalSet], layout) of the eval sets (sources.eval_patterns of the run's sources):
  they share one layout (else a line naming two); files not trained on are checked as
  --eval_input_file's."""
  patterns = sources_lib.eval_patterns(data, input_sources)
  named = [("--eval_source %s" % name if name else "--eval_input_file",
            stream_lib.expand_input_files(pattern)) for name, pattern in patterns]
  preflight.check_same_layout(named)
  eval_sets, eval_layout = [], None
  for (name, _), (what, files) in zip(patterns, named):
    if layout is not None and set(files) <= set(train_files):
      eval_layout = layout  # checked with the training files
    else:
      files, eval_layout = _checked_files(data, config, files, 1, what)
    eval_sets.append(sources_lib.EvalSet(name, tuple(files)))
  return eval_sets, eval_layout


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


def masking_of(data, train_files, layout, eval_files, eval_layout):
  """The MaskingConfig of the run's dynamic-masking records (None without any; data: the
  settings.Data); raises ValueError: no config found, configs that differ,
  --max_predictions_per_seq other than the config's cap for unpacked records,
  --dynamic_masking_config without dynamic records."""
  files = list(train_files) if layout and layout.dynamic_masking else []
  if eval_layout and eval_layout.dynamic_masking:
    files += [f for f in eval_files if f not in files]
  if not files:
    if data.dynamic_masking_config:
      raise ValueError("--dynamic_masking_config=%s: the records read hold masks drawn at creation "
                       "(--masking=static); leave the flag out" % data.dynamic_masking_config)
    return None
  config, source = masking_source.resolve(files, data.dynamic_masking_config)
  unpacked = [l for l in (layout, eval_layout)
              if l and l.dynamic_masking and not l.max_sequences_per_pack]
  if unpacked and data.max_predictions_per_seq != config.max_predictions_per_seq:
    raise ValueError("--max_predictions_per_seq=%d, but the dynamic-masking records were made for "
                     "max_predictions_per_seq=%d (%s): pass --max_predictions_per_seq=%d"
                     % (data.max_predictions_per_seq, config.max_predictions_per_seq, source,
                        config.max_predictions_per_seq))
  tf.logging.info("input: dynamic masking (masks drawn per epoch while training) with the config "
                  "of %s: masked_lm_prob %g, at most %d predictions a sequence", source,
                  config.masked_lm_prob, config.max_predictions_per_seq)
  return config


def _checkpoint(output_dir):
  """(global step, data position) of the latest checkpoint of output_dir; (0, 0) without one."""
  latest = checkpoint_lib.resolve_checkpoint(output_dir, run_dir=True)
  if not latest:
    return 0, 0
  return (int(tf.train.load_variable(latest, tf.GraphKeys.GLOBAL_STEP)),
          stream_lib.checkpoint_position(latest))


def check_optimizer_slots(output_dir, optimizer_type):
  """ValueError (one line) when output_dir's latest checkpoint was trained by adamw (it holds
  adamw's step counter) and this run asks for adam or lamb, or the other way round: the restore
  would miss (or leave unread) a variable. adam and lamb keep the same slots."""
  latest = checkpoint_lib.resolve_checkpoint(output_dir, run_dir=True)
  if not latest:
    return
  counted = optimizers.STEP_COUNTER in dict(tf.train.list_variables(latest))
  if counted == (optimizer_names.canonical(optimizer_type) == "adamw"):
    return
  trained, resume = (("adamw", "--optimizer_type=adamw") if counted else
                     ("adam or lamb", "the optimizer it was trained with"))
  raise ValueError("--output_dir %s holds a checkpoint trained with --optimizer_type=%s, this run "
                   "asks for --optimizer_type=%s: resume with %s or use a new --output_dir" % (
                       output_dir, trained, optimizer_type, resume))


def _decide(settings, input_sources, num_workers, num_gpus):
  """Rank 0's Decisions (see the module docstring); raises ValueError. A transformers folder's
  import is staged outside the output directory until every check has passed."""
  output_dir = settings.output.output_dir
  io_utils.check_output_dir(output_dir, "--output_dir")  # a probe file, root too
  imported = init_lib.resolve(settings.model.init_checkpoint,
                              os.path.join(output_dir, init_lib.IMPORT_DIR),
                              settings.model.bert_config_file)
  if imported:  # a transformers folder, now a google-named checkpoint (staged, or reused)
    for line in imported.lines:
      print("[run_pretraining] " + line, flush=True)
  try:
    return _checked_decisions(settings, input_sources, num_workers, num_gpus, imported)
  finally:
    init_lib.discard(imported)  # refused: nothing of it reaches the output dir (settled: no-op)


def _checked_decisions(settings, input_sources, num_workers, num_gpus, imported):
  """_decide's checks and decisions; input_sources: the run's [stream.Source] (flags.validate's);
  `imported`: init_lib.resolve's (None: no folder)."""
  data, mode, output_dir = settings.data, settings.mode, settings.output.output_dir
  init_checkpoint, config_file = settings.model.init_checkpoint, settings.model.bert_config_file
  if imported:
    init_checkpoint, config_file = imported.checkpoint, imported.bert_config_file
  config = config_lib.read_config_for(config_file, data.max_seq_length)
  cpu_precision.check_cpu_bf16(settings.execution.cpu_bf16, num_gpus, cpu_precision.cpu_flags())
  train_files, layout, source_files = [], None, None
  if mode.do_train:
    source_files, layout = _checked_sources(data, config, input_sources, num_workers)
    train_files = [path for files in source_files for path in files]
  eval_sets, eval_layout = [], None
  if mode.do_eval:
    eval_sets, eval_layout = _checked_eval_sets(data, config, input_sources, train_files, layout)
  eval_files = list(dict.fromkeys(path for s in eval_sets for path in s.files))
  masking_config = masking_of(data, train_files, layout, eval_files, eval_layout)
  layout = dynamic_layout(layout, masking_config)
  eval_layout = dynamic_layout(eval_layout, masking_config)
  start_step, position = _checkpoint(output_dir) if mode.do_train else (0, 0)
  if mode.do_train:  # the record names the optimizer; the slots tell adamw from the others
    recorded.check_optimizer(output_dir, settings.optimizer.optimizer_type, "--optimizer_type")
    check_optimizer_slots(output_dir, settings.optimizer.optimizer_type)
  index_dir = data.index_dir or os.path.join(os.path.abspath(output_dir), "dali_index")
  index_of = {}
  order, changes, seed = None, [], settings.execution.seed
  if mode.do_train and start_step < settings.optimizer.num_train_steps:
    try:  # a directory whose checkpoint has read no data (or that holds none) is no run to
      # resume: a start that crashed before its first step binds nothing (its data_order.json is
      # replaced)
      saved = stream_lib.load_order(output_dir) if position > 0 else None
    except stream_lib.StreamError:
      if data.data_order != "restart":
        raise
      saved = None  # unreadable: restart begins a new order at the checkpoint's position
    sharding = stream_lib.SHARDING_OF_PIPELINE[data.input_pipeline]
    order, changes = stream_lib.resume_order(
        saved, settings.execution.seed, num_workers, data.train_batch_size, sharding,
        input_sources, source_files, position, data.data_order == "restart",
        preflight.describe_layout)
    seed = order.seed
    if changes:
      tf.logging.warning("--data_order=restart: a new data order from step %d (data position %d):"
                         " %s", start_step, position, "; ".join(changes))
  warmed_up, held, fisher = (), (), None
  if mode.do_train:
    warmed_up = head_warmup.warmup_variables(init_checkpoint, config, settings.model.objective,
                                             settings.optimizer.head_warmup_steps)
    held, fisher = init_regularizer_decision(settings.model, init_checkpoint, config)
  if imported:  # after every refusal: the import moves into the output dir
    init_checkpoint = init_lib.settle(imported).checkpoint
  if data.input_pipeline == "dali":  # after every refusal: this writes to the cache
    from bert_fin.input import dali  # pylint: disable=import-outside-toplevel
    index_of = dali.prepare_indexes(sorted(set(train_files) | set(eval_files)),
                                    os.path.abspath(index_dir))
  if order is not None:
    stream_lib.record_ahead(order, position, settings.optimizer.num_accumulation_steps,
                            source_files,
                            lambda path: stream_lib.record_count(path, index_of.get(path)))
  if seed is None:
    seed = int(np.random.SeedSequence().entropy % 2 ** 31)
  return Decisions(
      bert_config=config, init_checkpoint=init_checkpoint, train_files=tuple(train_files),
      eval_files=tuple(eval_files), eval_sets=tuple(eval_sets), layout=layout,
      eval_layout=eval_layout, masking_config=masking_config, seed=seed,
      order_json=order.to_json() if order else None, order_restarted=bool(changes), start_step=start_step, start_position=position,
      index_dir=os.path.abspath(index_dir), head_warmup_variables=tuple(warmed_up),
      init_regularizer_variables=held, fisher_checkpoint=fisher)


def init_regularizer_decision(model, init_checkpoint, config):
  """((the variables --init_regularizer holds), the checked Fisher prefix or None); ((), None)
  without the flag. model: the settings.Model; init_checkpoint: the checkpoint the run starts
  from (a transformers folder's import). ValueError: nothing to hold, a Fisher of another base
  or other variables (fisher_file.check)."""
  if model.init_regularizer == "none":
    return (), None
  trained = model_fn.pretraining_variable_shapes(config, model.objective, trained_only=True)
  held = penalty.penalised_names(trained, checkpoint_lib.checkpoint_shapes(init_checkpoint))
  if not held:
    raise ValueError("--init_regularizer=%s: --init_checkpoint %s holds none of the encoder's "
                     "trained variables (bert/...): there is nothing to hold near it"
                     % (model.init_regularizer, init_checkpoint))
  if model.init_regularizer != "ewc":
    return held, None
  return held, fisher_lib.check(model.fisher_file, init_checkpoint,
                                {name: trained[name] for name in held})


def _gpu_count():
  from bert_fin.training import distributed  # pylint: disable=import-outside-toplevel
  return distributed.gpu_count()


def build(settings, decided, worker, ignored_tpu_flags=()):
  """The TrainingRun of a rank from the settings, rank 0's Decisions and the Worker."""
  optimizer = settings.optimizer
  step_config = step.StepConfig(
      num_accumulation_steps=optimizer.num_accumulation_steps,
      allreduce_post_accumulation=settings.distribution.allreduce_post_accumulation,
      use_loss_scaling=settings.execution.amp, init_loss_scale=optimizer.init_loss_scale,
      sparse_as_dense=settings.distribution.sparse_as_dense,
      fp16_allreduce=settings.distribution.fp16_allreduce,
      head_warmup_steps=optimizer.head_warmup_steps if decided.head_warmup_variables else 0,
      head_warmup_variables=decided.head_warmup_variables)
  return TrainingRun(settings=settings, decided=decided, worker=worker, step_config=step_config,
                     ignored_tpu_flags=tuple(ignored_tpu_flags))
