"""What bert_fin's programs print: their own lines, not TensorFlow's and absl's chatter.

Every program (run_pretraining, run_classifier, create_pretraining_data, the tools that load
TensorFlow, the doctor) calls `configure(verbose)` once, first thing in its main and before it
imports TensorFlow. Quiet, the default:

  * TensorFlow's C++ INFO lines (oneDNN, CPU feature guard) are off: TF_CPP_MIN_LOG_LEVEL=1 unless
    the caller set it;
  * Python warnings raised inside TensorFlow, Keras, the Estimator, absl, Horovod and DALI are
    ignored;
  * on the "tensorflow" logger (tf.logging, the Estimator), a record is kept when bert_fin wrote it,
    or when it is a WARNING or worse that is not a deprecation notice, or one of the few INFO lines
    a user acts on (checkpoint saved / restored); the Estimator's INFO chatter, the
    `... is deprecated ... Instructions for updating` blocks and the `params argument` warning go;
  * absl's line prefix (`I1124 19:23:35.669524 140333761411968 file.py:716]`) becomes `19:23:35 I`;
  * under mpirun, ranks other than 0 print only WARNING or worse (their INFO lines repeat rank 0's:
    the features, the peak for MFU, "Running training"); errors and warnings of every rank stay.

Verbose (`--verbose`, or BERT_FIN_VERBOSE=1 in the environment, which mpirun forwards to every
rank) leaves everything as TensorFlow prints it.
"""
import logging
import os
import warnings

from bert_fin import launch

VERBOSE_ENV = "BERT_FIN_VERBOSE"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(PACKAGE_DIR)  # run_pretraining.py & co. (a source checkout)

FLAG_GROUP = ("output", ["verbose"])  # for command_line.install_help
NOISY_PACKAGES = r"(tensorflow|tensorflow_estimator|tf_keras|keras|absl|horovod|nvidia)(\.|$)"
# Messages of TensorFlow's own code that stay in quiet mode: they say where the weights went.
KEPT_MESSAGES = ("Saving checkpoints for", "Restoring parameters from")
DROPPED_WARNINGS = ("is deprecated and will be removed", "includes params argument, but params "
                    "are not passed to Estimator")


def verbose_requested(verbose=False):
  """True when --verbose was given or BERT_FIN_VERBOSE is set to a true value."""
  return bool(verbose) or os.environ.get(VERBOSE_ENV, "").lower() in ("1", "true", "yes")


def is_own_record(record):
  """True for records logged by bert_fin's code (the library or the programs beside it)."""
  path = os.path.abspath(record.pathname)
  return path.startswith(PACKAGE_DIR + os.sep) or os.path.dirname(path) == REPO_DIR


def keep_record(record, rank=0):
  """The quiet-mode rule for one record of the "tensorflow" logger (see the module docstring).

  Args:
    record: the logging.LogRecord.
    rank: the process's launcher rank; ranks > 0 keep only WARNING or worse.

  Returns:
    True to print the record.
  """
  if rank > 0 and record.levelno < logging.WARNING:
    return False
  if is_own_record(record):
    return True
  message = record.getMessage()
  if record.levelno >= logging.WARNING:
    return record.module != "deprecation" and not any(text in message
                                                       for text in DROPPED_WARNINGS)
  return message.startswith(KEPT_MESSAGES)


class _QuietFilter(logging.Filter):

  def __init__(self, rank):
    super().__init__()
    self.rank = rank

  def filter(self, record):
    return keep_record(record, self.rank)


class _ShortFormatter(logging.Formatter):
  """`HH:MM:SS I message`: the level's first letter, as absl's prefix has it."""

  def __init__(self):
    super().__init__("%(asctime)s %(levelname).1s %(message)s", "%H:%M:%S")


def configure(verbose=False):
  """Quiet (the default) or verbose output for this process and the processes it starts.

  Call before TensorFlow is imported: its C++ log level is read then.

  Args:
    verbose: --verbose (BERT_FIN_VERBOSE in the environment also turns it on).

  Returns:
    True when verbose (then BERT_FIN_VERBOSE=1 is set for child processes).
  """
  if verbose_requested(verbose):
    os.environ[VERBOSE_ENV] = "1"  # children (mpirun ranks, subprocesses) stay verbose too
    return True
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
  warnings.filterwarnings("ignore", module=NOISY_PACKAGES)
  tf_logger = logging.getLogger("tensorflow")
  if not any(isinstance(f, _QuietFilter) for f in tf_logger.filters):
    tf_logger.addFilter(_QuietFilter(launch.launcher_rank()))
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  absl_logging.get_absl_handler().setFormatter(_ShortFormatter())
  return False


def define_flag(flag_values):
  """--verbose on an absl program's flags (read by configure)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flags.DEFINE_bool("verbose", False, "print everything TensorFlow and absl log (deprecation "
                    "notices, Estimator internals); same as BERT_FIN_VERBOSE=1",
                    flag_values=flag_values)


def add_argument(parser):
  """--verbose on an argparse tool (read by configure)."""
  parser.add_argument("--verbose", action="store_true",
                      help="print everything TensorFlow and absl log; same as BERT_FIN_VERBOSE=1 "
                           "(default: %(default)s)")
