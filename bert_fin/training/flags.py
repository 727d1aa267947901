"""run_pretraining's flags: generated from the settings table (training/settings.py), checked.

define_flags(flag_values) defines one absl flag per Settings field (bert_fin/flag_table.py: same
name, default, help); flag_groups() is --help's grouping by origin (google-research/bert, NVIDIA
DeepLearningExamples BERT, bert_fin); validate(settings) refuses combinations that cannot run.
"""
import math


from bert_fin import flag_table
from bert_fin.training import settings as settings_lib
from bert_fin.training import sources

GOOGLE_TPU_FLAGS = ("tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores")
MAX_INIT_LOSS_SCALE = 2**40  # ~24 skipped steps above fp16's range at most


# define_flags(flag_values=absl's FLAGS): every run_pretraining flag; flag_groups(): --help's
# grouping in settings.ORIGIN_TITLES order
define_flags, flag_groups = flag_table.program_flags(settings_lib.Settings,
                                                     settings_lib.ORIGIN_TITLES)


def ignored_tpu_flags(values):
  """Names of google's TPU-only flags given on the command line (accepted, never used)."""
  names = GOOGLE_TPU_FLAGS + ("iterations_per_loop",)
  return [name for name in names if name in values and values[name].present]


def validate_flags(flag_values):
  """validate(...) of parsed absl flag values."""
  validate(settings_lib.from_flags(flag_values))


def validate(settings):
  """The run's [stream Source] (--input_file's one, or each --input_source; parsed once, here);
  raises ValueError with a clear message for settings (a settings.Settings) that cannot run."""
  mode, optimizer = settings.mode, settings.optimizer
  if not mode.do_train and not mode.do_eval:
    raise ValueError("At least one of `do_train` or `do_eval` must be True.")
  flag_table.check_fields(settings)  # --use_tpu, the required flags, the bounds: on the fields
  if mode.do_train and optimizer.num_train_steps < 1:  # eval only: 0 is google's "no training"
    raise ValueError("--num_train_steps must be >= 1, got %d" % optimizer.num_train_steps)
  if mode.eval_continuous and (mode.do_train or not mode.do_eval):
    raise ValueError("--eval_continuous runs in a process of its own: pass --do_eval without "
                     "--do_train (start it beside the training job, same --output_dir)")
  if not 1 <= optimizer.init_loss_scale <= MAX_INIT_LOSS_SCALE:
    raise ValueError(
        "--init_loss_scale must be in [1, 2**%d], got %d: every overflowing step is skipped and "
        "halves the scale, so a larger start only skips steps (2**128 is inf in float32 and never "
        "recovers); NVIDIA's default 2**32 is plenty" % (MAX_INIT_LOSS_SCALE.bit_length() - 1,
                                                        optimizer.init_loss_scale))
  if settings.execution.deterministic and settings.execution.seed is None:
    raise ValueError("--deterministic needs --seed: without it every run draws its own initial "
                     "weights and data order")
  _validate_head_warmup(settings)
  _validate_init_regularizer(settings.model)
  train_sources = sources.validate(settings)
  if settings.distribution.fp16_allreduce and not settings.distribution.horovod:
    raise ValueError("--fp16_allreduce compresses the Horovod allreduce: it needs --horovod")
  return train_sources


def _validate_head_warmup(settings):
  steps = settings.optimizer.head_warmup_steps
  if steps and not settings.model.init_checkpoint:
    raise ValueError("--head_warmup_steps=%d trains the heads an --init_checkpoint lacks first: "
                     "pass --init_checkpoint (the same one when resuming)" % steps)
  if steps and settings.mode.do_train and steps >= settings.optimizer.num_train_steps:
    raise ValueError("--head_warmup_steps=%d must be below --num_train_steps=%d (which counts "
                     "the head steps too)" % (steps, settings.optimizer.num_train_steps))


def _validate_init_regularizer(model):
  kind, weight = model.init_regularizer, model.init_regularizer_weight
  if kind == "none":
    if weight is not None:
      raise ValueError("--init_regularizer_weight=%g without --init_regularizer=l2 or ewc: it "
                       "weighs nothing; add --init_regularizer or leave the weight out" % weight)
    if model.fisher_file:
      raise ValueError("--fisher_file is read by --init_regularizer=ewc: add it or leave the "
                       "file out")
    return
  flag = "--init_regularizer=" + kind
  if not model.init_checkpoint:
    raise ValueError("%s holds the encoder near the weights it started from: pass "
                     "--init_checkpoint (the same one when resuming)" % flag)
  if weight is None or not math.isfinite(weight) or weight <= 0:
    raise ValueError("%s needs --init_regularizer_weight > 0 (lambda), got %s" % (flag, weight))
  if kind == "ewc" and not model.fisher_file:
    raise ValueError("--init_regularizer=ewc needs --fisher_file: estimate it on "
                     "--init_checkpoint with tools/estimate_fisher.py")
  if kind == "l2" and model.fisher_file:
    raise ValueError("--fisher_file weighs --init_regularizer=ewc; l2 weighs every parameter "
                     "alike: leave the file out or pass --init_regularizer=ewc")
