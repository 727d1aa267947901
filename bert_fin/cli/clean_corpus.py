"""bert-fin-clean-corpus / tools/clean_corpus.py: raw HTML/text/JSONL -> clean JSONL documents.

  python tools/clean_corpus.py --output OUT.jsonl --stats STATS.json INPUT...
INPUT: files, directories (recursed) or glob patterns. Under `mpirun -np N` (several hosts sharing a
filesystem) the ranks clean the files and rank 0 writes the same output as one process.
"""
import json
import sys

from bert_fin import cli
from bert_fin import io_utils
from bert_fin import mpi
from bert_fin.text import clean
from bert_fin.text.dedup import clean_near_dup
from bert_fin.text import clean_ranks
from bert_fin.text import raw_documents
from bert_fin.text import filters
from bert_fin.text.dedup import seen_signatures


def build_parser():
  parser = cli.ArgumentParser(description=__doc__)
  parser.add_argument("inputs", nargs="+", metavar="INPUT",
                      help="HTML / text / JSONL files, directories (recursed) or globs")
  parser.add_argument("--output", required=True, help="clean JSON Lines output")
  parser.add_argument("--stats", default=None, help="stats JSON output (none: OUTPUT.stats.json)")
  parser.add_argument("--processes", type=int, default=1,
                      help="worker processes (the output is the same for any count)")
  parser.add_argument("--text_format", choices=raw_documents.TEXT_FORMATS,
                      default=clean.CleanConfig.text_format,
                      help="plain text files: blank-line separated documents (google-bert style), "
                           "one document per line, or one document per file")
  parser.add_argument("--text_field", default=clean.CleanConfig.text_field,
                      help="JSONL field holding the text")
  parser.add_argument("--min_chars", type=int, default=filters.FilterConfig.min_chars,
                      help="drop documents shorter than this many characters")
  parser.add_argument("--min_cjk_ratio", type=float, default=filters.FilterConfig.min_cjk_ratio,
                      help="drop documents whose share of CJK characters is below this")
  parser.add_argument("--min_noise_run", type=int, default=filters.FilterConfig.min_noise_run,
                      help="cut hash/base64/URL-like ASCII runs of at least this length (0: off)")
  parser.add_argument("--keep_urls", action="store_true", help="keep URLs in the text")
  parser.add_argument("--keep_duplicates", action="store_true",
                      help="keep exact duplicate documents")
  parser.add_argument("--boilerplate_min_docs", type=int,
                      default=filters.FilterConfig.boilerplate_min_docs,
                      help="drop lines that occur in at least this many documents (0: off; "
                           "costs a first pass)")
  parser.add_argument("--max_sentence_chars", type=int, default=clean.CleanConfig.max_sentence_chars,
                      help="cut longer sentences at ，、")
  parser.add_argument("--keep_html_boilerplate", action="store_true",
                      help="keep nav/header/footer/aside/form elements of HTML pages")
  parser.add_argument("--drop_tables", action="store_true", help="drop HTML tables")
  parser.add_argument("--seen_manifest", default=None, metavar="FILE",
                      help="skip documents whose content hash is in FILE (from earlier batches) "
                           "and append this batch's documents to it (created when missing)")
  parser.add_argument("--near_dup_threshold", type=float,
                      default=clean.CleanConfig.near_dup_threshold, metavar="J",
                      help="drop documents whose Jaccard similarity (character 5-grams; word "
                           "5-grams of Latin text; MinHash + LSH, checked exactly near J) with an "
                           "earlier document is >= J, keeping the first of each cluster (0: off; "
                           "recommended %s; with --seen_manifest earlier batches count too)"
                           % clean_near_dup.RECOMMENDED_THRESHOLD)
  parser.add_argument("--near_dup_num_perm", type=int, default=clean.CleanConfig.near_dup_num_perm,
                      help="MinHash permutations a document (more: a closer estimate, slower; "
                           "keep it the same for every batch of a --seen_manifest)")
  parser.add_argument("--near_dup_report", default=None, metavar="FILE",
                      help="write one JSON line per near duplicate removed: its id and source, the "
                           "kept document's, their estimated and exact similarity")
  parser.add_argument("--no_progress", action="store_true",
                      help="no progress bar on stderr")
  return parser


