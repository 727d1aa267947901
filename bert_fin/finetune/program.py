"""What the fine-tuning programs' command lines check before TensorFlow (run_classifier.py,
run_ner.py, run_squad.py; their shape and refusals: bert_fin/command_line.py).

Each program's main reads top to bottom:

  console_log.configure(FLAGS.verbose)                  # before TensorFlow is imported
  with command_line.refusals(PROGRAM):                  # ValueError / OSError: one line, exit 2
    settings = program.checked(classify_flags.settings_of(FLAGS))   # instant, no TensorFlow yet
    from bert_fin.finetune.classify import orchestration             # TensorFlow from here on
    dist = distributed.init(settings.distribution.horovod)
    plan = orchestration.preflight(settings, dist)      # every file read and checked, every rank
  orchestration.run(settings, dist, plan)               # estimator.train / evaluate / predict
"""
from bert_fin import io_utils
from bert_fin.training import xla_env


def checked(settings):
  """settings (a program's checked table) after the checks that need no TensorFlow: --output_dir
  usable (ValueError otherwise) and XLA's environment set (before TensorFlow reads it)."""
  io_utils.check_output_dir(settings.output.output_dir, "--output_dir")
  xla_env.prepare(settings.execution.use_xla)
  return settings
