"""Argument parsing for the console scripts; tools/*.py are one-line shims onto these mains."""
import argparse
import sys

from bert_fin import io_utils

USAGE_ERROR = 2  # exit status of a user error (argparse's too)


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
  """The module docstring as written, and "(default: ...)" after every option's help text."""


def fail(prog, error):
  """Prints `prog: error: <one line>` on stderr and returns USAGE_ERROR. error: a message, a
  ValueError, or an OSError (disk full, permission, ...: io_utils.os_error_message)."""
  message = io_utils.os_error_message(error) if isinstance(error, OSError) else str(error)
  print("%s: error: %s" % (prog, " ".join(message.split("\n"))), file=sys.stderr, flush=True)
  return USAGE_ERROR


def parse_bool(text):
  """google-style boolean option values: true/false, 1/0, yes/no (any case); an
  argparse.ArgumentTypeError otherwise."""
  value = str(text).strip().lower()
  if value in ("true", "1", "yes", "t", "y"):
    return True
  if value in ("false", "0", "no", "f", "n"):
    return False
  raise argparse.ArgumentTypeError("expected true or false, got %r" % text)
