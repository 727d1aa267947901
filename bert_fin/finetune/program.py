"""What the fine-tuning programs' command lines share (run_classifier.py, run_ner.py, run_squad.py).

Each program's main reads top to bottom:

  console_log.configure(FLAGS.verbose)                  # before TensorFlow is imported
  with program.refusals("run_classifier.py"):           # ValueError / IOError: one line, exit 2
    settings = program.checked(classify_flags.settings_of(FLAGS))   # instant, no TensorFlow yet
    from bert_fin.finetune.classify import orchestration             # TensorFlow from here on
    dist = distributed.init(settings.distribution.horovod)
    plan = orchestration.preflight(settings, dist)      # every file read and checked, every rank
  orchestration.run(settings, dist, plan)               # estimator.train / evaluate / predict
"""
import contextlib
import sys

from bert_fin import console_log
from bert_fin import flag_help
from bert_fin import io_utils
from bert_fin.training import xla_env


def define_flags(flags_module, doc):
  """flags_module.define_flags() (on absl's global FLAGS) plus --verbose, with --help grouped by
  flags_module.flag_groups() and `doc` (the program's docstring). Returns the FlagValues."""
  values = flags_module.define_flags()
  console_log.define_flag(values)
  flag_help.install(values, flags_module.flag_groups() + [console_log.FLAG_GROUP], doc)
  return values


@contextlib.contextmanager
def refusals(program):
  """A ValueError or IOError raised in the block (a flag, model-input or data error) becomes one
  line `PROGRAM: error: ...` on stderr and exit status 2."""
  try:
    yield
  except (ValueError, IOError) as e:
    print("%s: error: %s" % (program, e), file=sys.stderr, flush=True)
    sys.exit(2)


def checked(settings):
  """settings (a program's checked table) after the checks that need no TensorFlow: --output_dir
  usable (ValueError otherwise) and XLA's environment set (before TensorFlow reads it)."""
  io_utils.check_output_dir(settings.output.output_dir, "--output_dir")
  xla_env.prepare(settings.execution.use_xla)
  return settings
