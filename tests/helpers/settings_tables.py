"""The check every settings-table test makes (bert_fin/flag_table.py): each leaf field of a table
is exactly one defined flag with its default, help, choices and type, in one concern."""
import dataclasses

from bert_fin import flag_table


def assert_every_field_is_exactly_one_flag(table, values, names):
  """table: a settings dataclass; values: the absl FlagValues its flags were defined on; names:
  the flag names defined there (no short names)."""
  fields = flag_table.leaf_fields(table)
  assert len(names) == len(fields) == len(set(names))  # one flag a field, no name twice
  assert sorted(names) == sorted(path[-1] for path, _ in fields)
  for path, field in fields:
    flag = values[path[-1]]
    assert flag.default == field.default, path
    choices = field.metadata["choices"]
    if choices:
      assert list(flag.parser.enum_values) == list(choices), path
      assert flag.help == "<%s>: %s" % ("|".join(choices), field.metadata["help"]), path
    elif flag_table.flag_type(field) is tuple:  # absl says how to repeat it
      assert flag.help.startswith(field.metadata["help"] + ";"), path
      assert "repeat this option" in flag.help, path
    else:
      assert flag.help == field.metadata["help"], path
    assert isinstance(flag.default, (flag_table.flag_type(field), type(None))), path
    assert len(path) == 2 and path[0] in [f.name for f in dataclasses.fields(table)], path
