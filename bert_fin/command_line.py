"""What every program's command line shares: its flags (a settings table's, --verbose, --help by
origin) and the one form of a refusal, `PROGRAM: error: <one line>` on stderr and exit status 2.

--help: absl's lists only the flags defined in the __main__ module ("Try --helpfull"), so a
program that defines its flags in bert_fin/... would show none, and --helpfull buries them among
absl's own. install_help(flag_values, groups, doc) replaces --help (and -?, --helpshort) with a
listing of the program's flags by group: name, help text and default, then exits with status 0.

Each program (run_pretraining.py, run_classifier.py, run_ner.py, run_squad.py,
extract_features.py; the argparse tools through cli.fail) reads top to bottom:

  FLAGS = command_line.define_flags(xxx_flags, __doc__)
  def main(_):
    console_log.configure(FLAGS.verbose)          # before TensorFlow is imported
    with command_line.refusals(PROGRAM):          # ValueError / OSError: one line, exit 2
      settings = ...                              # flags checked, instant, no TensorFlow yet
      dist = distributed.init(...)                # TensorFlow from here on
      plan = orchestration.preflight(settings, dist)   # every file read and checked
    orchestration.run(...)                        # estimator.train / evaluate / predict
  def console_main():
    app.run(main, flags_parser=command_line.flags_parser(PROGRAM))   # flag errors: refused too
"""
import contextlib
import sys
import textwrap

from absl import app
from absl import flags

from bert_fin import booleans
from bert_fin import console_log
from bert_fin import io_utils

USAGE_ERROR = 2  # exit status of a refusal (argparse's too)
HELP_NAMES = (("help", "?"), ("helpshort", None))


def define_flags(flags_module, doc):
  """flags_module.define_flags() (on absl's global FLAGS) plus --verbose, with --help grouped by
  flags_module.flag_groups() and `doc` (the program's docstring). Returns the FlagValues."""
  values = flags_module.define_flags()
  console_log.define_flag(values)
  install_help(values, flags_module.flag_groups() + [console_log.FLAG_GROUP], doc)
  return values


def flags_parser(program, flag_values=flags.FLAGS):
  """The argv parser of a program's absl app.run(main, flags_parser=...).

  Args:
    program: the program's name, for the message.
    flag_values: the absl FlagValues to parse into (default flags.FLAGS).

  Returns:
    parse(argv): parses argv into flag_values, its booleans read with booleans.parse_bool, and
    returns the remaining arguments; a flag error (a bad value, an unknown flag, a missing
    required flag) is refused: `program: error: <absl's message>` (one line), exit 2.
  """

  def parse(argv):
    booleans.read_booleans_with_parse_bool(flag_values)
    try:
      return flag_values(argv)
    except flags.Error as e:
      refuse(program, " ".join(str(e).split()))

  return parse


def refusal_line(program, error, rank=0):
  """`PROGRAM: error: [rank R: ]MESSAGE` on one line (without its newline).

  Args:
    program: the program's name as its user typed it ("run_classifier.py", "bert-fin-...").
    error: a message, a ValueError, or an OSError (io_utils.os_error_message: `path: reason`).
    rank: the process that met the error under mpirun; 0 (the chief, or no mpirun) is not named.
  """
  message = io_utils.os_error_message(error) if isinstance(error, OSError) else str(error)
  return "%s: error: %s%s" % (program, "rank %d: " % rank if rank else "",
                              " ".join(message.split("\n")))


def say(program, error, rank=0):
  """Prints refusal_line(program, error, rank) on stderr; returns USAGE_ERROR (an argparse
  tool's main returns it)."""
  print(refusal_line(program, error, rank), file=sys.stderr, flush=True)
  return USAGE_ERROR


def refuse(program, error, rank=0, print_it=True):
  """Ends the process with status USAGE_ERROR, after say() when print_it (under mpirun the rank
  that says an error every rank met is rank 0 alone)."""
  if print_it:
    say(program, error, rank)
  sys.exit(USAGE_ERROR)


@contextlib.contextmanager
def refusals(program, print_it=True):
  """A ValueError or OSError raised in the block (a flag, model-input or data error) becomes
  refuse(program, error, print_it=print_it)."""
  try:
    yield
  except (ValueError, OSError) as e:
    refuse(program, e, print_it=print_it)


def describe_flag(flag):
  """'  --[no]name: help (default: ...)' wrapped to 100 columns (absl puts an enum's choices
  at the start of its help)."""
  name = "--[no]%s" % flag.name if flag.boolean else "--%s" % flag.name
  default = "none" if flag.default is None else flag.default_as_str
  text = "%s: %s (default: %s)" % (name, flag.help, default)
  return textwrap.fill(text, width=100, initial_indent="  ", subsequent_indent="      ")


def format_help(flag_values, groups, doc):
  """The whole --help text: doc, then one section a group, then where absl's flags are listed."""
  sections = [doc.strip(), ""]
  for title, names in groups:
    sections.append("%s flags:" % title)
    sections.extend(describe_flag(flag_values[name]) for name in names)
    sections.append("")
  sections.append("absl's own flags (logging, --flagfile, ...): --helpfull")
  return "\n".join(sections) + "\n"


class _GroupedHelpFlag(flags.BooleanFlag):
  """A --help that prints format_help(...) on stdout and exits 0."""

  def __init__(self, name, short_name, render):
    super().__init__(name, False, "show this program's flags and exit", short_name=short_name,
                     allow_hide_cpp=True)
    self._render = render

  def parse(self, argument):
    if self._parse(argument):
      sys.stdout.write(self._render())
      sys.stdout.flush()
      sys.exit(0)


def install_help(flag_values, groups, doc):
  """Makes --help / -? / --helpshort list `groups` ([(title, [flag names])]) on flag_values.

  On absl's global FLAGS, absl's help flags are registered first (app.run would add them later)
  and the short ones replaced; --helpfull keeps absl's full listing.
  """
  if flag_values is flags.FLAGS:
    app.define_help_flags()
  for name, short_name in HELP_NAMES:
    for key in (name, short_name):
      if key and key in flag_values:
        delattr(flag_values, key)
    flags.DEFINE_flag(_GroupedHelpFlag(name, short_name,
                                       lambda: format_help(flag_values, groups, doc)),
                      flag_values=flag_values)
