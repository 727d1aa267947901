"""Every run_pretraining flag, defined once.

Three families, same names and defaults as their origin:
  google-research/bert run_pretraining.py: bert_config_file ... max_eval_steps, and the TPU flags
    (accepted so google command lines still parse; --use_tpu itself is refused by validate_flags);
  NVIDIA DeepLearningExamples BERT (TF1): horovod, use_xla, amp, num_accumulation_steps,
    allreduce_post_accumulation, optimizer_type, init_loss_scale;
  bert_fin: input_pipeline, sparse_as_dense, fp16_allreduce, scale_lr_by_workers, objective,
    recompute, log_every_n_steps, peak_tflops, eval_input_file, dynamic_masking_config,
    head_warmup_steps, legacy_input_mask, seed,
    deterministic, index_dir, data_order, cpu_bf16, eval_continuous, eval_timeout_secs and the
    session thread counts.

Batch sizes follow NVIDIA: --train_batch_size is the micro-batch of ONE worker; one optimizer update
sees train_batch_size * num_accumulation_steps * num_workers sequences (the global batch). Without
Horovod and accumulation this is google's "total batch size".
"""
from absl import flags

from bert_fin import flag_help
from bert_fin.interop import layout as init_folder

GOOGLE_TPU_FLAGS = ("tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores")
REQUIRED_FLAGS = ("bert_config_file", "input_file", "output_dir")
MAX_INIT_LOSS_SCALE = 2**40  # ~24 skipped steps above fp16's range at most
GROUP_TITLES = ("google-research/bert run_pretraining.py", "NVIDIA DeepLearningExamples BERT (TF1)",
                "bert_fin")


def _define_google_flags(fv):
  flags.DEFINE_string("bert_config_file", None, "The config json file of the BERT model "
                      "(the architecture).", flag_values=fv)
  flags.DEFINE_string("input_file", None, "Input TF example files (can be a glob or comma "
                      "separated).", flag_values=fv)
  flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints "
                      "will be written.", flag_values=fv)
  flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained "
                      "BERT model). bert_fin: also a transformers folder (config.json + "
                      "model.safetensors / pytorch_model.bin), imported into "
                      "OUTPUT_DIR/imported_init/ (then --bert_config_file may be left out).",
                      flag_values=fv)
  flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length. Must "
                       "match data generation.", flag_values=fv)
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions "
                       "per sequence. Must match data generation.", flag_values=fv)
  flags.DEFINE_bool("do_train", False, "Whether to run training.", flag_values=fv)
  flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.", flag_values=fv)
  flags.DEFINE_integer("train_batch_size", 32, "Batch size for training, per worker and per "
                       "micro-batch (see the module docstring).", flag_values=fv)
  flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", flag_values=fv)
  flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate.", flag_values=fv)
  flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps (optimizer "
                       "updates).", flag_values=fv)
  flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.", flag_values=fv)
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model "
                       "checkpoint.", flag_values=fv)
  flags.DEFINE_integer("iterations_per_loop", 1000, "How many steps to make in each estimator "
                       "call (TPU only; accepted and ignored).", flag_values=fv)
  flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.", flag_values=fv)
  flags.DEFINE_bool("use_tpu", False, "TPUs are not supported: refused with a message.",
                    flag_values=fv)
  flags.DEFINE_string("tpu_name", None, "TPU only; accepted and ignored.", flag_values=fv)
  flags.DEFINE_string("tpu_zone", None, "TPU only; accepted and ignored.", flag_values=fv)
  flags.DEFINE_string("gcp_project", None, "TPU only; accepted and ignored.", flag_values=fv)
  flags.DEFINE_string("master", None, "TPU only; accepted and ignored.", flag_values=fv)
  flags.DEFINE_integer("num_tpu_cores", 8, "TPU only; accepted and ignored.", flag_values=fv)


def _define_nvidia_flags(fv):
  flags.DEFINE_bool("horovod", False, "Whether to use Horovod for multi-GPU / multi-process "
                    "runs (start with mpirun or horovodrun).", flag_values=fv)
  flags.DEFINE_bool("use_xla", False, "Whether to enable XLA JIT compilation (ON_1, lazy "
                    "compilation off).", flag_values=fv)
  flags.DEFINE_bool("amp", False, "Automatic mixed precision (fp16 compute, dynamic loss "
                    "scaling).", flag_values=fv)
  flags.DEFINE_integer("num_accumulation_steps", 1, "Micro-batches accumulated per optimizer "
                       "update. Global batch = train_batch_size * num_accumulation_steps * "
                       "workers.", flag_values=fv)
  flags.DEFINE_bool("allreduce_post_accumulation", False, "Allreduce once per update after "
                    "accumulation instead of after every micro-batch.", flag_values=fv)
  flags.DEFINE_enum("optimizer_type", "adam", ["adam", "lamb"], "adam: google's AdamWeightDecay "
                    "(google's default); lamb: LAMB (NVIDIA's default, for large batches).",
                    flag_values=fv)
  flags.DEFINE_integer("init_loss_scale", 2**32, "Initial loss scale for --amp.", flag_values=fv)


