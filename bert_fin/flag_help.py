"""--help for absl programs whose flags live in library modules: every flag, grouped, with defaults.

absl's --help lists only the flags defined in the __main__ module ("Try --helpfull"), so a
program that defines its flags in bert_fin/... shows none; --helpfull buries them among absl's
own. `install(flag_values, groups, doc)` replaces --help (and -?, --helpshort) with a listing of
the program's flags by group: name, help text and default, then exits with status 0.
"""
import sys
import textwrap

from absl import app
from absl import flags

HELP_NAMES = (("help", "?"), ("helpshort", None))


def groups(titled_definers):
  """[(title, [flag names])] from [(title, define(flag_values))]: each definer is run on a fresh
  FlagValues, so the names come from the definitions themselves."""
  result = []
  for title, define in titled_definers:
    fresh = flags.FlagValues()
    define(fresh)
    result.append((title, [name for name in fresh if fresh[name].name == name]))
  return result


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


def install(flag_values, groups, doc):
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
