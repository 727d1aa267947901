# coding=utf-8
"""Creates masked-LM (+ next-sentence) TFRecords for run_pretraining.py.

google-research/bert's flags with the same defaults, plus bert_fin's (sharding, whole-word masking
with jieba/rjieba and a user dictionary, RoBERTa objective, multiprocess fast mode, faithful mode).
Every flag is generated from a field of bert_fin.data.create.options.Options (same name, default, help and
choices: stated once, there); see bert_fin.data.create.fast for the contract. Under `mpirun -np N` the
ranks share the work and write the same files as one process (bert_fin.data.multihost.create_ranks).
"""
import logging
import sys

from absl import app
from absl import flags

from bert_fin import cli
from bert_fin import command_line
from bert_fin import console_log
from bert_fin import flag_table
from bert_fin import mpi
from bert_fin.data.create import fast
from bert_fin.data.create import options as options_lib
from bert_fin.data.multihost import create_ranks

FLAGS = flags.FLAGS

def define_flags(flag_values=FLAGS):
  """One absl flag per Options field (bert_fin/flag_table.py): enum when the field has choices,
  else by its type; booleans read by bert_fin.booleans (true/false, t/f, 1/0, yes/no, y/n;
  anything else refused)."""
  flag_table.define_flags(options_lib.Options, flag_values)


def flag_groups():
  """[(title, names)] for --help: the Options fields' first block is google's, up to
  short_seq_prob (bert_fin/data/create/options.py); the rest are bert_fin's."""
  first_ours = options_lib.NAMES.index("short_seq_prob") + 1
  return [("google-research/bert create_pretraining_data.py", list(options_lib.NAMES[:first_ours])),
          ("bert_fin", list(options_lib.NAMES[first_ours:]))]


define_flags()
console_log.define_flag(FLAGS)
command_line.install_help(FLAGS, flag_groups() + [console_log.FLAG_GROUP], __doc__)


def options_from_flags(flag_values=FLAGS):
  """Options from the parsed absl flags (every Options field is a flag of the same name, with the
  same default); flags not given keep make_options' defaults (--masking=dynamic's dupe_factor)."""
  return options_lib.make_options(**{name: flag_values[name].value for name in options_lib.NAMES
                                     if flag_values[name].present})


def main(_):
  console_log.configure(FLAGS.verbose)
  logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
  try:
    world = mpi.world()
    if world.distributed:  # mpirun -np N: the ranks share the work, rank 0 writes the output
      create_ranks.run(options_from_flags(), world)
    else:
      fast.run(options_from_flags())
  except mpi.RankError as e:
    sys.exit(cli.fail_ranks("create_pretraining_data", e))
  except (ValueError, OSError, RuntimeError) as e:
    sys.exit(cli.fail("create_pretraining_data", e))


def console_main():
  flags.mark_flags_as_required(flag_table.required_names(options_lib.Options))
  app.run(main, flags_parser=command_line.flags_parser("create_pretraining_data"))


if __name__ == "__main__":
  console_main()
