"""Argument parsing for the console scripts; tools/*.py are one-line shims onto these mains."""
import argparse

from bert_fin import command_line
from bert_fin import console_log
from bert_fin import mpi

USAGE_ERROR = command_line.USAGE_ERROR  # exit status of a user error (argparse's too)


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