def _define_bert_fin_flags(fv):
  flags.DEFINE_enum("input_pipeline", "tfdata", ["tfdata", "dali"], "Input pipeline: tf.data "
                    "or NVIDIA DALI (its indexes: --index_dir).", flag_values=fv)
  flags.DEFINE_string("index_dir", None, "--input_pipeline=dali: the cache of DALI index files "
                      "for shards without a current FILE.idx beside them (built when missing; "
                      "default: OUTPUT_DIR/dali_index). Nothing is written beside the data.",
                      flag_values=fv)
  flags.DEFINE_enum("data_order", "resume", ["resume", "restart"], "resume: continue the data "
                    "order of OUTPUT_DIR/data_order.json exactly, refusing changed input files or "
                    "data flags (seed, batch size, workers, pipeline); restart: accept such changes: "
                    "keep the weights and step of the checkpoint and start a new order over the "
                    "files and flags given now (unchanged inputs go on exactly either way).",
                    flag_values=fv)
  flags.DEFINE_bool("sparse_as_dense", True, "Horovod: allreduce embedding gradients densely "
                    "instead of allgathering IndexedSlices.", flag_values=fv)
  flags.DEFINE_bool("fp16_allreduce", False, "Horovod: compress gradients to fp16 for the "
                    "allreduce.", flag_values=fv)
  flags.DEFINE_bool("scale_lr_by_workers", False, "Multiply --learning_rate by the number of "
                    "workers (off: continued pretraining from a checkpoint was unstable with it).",
                    flag_values=fv)
  flags.DEFINE_enum("objective", "bert", ["bert", "roberta"], "bert: MLM + NSP; roberta: MLM "
                    "only.", flag_values=fv)
  flags.DEFINE_bool("recompute", False, "Recompute transformer layer activations in the "
                    "backward pass (less memory, ~30% more compute).", flag_values=fv)
  flags.DEFINE_integer("log_every_n_steps", 10, "Print and summarise step, losses, lr, loss "
                       "scale, sentences/s, tokens/s and MFU every N updates (rank 0).",
                       flag_values=fv)
  flags.DEFINE_float("peak_tflops", None, "Peak TFLOP/s of one device for MFU (default: looked "
                     "up from the device name).", flag_values=fv)
  flags.DEFINE_string("eval_input_file", None, "Eval TF example files (glob or comma separated); "
                      "default: --input_file, as google.", flag_values=fv)
  flags.DEFINE_string("dynamic_masking_config", None, "Dynamic-masking records (create_pretraining_"
                      "data --masking=dynamic): the JSON file holding their \"dynamic_masking\" "
                      "block (the stats JSON of their creation). Default: the *.stats.json beside "
                      "the records that lists them (pack_records copies the block).",
                      flag_values=fv)
  flags.DEFINE_integer("head_warmup_steps", 0, "Continued pretraining from an --init_checkpoint "
                       "without (all of) the pretraining heads: the first N updates train only the "
                       "variables it does not provide (the encoder frozen: no update, optimizer "
                       "slots untouched) at the constant --learning_rate; then every variable, "
                       "with --num_warmup_steps of warm-up from step N and decay to 0 at "
                       "--num_train_steps (which counts the N). Refused when the checkpoint "
                       "provides every variable.", flag_values=fv)
  flags.DEFINE_bool("legacy_input_mask", False, "Read google-format records (input_mask, no "
                    "input_len).", flag_values=fv)
  flags.DEFINE_integer("seed", None, "Random seed: weight initialisation, data order (the same "
                       "on every rank) and dropout masks (default: random, saved in output_dir/"
                       "data_order.json so a restart continues the same order).", flag_values=fv)
  flags.DEFINE_bool("deterministic", False, "TensorFlow op determinism (needs --seed): two runs "
                    "of the same command give identical checkpoints; some ops run slower.",
                    flag_values=fv)
  flags.DEFINE_bool("cpu_bf16", False, "Hosts without a GPU whose CPU has AVX512_BF16 or AMX: "
                    "oneDNN bfloat16 auto mixed precision (fp32 variables). Refused elsewhere.",
                    flag_values=fv)
  flags.DEFINE_bool("eval_continuous", False, "With --do_eval (no --do_train), in a second "
                    "process: evaluate each new checkpoint of --output_dir as it appears, keep the "
                    "best by masked_lm_loss in output_dir/best/, stop after the checkpoint of "
                    "step --num_train_steps.", flag_values=fv)
  flags.DEFINE_float("eval_timeout_secs", None, "--eval_continuous: also stop after this many "
                     "seconds without a new checkpoint (default: wait for the final step).",
                     flag_values=fv)
  define_run_config_flags(fv)


