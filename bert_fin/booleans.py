"""The one reading of a boolean value on bert_fin's command lines, argparse and absl programs alike.

    parse_bool("True") -> True    parse_bool("0") -> False    parse_bool("ture") -> ValueError

TRUE_WORDS and FALSE_WORDS, in any case, are the only spellings: anything else is refused with the
accepted spellings named, never read as False. absl's own BooleanParser knows true/t/1 and
false/f/0 (a superset is kept here: the argparse tools accepted yes/no too).

argparse tools: `type=argparse_bool`. absl programs: read_booleans_with_parse_bool(flag_values)
(command_line.flags_parser calls it), which reads every boolean flag (--name=VALUE; --name /
--noname as before) with parse_bool.
"""
import argparse

from absl import flags

TRUE_WORDS = ("true", "t", "1", "yes", "y")
FALSE_WORDS = ("false", "f", "0", "no", "n")


def parse_bool(text):
  """The bool that text spells.

  Args:
    text: a string (any case, surrounding spaces ignored) or a bool (passes through).

  Returns:
    True for TRUE_WORDS, False for FALSE_WORDS.

  Raises:
    ValueError: naming the accepted spellings, for anything else.
  """
  if isinstance(text, bool):
    return text
  value = str(text).strip().lower()
  if value in TRUE_WORDS:
    return True
  if value in FALSE_WORDS:
    return False
  raise ValueError("expected true or false (or %s), got %r" % (
      ", ".join("%s/%s" % pair for pair in zip(TRUE_WORDS[1:], FALSE_WORDS[1:])), text))


def argparse_bool(text):
  """parse_bool as an argparse `type=`: argparse names the option in its error.

  Raises:
    argparse.ArgumentTypeError: parse_bool's message.
  """
  try:
    return parse_bool(text)
  except ValueError as e:
    raise argparse.ArgumentTypeError(str(e)) from None


class AbslBooleanParser(flags.BooleanParser):
  """absl's boolean flag parser reading values with parse_bool (absl's ints 0 and 1 kept)."""

  def parse(self, argument):
    if isinstance(argument, int) and not isinstance(argument, bool) and argument in (0, 1):
      return bool(argument)
    return parse_bool(argument)


def read_booleans_with_parse_bool(flag_values):
  """Gives every boolean flag of flag_values (an absl FlagValues) the AbslBooleanParser."""
  for name in flag_values:
    flag = flag_values[name]
    if flag.boolean:
      flag.parser = AbslBooleanParser()
