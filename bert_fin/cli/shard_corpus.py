"""bert-fin-shard-corpus / tools/shard_corpus.py: clean JSONL -> N shuffled shards of equal size.

  python tools/shard_corpus.py --num_shards N --output_prefix PREFIX INPUT.jsonl...
Writes PREFIX-00000-of-0000N.jsonl ... and PREFIX.stats.json.
"""
import json
import sys

from bert_fin import cli
from bert_fin import io_utils
from bert_fin.text import raw_documents
from bert_fin.text import shard


def build_parser():
  parser = cli.ArgumentParser(description=__doc__)
  parser.add_argument("inputs", nargs="+", metavar="INPUT.jsonl", help="clean JSON Lines corpus files")
  parser.add_argument("--num_shards", type=int, required=True,
                      help="number of output shards (a multiple of the worker count)")
  parser.add_argument("--output_prefix", required=True,
                      help="shards are written as PREFIX-0000i-of-0000N.jsonl")
  parser.add_argument("--seed", type=int, default=12345,
                      help="seed of the document-level shuffle")
  parser.add_argument("--bucket_mb", type=int, default=256,
                      help="size of one in-memory shuffle bucket (bounds the memory used)")
  return parser


PROG = "shard_corpus"


def main(argv=None):
  args = build_parser().parse_args(argv)
  if args.num_shards < 1:
    return cli.fail(PROG, "--num_shards must be >= 1")
  uneven = shard.uneven_worker_counts(args.num_shards)
  if uneven:
    print("warning: --num_shards=%d is not a multiple of %s workers; training with those worker "
          "counts will refuse the uneven split" % (args.num_shards, "/".join(map(str, uneven))),
          file=sys.stderr)
  stats_path = args.output_prefix + ".stats.json"
  try:
    io_utils.check_output_files([shard.shard_path(args.output_prefix, i, args.num_shards)
                                 for i in range(args.num_shards)] + [stats_path],
                                "--output_prefix")
    inputs = raw_documents.expand_inputs(args.inputs)
    summary = shard.shard_corpus(inputs, args.output_prefix, args.num_shards, seed=args.seed,
                                 bucket_bytes=args.bucket_mb << 20)
    io_utils.write_json_atomic(stats_path, summary)
  except (OSError, ValueError) as error:
    return cli.fail(PROG, error)
  chars = summary["shard_characters"]
  print(json.dumps({"documents": summary["documents"], "characters": summary["characters"],
                    "bad_lines": summary["bad_lines"], "min_shard_chars": min(chars),
                    "max_shard_chars": max(chars)}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
