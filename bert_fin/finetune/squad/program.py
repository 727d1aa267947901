"""run_squad.py's command line, top to bottom: flags checked, the JSON files read and checked,
then TensorFlow, the model inputs and the windows (orchestration.preflight), then training and
predictions (orchestration.run).

  FLAGS = finetune.program.define_flags(squad.flags, __doc__)   # in run_squad.py
  squad.program.main(FLAGS)

Everything up to the first graph raises ValueError / IOError, printed as one line
`run_squad.py: error: ...` with exit status 2 (finetune/program.py's refusals) before anything is
written to --output_dir; a bad flag or data file is refused before TensorFlow is even imported.
"""
from bert_fin import console_log
from bert_fin import io_utils
from bert_fin.finetune import program as finetune_program
from bert_fin.finetune.squad import data
from bert_fin.finetune.squad import flags as squad_flags
from bert_fin.training import xla_env

PROGRAM = "run_squad.py"


def main(values):
  """Runs run_squad on parsed flag `values` (module docstring)."""
  console_log.configure(values.verbose)  # before TensorFlow is imported
  with finetune_program.refusals(PROGRAM):
    settings = squad_flags.settings_of(values)
    io_utils.check_output_dir(settings.output.output_dir, "--output_dir")
    inputs = data.read_inputs(settings)
    xla_env.prepare(settings.execution.use_xla)
    from bert_fin.finetune.squad import orchestration  # pylint: disable=g-import-not-at-top
    from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
    dist = distributed.init(settings.distribution.horovod)
    plan = orchestration.preflight(settings, dist, inputs)
  return orchestration.run(plan, dist)
