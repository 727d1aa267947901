"""Argument parsing for the console scripts; tools/*.py are one-line shims onto these mains."""
import argparse
import os

from bert_fin import command_line
from bert_fin import console_log
from bert_fin import mpi
from bert_fin.interop import hf_files

USAGE_ERROR = command_line.USAGE_ERROR  # exit status of a user error (argparse's too)
# the files beside a checkpoint in google's release layout (and in a run_distill --output_dir)
CONFIG_NAME, VOCAB_NAME = "bert_config.json", hf_files.VOCAB_FILE


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
  """The module docstring as written, and "(default: ...)" after every option's help text."""


class ArgumentParser(argparse.ArgumentParser):
  """argparse with bert_fin's form of a refusal: one line `prog: error: <message>` on stderr and
  exit status USAGE_ERROR (argparse's message names the option; --help shows the usage), and
  HelpFormatter's --help unless formatter_class says otherwise."""

  def __init__(self, *args, formatter_class=HelpFormatter, **kwargs):
    super().__init__(*args, formatter_class=formatter_class, **kwargs)

  def error(self, message):
    self.exit(USAGE_ERROR, command_line.refusal_line(self.prog, " ".join(message.split())) + "\n")


def parse_args(parser, argv=None):
  """The arguments of argv (None: sys.argv[1:]) parsed by `parser` with --verbose added as its
  last option (console_log.add_argument; a tool's build_parser() leaves it out), the process's
  console output set from it at once (console_log.configure): a program's first step, before it
  imports TensorFlow. Call it once a parser."""
  console_log.add_argument(parser)
  args = parser.parse_args(argv)
  console_log.configure(args.verbose)
  return args


def fail(prog, error):
  """Prints `prog: error: <one line>` on stderr (command_line.say: every program's one form of a
  refusal) and returns USAGE_ERROR. error: a message, a ValueError, or an OSError (disk full,
  permission, ...: io_utils.os_error_message)."""
  return command_line.say(prog, error)


def fail_ranks(prog, error):
  """A data tool's mpi.RankError under mpirun, said once (rank 0) as fail() says it; returns its
  exit status for every rank (error.status: 2 for user errors)."""
  if mpi.world().is_root:
    command_line.say(prog, error)
  return error.status


def beside(path, name):
  """The file `name` beside a checkpoint (path: its directory, or a prefix in it), None when
  there is none (or no path)."""
  if not path:
    return None
  directory = path if os.path.isdir(path) else os.path.dirname(path)
  candidate = os.path.join(directory, name)
  return candidate if os.path.isfile(candidate) else None


def model_files(args, source, source_flag):
  """args with --bert_config_file and --vocab_file, each not given, taken from the file beside
  `source` (beside(): CONFIG_NAME, VOCAB_NAME), as compare_checkpoints finds them; ValueError
  (one line) naming the flag when neither gives it."""
  for flag, name in (("bert_config_file", CONFIG_NAME), ("vocab_file", VOCAB_NAME)):
    if getattr(args, flag) is None:
      found = beside(source, name)
      if found is None:
        raise ValueError("--%s not given and %s %s has no %s beside it: pass --%s" % (
            flag, source_flag, source, name, flag))
      setattr(args, flag, found)
  return args