def config_from_args(args):
  return clean.CleanConfig(
      filter_config=filters.FilterConfig(min_noise_run=args.min_noise_run,
                                   remove_urls=not args.keep_urls,
                                   min_chars=args.min_chars,
                                   min_cjk_ratio=args.min_cjk_ratio,
                                   drop_duplicates=not args.keep_duplicates,
                                   boilerplate_min_docs=args.boilerplate_min_docs),
      text_format=args.text_format,
      text_field=args.text_field,
      max_sentence_chars=args.max_sentence_chars,
      drop_boilerplate_html=not args.keep_html_boilerplate,
      drop_tables=args.drop_tables,
      near_dup_threshold=args.near_dup_threshold,
      near_dup_num_perm=args.near_dup_num_perm)


def check_near_dup_flags(args):
  """One line naming the flag and the fix for a bad near-duplicate setting, or None."""
  if not 0.0 <= args.near_dup_threshold < 1.0:
    return ("--near_dup_threshold %s: give 0 (off) or a Jaccard similarity in (0, 1), "
            "e.g. %s" % (args.near_dup_threshold, clean_near_dup.RECOMMENDED_THRESHOLD))
  if not MIN_NUM_PERM <= args.near_dup_num_perm <= MAX_NUM_PERM:
    return "--near_dup_num_perm %d: give %d..%d (default %d)" % (
        args.near_dup_num_perm, MIN_NUM_PERM, MAX_NUM_PERM, clean.CleanConfig.near_dup_num_perm)
  if args.near_dup_report and not args.near_dup_threshold:
    return "--near_dup_report needs --near_dup_threshold > 0 (e.g. %s)" % (
        clean_near_dup.RECOMMENDED_THRESHOLD)
  return None


PROG = "clean_corpus"
MIN_NUM_PERM, MAX_NUM_PERM = 16, 1024


def main(argv=None):
  args = build_parser().parse_args(argv)
  if args.processes < 1:
    return cli.fail(PROG, "--processes must be >= 1")
  bad_near_dup = check_near_dup_flags(args)
  if bad_near_dup:
    return cli.fail(PROG, bad_near_dup)
  stats_path = args.stats or args.output + ".stats.json"
  try:
    world = mpi.world()

    def check_outputs():
      for flag, path in (("--output", args.output), ("--stats", stats_path),
                         ("--seen_manifest", args.seen_manifest),
                         ("--near_dup_report", args.near_dup_report)):
        if path:
          io_utils.check_output_files([path], flag)
      if args.seen_manifest and args.near_dup_threshold:
        seen_signatures.check_compatible(args.seen_manifest, args.near_dup_num_perm)

    world.settle("checking the output paths", check_outputs)
    if world.distributed:  # mpirun -np N: the ranks clean the files, rank 0 writes the output
      stats = clean_ranks.clean_corpus(world, args.inputs, args.output, stats_path,
                                       config_from_args(args), processes=args.processes,
                                       progress=not args.no_progress,
                                       seen_manifest_path=args.seen_manifest,
                                       near_dup_report=args.near_dup_report)
      if not world.is_root:
        return 0
    else:
      stats = clean.clean_corpus(args.inputs, args.output, stats_path, config_from_args(args),
                                 processes=args.processes, progress=not args.no_progress,
                                 seen_manifest_path=args.seen_manifest,
                                 near_dup_report=args.near_dup_report)
  except mpi.RankError as error:
    return cli.fail_ranks(PROG, error)
  except (OSError, ValueError) as error:
    return cli.fail(PROG, error)
  summary = {key: stats[key] for key in ("documents_in", "documents_out", "filtered",
                                         "characters_in", "characters_out", "decode_errors")}
  print(json.dumps(summary, ensure_ascii=False, sort_keys=True))
  print("wrote %s and %s" % (args.output, stats_path))
  return 0


if __name__ == "__main__":
  sys.exit(main())
