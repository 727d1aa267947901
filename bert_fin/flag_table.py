"""A program's settings as one typed table of frozen dataclasses, the source of its absl flags.

Each leaf field is declared once with `option(default, help, choices=None, origin=None,
at_least=None, above=None, at_most=None, below=None, required=False, unless=None, refused=None)`:
its name is the flag's name, its default the flag's default, its
type (str, bool, int, float, Optional[...] of these; List[str]: a comma-separated list flag;
Tuple[str, ...]: a repeatable flag, its values a tuple) the flag's kind (an enum when it has
choices), its help the flag's help, its bounds checked by check_bounds. A field whose
type is itself a dataclass is a group of settings (one concern: data, model, optimizer, ...) and
defines no flag of its own, so flag names are unique across the whole table.

    define_flags(Settings, flag_values)     one absl flag per leaf field, booleans read by
                                            bert_fin.booleans (true/false, t/f, 1/0, yes/no, y/n)
    from_flags(Settings, flag_values)       the parsed flags -> a (nested) Settings instance
    leaf_fields(Settings)                   [(path, field)] in table order, e.g.
                                            (("optimizer", "learning_rate"), Field(...))
    groups_by_origin(Settings, titles)      [(title, [flag names])] for --help, by field origin
    check_bounds(settings)                  ValueError naming the first flag outside its bounds,
                                            or a number the graph cannot hold (float flags:
                                            finite, within float32's range, 0 or not below
                                            its smallest normal; int flags: within int64)
    check_value(table, name, value)         the same for one value (a tool's own argument that
                                            is a program's flag: the program's bounds, its words)
    check_fields(settings)                  every declared check: the refused values
                                            (--use_tpu), "missing required flag(s): --A, --B",
                                            then check_bounds
    program_flags(Settings, titles)         (define_flags, flag_groups) of a program's flags
                                            module, for command_line.define_flags
    add_arguments(parser, table, names)     an argparse tool's arguments that are a program's
                                            flags, from the fields; check_arguments(table, args,
                                            names): their bounds once parsed

Used by create_pretraining_data (bert_fin/data/create/options.py, flat), run_pretraining
(bert_fin/training/settings.py, nested), run_classifier / run_ner / run_squad
(bert_fin/finetune/settings.py, nested, with each program's own group in finetune/classify/flags.py,
finetune/ner/flags.py, finetune/squad/flags.py) and extract_features (finetune/features/flags.py).
"""
import dataclasses
import math
import typing

from absl import flags
import numpy as np

from bert_fin import booleans

FLOAT32 = np.finfo(np.float32)
INT64 = np.iinfo(np.int64)
_DEFINE = {str: flags.DEFINE_string, bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
           float: flags.DEFINE_float, list: flags.DEFINE_list, tuple: flags.DEFINE_multi_string}


_BOUNDS = ("at_least", "above", "at_most", "below")


def option(default, help_text, choices=None, origin=None, at_least=None, above=None,
           at_most=None, below=None, required=False, unless=None, refused=None):
  """A dataclass field that is one flag.

  Args:
    default, help_text: the flag's default and help.
    choices: the allowed values (an enum flag), or None.
    origin: whose flag it is (a key of the titles --help groups by; None for a table without
      groups).
    at_least / above: the value's lower bound (value >= at_least / value > above; None: none);
    at_most / below: its upper bound (value <= at_most / value < below; None: none); checked by
      check_bounds (a None value is not checked).
    required: the flag must be given a value (not None, empty or 0); check_required says
      "missing required flag(s): --NAME, ..." for every one missing, in table order.
    unless: with required, what makes the flag not needed: another flag's name (its value
      stands in; the message says "--NAME (or --OTHER)"), or a function of the table's
      instance that returns True when the value comes from elsewhere (e.g. a transformers
      folder's config).
    refused: a message (one line, naming the flag) refusing a true value of the flag (google's
      --use_tpu); check_refused raises it.
  """
  return dataclasses.field(default=default, metadata={
      "help": help_text, "choices": choices, "origin": origin, "at_least": at_least,
      "above": above, "at_most": at_most, "below": below, "required": required,
      "unless": unless, "refused": refused})


def flag_type(field):
  """The Python type of a field's values: str, bool, int, float, list (a comma-separated list
  flag, typed List[str]) or tuple (a repeatable flag, typed Tuple[str, ...]); Optional[...]
  unwrapped."""
  args = [arg for arg in typing.get_args(field.type) if arg is not type(None)]
  value_type = args[0] if args else field.type
  return typing.get_origin(value_type) or value_type


def option_of(table, name, origin=None):
  """An option with the default, help and choices of `table`'s flag `name` (a flag two programs'
  tables share, declared once in one of them), under this table's `origin`."""
  metadata = dict(field_of(table, name).metadata)
  return option(field_of(table, name).default, metadata.pop("help"), metadata.pop("choices"),
                origin, **{key: value for key, value in metadata.items() if key != "origin"})


def field_of(table, name):
  """The dataclasses.Field of `table`'s flag `name` (KeyError for a name it has not)."""
  return dict((path[-1], field) for path, field in leaf_fields(table))[name]


