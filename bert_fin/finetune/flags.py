"""The flags run_classifier and run_ner share, defined once (classify/flags.py and ner/flags.py
add each program's --task_name, --labels and their own).

google-research/bert's run_classifier.py names and defaults: data_dir, bert_config_file,
vocab_file, init_checkpoint, do_lower_case, max_seq_length, do_train, do_eval, do_predict,
train_batch_size, eval_batch_size, predict_batch_size, learning_rate, num_train_epochs,
warmup_proportion, output_dir, save_checkpoints_steps, use_tpu (refused), iterations_per_loop
(ignored). NVIDIA / run_pretraining's: horovod, use_xla, amp. bert_fin's: num_train_steps
(overrides the epochs), seed, log_every_n_steps, optimizer and the session thread counts.
--train_batch_size is per worker, as in run_pretraining.
"""
from absl import flags

from bert_fin import flag_help
from bert_fin.interop import layout as init_folder
from bert_fin.training import flags as train_flags

REQUIRED_FLAGS = ("task_name", "data_dir", "bert_config_file", "vocab_file", "output_dir")
# --optimizer -> optimization.make_optimizer's type. adamweightdecay is google's (the default).
OPTIMIZERS = {"adamweightdecay": "adam", "adamw": "adamw", "lamb": "lamb"}
DEFAULT_OPTIMIZER = "adamweightdecay"


def define_shared_google_flags(fv):
  """google's run_classifier flags but task_name (each program defines its own)."""
  flags.DEFINE_string("data_dir", None, "Directory holding the train/dev/test files of "
                      "--task_name.", flag_values=fv)
  flags.DEFINE_string("bert_config_file", None, "The config json file of the pre-trained BERT "
                      "model.", flag_values=fv)
  flags.DEFINE_string("vocab_file", None, "The vocabulary file the model was trained on.",
                      flag_values=fv)
  flags.DEFINE_string("output_dir", None, "Where checkpoints, eval_results.txt and "
                      "the test predictions are written.", flag_values=fv)
  flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained "
                      "BERT model). bert_fin: also a transformers folder (config.json + "
                      "model.safetensors / pytorch_model.bin), imported into "
                      "OUTPUT_DIR/imported_init/ (then --bert_config_file and --vocab_file may "
                      "be left out).", flag_values=fv)
  flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.",
                    flag_values=fv)
  flags.DEFINE_integer("max_seq_length", 128, "Maximum total input sequence length after "
                       "WordPiece tokenization; longer inputs are truncated (run_classifier) or "
                       "split into overlapping windows (run_ner).", flag_values=fv)
  flags.DEFINE_bool("do_train", False, "Whether to run training.", flag_values=fv)
  flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.", flag_values=fv)
  flags.DEFINE_bool("do_predict", False, "Whether to run the model on the test set.",
                    flag_values=fv)
  flags.DEFINE_integer("train_batch_size", 32, "Training batch size per worker.", flag_values=fv)
  flags.DEFINE_integer("eval_batch_size", 8, "Batch size for eval.", flag_values=fv)
  flags.DEFINE_integer("predict_batch_size", 8, "Batch size for predict.", flag_values=fv)
  flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.",
                     flag_values=fv)
  flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs.", flag_values=fv)
  flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear "
                     "learning rate warmup for.", flag_values=fv)
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model "
                       "checkpoint.", flag_values=fv)
  flags.DEFINE_integer("iterations_per_loop", 1000, "TPU only; accepted and ignored.",
                       flag_values=fv)
  flags.DEFINE_bool("use_tpu", False, "TPUs are not supported: refused with a message.",
                    flag_values=fv)


def define_shared_bert_fin_flags(fv):
  """bert_fin's flags but labels, pooling (run_classifier) and use_crf (run_ner)."""
  flags.DEFINE_bool("horovod", False, "Use Horovod (start with mpirun or horovodrun), as "
                    "run_pretraining.", flag_values=fv)
  flags.DEFINE_bool("use_xla", False, "XLA JIT compilation, as run_pretraining.", flag_values=fv)
  flags.DEFINE_bool("amp", False, "fp16 compute on GPUs with dynamic loss scaling.",
                    flag_values=fv)
  flags.DEFINE_integer("num_train_steps", 0, "Optimizer updates; 0: from --num_train_epochs.",
                       flag_values=fv)
  flags.DEFINE_integer("seed", 12345, "Random seed for initialisation and shuffling.",
                       flag_values=fv)
  flags.DEFINE_integer("log_every_n_steps", 100, "Print a step line (step, loss, grad norm, "
                       "learning rate, examples/s, ETA) at the first update and every N updates, "
                       "as run_pretraining; the same scalars go to TensorBoard in --output_dir.",
                       flag_values=fv)
  flags.DEFINE_enum("optimizer", DEFAULT_OPTIMIZER, list(OPTIMIZERS), "adamweightdecay: google's "
                    "AdamWeightDecay (no bias correction); adamw: the same with Adam's bias "
                    "correction (torch.optim.AdamW, as transformers fine-tunes; better for short "
                    "fine-tunes, see the README); lamb: NVIDIA's LAMB. All: weight decay 0.01 but "
                    "LayerNorm and biases, clip 1.0. Recorded in --output_dir (optimizer.json): "
                    "resuming with another one is refused.", flag_values=fv)
  train_flags.define_run_config_flags(fv)


def define_program_flags(define_google, define_bert_fin, flag_values):
  """Defines a program's flags on flag_values: define_google(fv) (google's, with the program's
  --task_name), then define_bert_fin(fv) (ours). Returns flag_values."""
  define_google(flag_values)
  define_bert_fin(flag_values)
  return flag_values


def program_flag_groups(google_title, define_google, define_bert_fin):
  """[(title, [flag names])] for --help: google's run_classifier.py flags (under google_title),
  then bert_fin's."""
  return flag_help.groups([(google_title, define_google),
                           ("bert_fin (NVIDIA's horovod/use_xla/amp and ours)", define_bert_fin)])


def validate_shared_flags(values):
  """The checks of the flags run_classifier and run_ner share (ValueError naming the flag)."""
  if values.use_tpu:
    raise ValueError("--use_tpu is not supported: bert_fin runs the Estimator on CPUs/GPUs")
  if not (values.do_train or values.do_eval or values.do_predict):
    raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
  missing = [name for name in REQUIRED_FLAGS if not getattr(values, name)
             and not (name in ("bert_config_file", "vocab_file")
                      and init_folder.is_transformers_folder(values.init_checkpoint))]
  if missing:
    raise ValueError("missing required flag(s): %s" % ", ".join("--" + m for m in missing))
  for name in ("max_seq_length", "train_batch_size", "eval_batch_size", "predict_batch_size",
               "save_checkpoints_steps", "log_every_n_steps"):
    if getattr(values, name) < 1:
      raise ValueError("--%s must be >= 1, got %s" % (name, getattr(values, name)))
  if values.max_seq_length < 3:
    raise ValueError("--max_seq_length must be >= 3 ([CLS] text [SEP]), got %d"
                     % values.max_seq_length)
  if values.learning_rate <= 0 or values.num_train_epochs <= 0:
    raise ValueError("--learning_rate and --num_train_epochs must be > 0")
  if not 0 <= values.warmup_proportion < 1:
    raise ValueError("--warmup_proportion must be in [0, 1), got %g" % values.warmup_proportion)
  if values.num_train_steps < 0:
    raise ValueError("--num_train_steps must be >= 0, got %d" % values.num_train_steps)