def define_run_config_flags(fv):
  """The flags estimator.session_config and estimator.run_config read besides google's (thread
  counts, summary cadence): defined here once for run_pretraining and run_classifier alike."""
  flags.DEFINE_integer("save_summaries_steps", None, "Write the graph's TensorBoard summaries "
                       "every N updates (chief); default --save_checkpoints_steps, as NVIDIA: a "
                       "summary step is a second set of fetches (executor, grappler, XLA) while "
                       "the other ranks wait. The log line's scalars keep --log_every_n_steps.",
                       flag_values=fv)
  flags.DEFINE_integer("intra_op_parallelism_threads", 0, "TF intra-op threads (0: TF picks).",
                       flag_values=fv)
  flags.DEFINE_integer("inter_op_parallelism_threads", 0, "TF inter-op threads (0: TF picks).",
                       flag_values=fv)


_DEFINERS = (_define_google_flags, _define_nvidia_flags, _define_bert_fin_flags)


def define_flags(flag_values=flags.FLAGS):
  """Defines every run_pretraining flag on flag_values (a fresh absl FlagValues in tests)."""
  for define in _DEFINERS:
    define(flag_values)
  return flag_values


def flag_groups():
  """[(title, [flag names])] in GROUP_TITLES order: what --help lists, by origin."""
  return flag_help.groups(zip(GROUP_TITLES, _DEFINERS))


def ignored_tpu_flags(values):
  """Names of google's TPU-only flags given on the command line (accepted, never used)."""
  names = GOOGLE_TPU_FLAGS + ("iterations_per_loop",)
  return [name for name in names if name in values and values[name].present]


def validate_flags(values):
  """Raises ValueError with a clear message for flag combinations that cannot run.

  values: anything with the flag names as attributes (absl FLAGS or a namespace).
  """
  if values.use_tpu:
    raise ValueError(
        "--use_tpu is not supported: bert_fin trains with the TF Estimator on CPUs/GPUs (use "
        "--horovod with mpirun for several GPUs). The TPU flags (%s) are accepted and ignored."
        % ", ".join(GOOGLE_TPU_FLAGS))
  if not values.do_train and not values.do_eval:
    raise ValueError("At least one of `do_train` or `do_eval` must be True.")
  missing = [name for name in REQUIRED_FLAGS if not getattr(values, name)
             and not (name == "bert_config_file" and init_folder.is_transformers_folder(
                 values.init_checkpoint))]  # the folder's imported config is used
  if missing:
    raise ValueError("missing required flag(s): %s" % ", ".join("--" + m for m in missing))
  positive = ("max_seq_length", "max_predictions_per_seq", "train_batch_size", "eval_batch_size",
              "num_accumulation_steps", "max_eval_steps", "log_every_n_steps")
  for name in positive + (("num_train_steps",) if values.do_train else ()):
    if getattr(values, name) < 1:
      raise ValueError("--%s must be >= 1, got %s" % (name, getattr(values, name)))
  if values.num_train_steps < 0:  # eval only: 0 is google's "no training" (any value is unused)
    raise ValueError("--num_train_steps must be >= 0, got %d" % values.num_train_steps)
  if values.eval_continuous and (values.do_train or not values.do_eval):
    raise ValueError("--eval_continuous runs in a process of its own: pass --do_eval without "
                     "--do_train (start it beside the training job, same --output_dir)")
  if values.num_warmup_steps < 0:
    raise ValueError("--num_warmup_steps must be >= 0, got %d" % values.num_warmup_steps)
  if values.learning_rate <= 0:
    raise ValueError("--learning_rate must be > 0, got %g" % values.learning_rate)
  if values.save_checkpoints_steps < 1:
    raise ValueError("--save_checkpoints_steps must be >= 1, got %d"
                     % values.save_checkpoints_steps)
  if values.save_summaries_steps is not None and values.save_summaries_steps < 1:
    raise ValueError("--save_summaries_steps must be >= 1, got %d" % values.save_summaries_steps)
  if not 1 <= values.init_loss_scale <= MAX_INIT_LOSS_SCALE:
    raise ValueError(
        "--init_loss_scale must be in [1, 2**%d], got %d: every overflowing step is skipped and "
        "halves the scale, so a larger start only skips steps (2**128 is inf in float32 and never "
        "recovers); NVIDIA's default 2**32 is plenty" % (MAX_INIT_LOSS_SCALE.bit_length() - 1,
                                                        values.init_loss_scale))
  if values.deterministic and values.seed is None:
    raise ValueError("--deterministic needs --seed: without it every run draws its own initial "
                     "weights and data order")
  _validate_head_warmup(values)
  if values.fp16_allreduce and not values.horovod:
    raise ValueError("--fp16_allreduce compresses the Horovod allreduce: it needs --horovod")



def _validate_head_warmup(values):
  steps = values.head_warmup_steps
  if steps < 0:
    raise ValueError("--head_warmup_steps must be >= 0, got %d" % steps)
  if steps and not values.init_checkpoint:
    raise ValueError("--head_warmup_steps=%d trains the heads an --init_checkpoint lacks first: "
                     "pass --init_checkpoint (the same one when resuming)" % steps)
  if steps and values.do_train and steps >= values.num_train_steps:
    raise ValueError("--head_warmup_steps=%d must be below --num_train_steps=%d (which counts "
                     "the head steps too)" % (steps, values.num_train_steps))