def _is_group(field):
  return dataclasses.is_dataclass(field.type)


def _is_flag(field):
  """A leaf declared with option() (a field without its metadata, e.g. a program's record of
  the flags given, is no flag: from_flags leaves it at its default)."""
  return "help" in field.metadata


def leaf_fields(table, prefix=()):
  """[(path, field)] of every flag field of the dataclass `table`, depth first in table order."""
  result = []
  for field in dataclasses.fields(table):
    if _is_group(field):
      result.extend(leaf_fields(field.type, prefix + (field.name,)))
    elif _is_flag(field):
      result.append((prefix + (field.name,), field))
  return result


def flag_names(table):
  """Every flag name of the table, in table order."""
  return [path[-1] for path, _ in leaf_fields(table)]


def define_flags(table, flag_values):
  """One absl flag per leaf field of `table` on flag_values: enum when the field has choices,
  else by its type; booleans read by bert_fin.booleans."""
  for _, field in leaf_fields(table):
    help_text, choices = field.metadata["help"], field.metadata["choices"]
    if choices:
      flags.DEFINE_enum(field.name, field.default, list(choices), help_text,
                        flag_values=flag_values)
    else:
      _DEFINE[flag_type(field)](field.name, field.default, help_text, flag_values=flag_values)
  booleans.read_booleans_with_parse_bool(flag_values)
  return flag_values


def program_flags(table, titles):
  """(define_flags, flag_groups): the two functions a program's flags module offers
  (command_line.define_flags calls them), for the program whose settings are `table`.

  Args:
    table: the program's settings table (a dataclass of option() fields and groups).
    titles: {origin: title} in --help order (groups_by_origin).

  Returns:
    define_flags(flag_values=absl's FLAGS): one absl flag per leaf field on flag_values (a fresh
      FlagValues in tests), returned; flag_groups(): [(title, [flag names])] for --help.
  """

  def define_program_flags(flag_values=flags.FLAGS):
    return define_flags(table, flag_values)

  def program_flag_groups():
    return groups_by_origin(table, titles)

  return define_program_flags, program_flag_groups


def _split_list(text):
  return [part.strip() for part in text.split(",") if part.strip()]


def add_arguments(parser, table, names, defaults=None):
  """Adds to an argparse parser one argument per flag `names` of a program's `table`, declared
  by the field: the same name, type (bool: true/false as bert_fin.booleans reads it, a bare
  --NAME is true; List[str]: comma-separated), choices, help and default; a field required with
  nothing to stand in (no `unless`) is required by the parser too. The field's bounds are
  checked by check_arguments once the tool has parsed its arguments (its refusals' place).

  Args:
    parser: an argparse.ArgumentParser (a tool's, bert_fin.cli.ArgumentParser).
    table: the program's settings table the tool's arguments mean the same as.
    names: the flag names to add, in the order --help lists them.
    defaults: {name: default} where the tool's default differs from the program's (checked
      against the field's bounds here).

  Returns:
    parser.

  Raises:
    TypeError: a repeatable (Tuple[str, ...]) field: no tool takes one.
  """
  defaults = defaults or {}
  for name in names:
    field = field_of(table, name)
    default = defaults.get(name, field.default)
    _check(name, field, default)
    kind = flag_type(field)
    if kind is tuple:
      raise TypeError("--%s is a repeatable flag: add_arguments takes single values" % name)
    kwargs = {"nargs": "?", "const": True, "type": booleans.argparse_bool} if kind is bool else {
        "type": _split_list if kind is list else kind}
    if field.metadata["choices"]:
      kwargs["choices"] = list(field.metadata["choices"])
    required = bool(field.metadata.get("required")) and field.metadata.get("unless") is None
    parser.add_argument("--" + name, default=default, required=required,
                        help=field.metadata["help"], **kwargs)
  return parser


def check_arguments(table, args, names):
  """check_value of each argument `names` a tool took from `table` (add_arguments) in its
  parsed argparse namespace `args`: ValueError naming the first outside its field's bounds."""
  for name in names:
    check_value(table, name, getattr(args, name))


def from_flags(table, flag_values):
  """An instance of `table` holding the parsed value of each flag (groups built recursively)."""
  values = {}
  for field in dataclasses.fields(table):
    if _is_group(field):
      values[field.name] = from_flags(field.type, flag_values)
    elif _is_flag(field):
      value = flag_values[field.name].value
      if flag_type(field) is tuple and value is not None:
        value = tuple(value)  # absl's list of a repeated flag
      values[field.name] = value
  return table(**values)


def groups_by_origin(table, titles):
  """[(title, [flag names])] for command_line.install_help: titles is {origin: title} in --help
  order; each group lists its flags in table order."""
  fields = leaf_fields(table)
  unknown = {field.metadata["origin"] for _, field in fields} - set(titles)
  if unknown:
    raise ValueError("fields of unknown origin %s" % sorted(unknown))
  return [(title, [path[-1] for path, field in fields if field.metadata["origin"] == origin])
          for origin, title in titles.items()]


