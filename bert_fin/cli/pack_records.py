"""bert-fin-pack-records / tools/pack_records.py: unpacked pretraining records -> packed records.

  python tools/pack_records.py --input_file 'records/train-*.tfrecord' \
      --output_file packed/train --num_output_files 16 --max_sequences_per_pack 3

Reads bert_fin's records (input_len), google's (input_mask) or dynamic-masking ones
(create_pretraining_data --masking=dynamic: word_starts, packed like the tokens; the masks are
drawn while training); their max_seq_length and max_predictions_per_seq come from the records. Writes PREFIX-0000i-of-0000N.tfrecord
(packed layout: records/schema.py) and PREFIX.stats.json (packing efficiency, padding before and
after, average sequences per pack, sequences in == out). Deterministic for a --random_seed;
memory bounded by --window_size. Bad input: one line on stderr, exit status 2, nothing written.
Under `mpirun -np N` (several hosts sharing a filesystem) the ranks divide the files and windows and
rank 0 writes the same files as one process.
"""
import argparse

from bert_fin import cli
from bert_fin import mpi
from bert_fin.data.packing import pack_files
from bert_fin.data.packing import pack_ranks
from bert_fin.data.packing import plans


def build_parser():
  parser = cli.ArgumentParser(prog="pack_records", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--input_file", required=True,
                      help="comma-separated globs of unpacked TFRecord files")
  parser.add_argument("--output_file", required=True,
                      help="output prefix (or a comma-separated list of output files)")
  parser.add_argument("--num_output_files", type=int, default=1,
                      help="write PREFIX-0000i-of-0000N.tfrecord files (default: %(default)s)")
  parser.add_argument("--max_sequences_per_pack", type=int,
                      default=plans.DEFAULT_MAX_SEQUENCES_PER_PACK,
                      help="K, the most sequences one packed row holds (default: %(default)s)")
  parser.add_argument("--algorithm", choices=plans.PLANNERS, default=plans.DEFAULT_ALGORITHM,
                      help="histogram packing planner (default: %(default)s)")
  parser.add_argument("--random_seed", type=int, default=12345,
                      help="seed of the sequence-to-pack assignment and the pack order "
                           "(default: %(default)s)")
  parser.add_argument("--window_size", type=int, default=pack_files.DEFAULT_WINDOW_SIZE,
                      help="sequences packed together (bounds memory) (default: %(default)s)")
  return parser


def main(argv=None):
  args = cli.parse_args(build_parser(), argv)
  arguments = (args.input_file, args.output_file, args.num_output_files,
               args.max_sequences_per_pack, args.algorithm, args.random_seed, args.window_size)
  try:
    world = mpi.world()
    if world.distributed:  # mpirun -np N: the ranks pack the windows, rank 0 writes the output
      stats = pack_ranks.pack_files_on_ranks(world, *arguments)
      if not world.is_root:
        return 0
    else:
      stats = pack_files.pack_files(*arguments)
  except mpi.RankError as e:
    return cli.fail_ranks("pack_records", e)
  except (ValueError, OSError) as e:
    return cli.fail("pack_records", e)
  print("pack_records: %d sequences -> %d packs (%.3f sequences a pack), packing efficiency "
        "%.4f, padding %.1f%% -> %.1f%%" % (
            stats["sequences_in"], stats["packs"], stats["average_sequences_per_pack"],
            stats["packing_efficiency"], 100 * stats["padding_fraction_before"],
            100 * stats["padding_fraction_after"]))
  return 0
