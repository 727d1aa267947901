"""Every run_classifier flag, defined once.

google-research/bert's run_classifier.py names and defaults: task_name (the data format: jsonl,
tsv, or google's cola, mnli, mrpc, xnli), data_dir, bert_config_file, vocab_file, init_checkpoint, do_lower_case,
max_seq_length, do_train, do_eval, do_predict, train_batch_size, eval_batch_size,
predict_batch_size, learning_rate, num_train_epochs, warmup_proportion, output_dir,
save_checkpoints_steps, use_tpu (refused), iterations_per_loop (ignored).
NVIDIA / run_pretraining's: horovod, use_xla, amp. bert_fin's: labels, num_train_steps (overrides
the epochs), seed, log_every_n_steps, pooling and the session thread counts.
--train_batch_size is per worker, as in run_pretraining.
"""
from absl import flags

from bert_fin import flag_help
from bert_fin.finetune import tasks
from bert_fin.interop import layout as init_folder
from bert_fin.training import flags as train_flags

REQUIRED_FLAGS = ("task_name", "data_dir", "bert_config_file", "vocab_file", "output_dir")


def _define_google_flags(fv):
  flags.DEFINE_string("task_name", None, "The data format of --data_dir: jsonl or tsv "
                      "({train,dev,test}.jsonl / .tsv), or google's task %s (google's files and "
                      "columns)." % ", ".join(tasks.FORMATS[len(tasks.OWN_FORMATS):]),
                      flag_values=fv)
  define_shared_google_flags(fv)


def define_shared_google_flags(fv):
  """google's run_classifier flags but task_name: shared with run_ner (ner_flags.py)."""
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


def _define_bert_fin_flags(fv):
  flags.DEFINE_list("labels", None, "The label list, in the order of test_results.tsv's columns "
                    "(default: the sorted labels of the training set).", flag_values=fv)
  flags.DEFINE_enum("pooling", "first", ["first", "mean", "max"], "The text vector the classifier "
                    "reads: first = google's pooled [CLS]; mean / max = over the real tokens of "
                    "the last layer, then the same pooler dense + tanh (UER-py's --pooling). "
                    "Saved with the model; eval/predict runs use the saved one.", flag_values=fv)
  define_shared_bert_fin_flags(fv)


def define_shared_bert_fin_flags(fv):
  """bert_fin's flags but labels and pooling: shared with run_ner (ner_flags.py)."""
  flags.DEFINE_bool("horovod", False, "Use Horovod (start with mpirun or horovodrun), as "
                    "run_pretraining.", flag_values=fv)
  flags.DEFINE_bool("use_xla", False, "XLA JIT compilation, as run_pretraining.", flag_values=fv)
  flags.DEFINE_bool("amp", False, "fp16 compute on GPUs with dynamic loss scaling.",
                    flag_values=fv)
  flags.DEFINE_integer("num_train_steps", 0, "Optimizer updates; 0: from --num_train_epochs.",
                       flag_values=fv)
  flags.DEFINE_integer("seed", 12345, "Random seed for initialisation and shuffling.",
                       flag_values=fv)
  flags.DEFINE_integer("log_every_n_steps", 100, "Log the loss every N steps.", flag_values=fv)
  train_flags.define_run_config_flags(fv)


def define_flags(flag_values=flags.FLAGS):
  """Defines every run_classifier flag on flag_values (a fresh absl FlagValues in tests)."""
  _define_google_flags(flag_values)
  _define_bert_fin_flags(flag_values)
  return flag_values


def flag_groups():
  """[(title, [flag names])] for --help: google's run_classifier.py flags, then bert_fin's."""
  return flag_help.groups([("google-research/bert run_classifier.py", _define_google_flags),
                           ("bert_fin (NVIDIA's horovod/use_xla/amp and ours)",
                            _define_bert_fin_flags)])


def validate_flags(values):
  """Raises ValueError naming the flag for combinations that cannot run."""
  validate_shared_flags(values)
  if values.task_name.lower() not in tasks.FORMATS:
    raise ValueError("--task_name must be one of %s (the format of the files in --data_dir), "
                     "got %r" % (", ".join(tasks.FORMATS), values.task_name))


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
