"""Argument parsing for the console scripts; tools/*.py are one-line shims onto these mains."""
import argparse
import sys

from bert_fin import io_utils

USAGE_ERROR = 2  # exit status of a user error (argparse's too)


class ArgumentParser(argparse.ArgumentParser):
  """argparse with bert_fin's form of a refusal: one line `prog: error: <message>` on stderr and
  exit status USAGE_ERROR (argparse's message names the option; --help shows the usage)."""

  def error(self, message):
    self.exit(USAGE_ERROR, "%s: error: %s\n" % (self.prog, " ".join(message.split())))


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
  """The module docstring as written, and "(default: ...)" after every option's help text."""


def fail(prog, error):
  """Prints `prog: error: <one line>` on stderr and returns USAGE_ERROR. error: a message, a
  ValueError, or an OSError (disk full, permission, ...: io_utils.os_error_message)."""
  message = io_utils.os_error_message(error) if isinstance(error, OSError) else str(error)
  print("%s: error: %s" % (prog, " ".join(message.split("\n"))), file=sys.stderr, flush=True)
  return USAGE_ERROR