def values_by_name(instance):
  """{flag name: value} of an instance of a table (for checks that loop over flag names)."""
  result = {}
  for path, _ in leaf_fields(type(instance)):
    value = instance
    for name in path:
      value = getattr(value, name)
    result[path[-1]] = value
  return result


def representable_problem(value, kind):
  """Why the number `value` of a flag of type `kind` (float or int) cannot reach the float32 /
  int64 graph as given, or None: a float must be finite, at most float32's largest in magnitude,
  and 0 or at least float32's smallest normal (below it the graph reads 0 or a denormal); an int
  must lie within int64."""
  if kind is float:
    if not math.isfinite(value):
      return "must be a finite number"
    if abs(value) > FLOAT32.max:
      return "is beyond float32's range (at most %.6g in magnitude)" % FLOAT32.max
    if value and abs(value) < FLOAT32.tiny:
      return ("is below float32's smallest normal number %.6g (the graph would read 0 or a "
              "denormal)" % FLOAT32.tiny)
  elif kind is int and not INT64.min <= value <= INT64.max:
    return "is beyond int64's range"
  return None


def check_bounds(instance):
  """Raises ValueError for the first flag of an instance of a table, in table order, whose value
  representable_problem refuses ("--NAME=V must be a finite number ...") or that is outside the
  bounds its option() declares: "--NAME must be >= N, got V" (one bound; > N, <= N, < N alike) or
  "--NAME must be in [N, M), got V" (a lower and an upper bound)."""
  value_of = values_by_name(instance)
  for path, field in leaf_fields(type(instance)):
    _check(path[-1], field, value_of[path[-1]])


def check_refused(instance):
  """Raises ValueError with the `refused=` message of the first flag, in table order, that
  declares one and holds a true value (google's --use_tpu)."""
  value_of = values_by_name(instance)
  for path, field in leaf_fields(type(instance)):
    if field.metadata.get("refused") and value_of[path[-1]]:
      raise ValueError(field.metadata["refused"])


def required_names(table):
  """The names of `table`'s flags declared option(required=True), in table order."""
  return [path[-1] for path, field in leaf_fields(table) if field.metadata.get("required")]


def missing_required(instance):
  """["--NAME" or "--NAME (or --OTHER)"] of the required flags (option(required=True)) of an
  instance of a table that hold no value and whose `unless` does not stand in, in table order."""
  value_of, missing = values_by_name(instance), []
  for path, field in leaf_fields(type(instance)):
    name, unless = path[-1], field.metadata.get("unless")
    if not field.metadata.get("required") or value_of[name]:
      continue
    if isinstance(unless, str):
      if not value_of[unless]:
        missing.append("--%s (or --%s)" % (name, unless))
    elif unless is None or not unless(instance):
      missing.append("--" + name)
  return missing


def check_choices(instance):
  """Raises ValueError "--NAME must be one of (...)" for the first flag of an instance of a
  table, in table order, whose value (None: unchecked) is not one of its choices (an instance
  built in code, e.g. create_pretraining_data's make_options: absl's enum flags check theirs)."""
  value_of = values_by_name(instance)
  for path, field in leaf_fields(type(instance)):
    choices, value = field.metadata["choices"], value_of[path[-1]]
    if choices and value is not None and value not in choices:
      raise ValueError("--%s must be one of %s" % (path[-1], tuple(choices)))


def check_fields(instance):
  """Every check an instance of a table's fields declare, in this order: check_refused, then
  "missing required flag(s): --A, --B" (missing_required), then check_choices and check_bounds.
  Raises ValueError (one line, naming the flag)."""
  check_refused(instance)
  missing = missing_required(instance)
  if missing:
    raise ValueError("missing required flag(s): %s" % ", ".join(missing))
  check_choices(instance)
  check_bounds(instance)


def check_value(table, name, value):
  """check_bounds for one value of `table`'s flag `name` (an argparse tool's argument that is a
  program's flag: the program's bounds and message, stated once). Raises ValueError."""
  _check(name, field_of(table, name), value)


def _check(name, field, value):
  """ValueError when value (None: unchecked) cannot reach the graph as given or is outside the
  field's declared bounds."""
  at_least, above, at_most, below = (field.metadata.get(bound) for bound in _BOUNDS)
  if value is None:
    return
  problem = representable_problem(value, flag_type(field))
  if problem:
    raise ValueError("--%s=%s %s" % (name, _shown(value), problem))
  low_ok = (at_least is None or value >= at_least) and (above is None or value > above)
  high_ok = (at_most is None or value <= at_most) and (below is None or value < below)
  if low_ok and high_ok:
    return
  low = ("[%s" % _shown(at_least) if at_least is not None else
         "(%s" % _shown(above) if above is not None else None)
  high = ("%s]" % _shown(at_most) if at_most is not None else
          "%s)" % _shown(below) if below is not None else None)
  if low and high:
    wanted = "in %s, %s" % (low, high)
  else:
    wanted = {"[": ">= ", "(": "> ", "]": "<= ", ")": "< "}[(low or high)[0 if low else -1]] + (
        low[1:] if low else high[:-1])
  raise ValueError("--%s must be %s, got %s" % (name, wanted, _shown(value)))


def _shown(value):
  return "%g" % value if isinstance(value, float) else str(value)
