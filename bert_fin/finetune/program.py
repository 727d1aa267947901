"""The command line of a fine-tuning program (run_classifier.py, run_ner.py), written once.

  FLAGS = program.define_flags(classify_flags, __doc__)   # its flags, --verbose, --help by origin
  app.run(main, flags_parser=booleans.flags_parser("run_classifier.py"))
  program.main("run_classifier.py", FLAGS, classify_flags,
               "bert_fin.finetune.classify.orchestration")

main() builds the program's frozen settings from the parsed flags once (flags_module.settings_of:
checked) and checks --output_dir before TensorFlow is imported (refusals are instant), then
imports the orchestration module, starts Horovod (--horovod) and runs its preflight on every rank:
a flag, model-input or data error found so far is one line `PROGRAM: error: ...` on stderr and
exit status 2. Then orchestration.run(settings, dist, plan) trains / evaluates / predicts.
"""
import contextlib
import importlib
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


def main(program, values, flags_module, orchestration_module):
  """Runs the program on parsed flag `values` (module docstring). program: its file name, the
  prefix of its error line; flags_module: its settings table (settings_of(values)); and
  orchestration_module: the dotted name of the module with preflight(settings, dist) and
  run(settings, dist, plan), imported only after the flag checks."""
  console_log.configure(values.verbose)  # before TensorFlow is imported
  with refusals(program):
    settings = flags_module.settings_of(values)  # before importing TensorFlow: instant refusals
    io_utils.check_output_dir(settings.output.output_dir, "--output_dir")
    xla_env.prepare(settings.execution.use_xla)
    orchestration = importlib.import_module(orchestration_module)
    from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
    dist = distributed.init(settings.distribution.horovod)
    plan = orchestration.preflight(settings, dist)
  orchestration.run(settings, dist, plan)
