"""bert-fin-adapt-vocab / tools/adapt_vocab.py: a checkpoint's vocab adapted to a domain corpus.

  python tools/adapt_vocab.py --init_checkpoint=base/bert_model.ckpt --vocab_file=base/vocab.txt \\
      --bert_config_file=base/bert_config.json --input_file='corpus/*.jsonl' --output_dir=adapted

Counts what the checkpoint's tokenizer (FullTokenizer's pieces, --do_lower_case) turns into [UNK]
over the corpus (create_pretraining_data's formats: clean_corpus JSON Lines or google's text; a
comma list of globs), and writes into --output_dir:
  vocab.txt          the base vocab with the most frequent missing pieces (count >= --min_count,
                     at most --max_new_tokens) in its [unusedN] slots first, then appended at the
                     end (unless --no_append), padded with new [unusedN] to a multiple of 8;
  model.ckpt.*       the checkpoint with bert/embeddings/word_embeddings and
                     cls/predictions/output_bias grown to the new vocab (rows of old ids bit for
                     bit; new rows: --new_row_init) and without training state (optimizer slots,
                     global_step: the output is an --init_checkpoint, not a run to resume);
                     a `checkpoint` file, so the directory itself works as a checkpoint path;
  bert_config.json   the base config with the new vocab_size;
  unk_pieces.tsv     every missing piece: count, characters, where it went (or why not);
  unk_words.tsv      the [UNK] words with their counts; adapt_report.json: the figures.
What a "piece" is: WordPiece gives [UNK] for a whole word when one of its characters lacks its
piece: the character itself at a word's start (a CJK character is always a word of its own;
punctuation such as ‰ too), "##" + character inside a word (25℃ needs ##℃); adding those pieces
makes the words tokenize (tokenization/unk_census.py). Ids of existing tokens never change.
Prints the corpus [UNK] rate before and after (re-tokenized with the new vocab). A bad input is
one line on stderr and exit status 2, before anything is written; outputs appear whole.
"""
import json
import os
import sys

from bert_fin import booleans
from bert_fin import cli
from bert_fin import flag_table
from bert_fin import io_utils
from bert_fin.data.create import options as create_options
from bert_fin.data.create import sentence_documents
from bert_fin.guard import untrusted
from bert_fin.tokenization import adapt
from bert_fin.tokenization import fast
from bert_fin.tokenization import special_tokens
from bert_fin.tokenization import unk_census
from bert_fin.tokenization import vocab as vocab_lib

PROG = "adapt_vocab"
CKPT_NAME, CONFIG_NAME, VOCAB_NAME = "model.ckpt", "bert_config.json", "vocab.txt"
REPORT_NAME, PIECES_NAME, WORDS_NAME = "adapt_report.json", "unk_pieces.tsv", "unk_words.tsv"
OUTPUT_NAMES = (CKPT_NAME + ".index", CKPT_NAME + ".data-00000-of-00001", "checkpoint",
                CONFIG_NAME, VOCAB_NAME, REPORT_NAME, PIECES_NAME, WORDS_NAME)


def build_parser():
  parser = cli.ArgumentParser(prog=PROG, description=__doc__)
  parser.add_argument("--init_checkpoint", required=True,
                      help="checkpoint prefix (google's bert_model.ckpt) or a directory")
  parser.add_argument("--vocab_file", required=True, help="the vocab the checkpoint was trained "
                                                          "with")
  parser.add_argument("--bert_config_file", required=True, help="the checkpoint's config")
  # the corpus as create_pretraining_data reads it: its fields
  flag_table.add_arguments(parser, create_options.Options, ("input_file", "input_format"))
  parser.add_argument("--output_dir", required=True, help="where the outputs go (must not hold "
                                                          "them already)")
  flag_table.add_arguments(parser, create_options.Options, ("do_lower_case",))
  parser.add_argument("--min_count", type=int, default=3,
                      help="a missing piece needs this many occurrences to be added")
  parser.add_argument("--max_new_tokens", type=int, default=1000,
                      help="add at most this many pieces (slots + appended; 0: no limit)")
  parser.add_argument("--append", type=booleans.argparse_bool, default=True,
                      help="append the pieces beyond the [unusedN] slots (false: slots only)")
  parser.add_argument("--no_append", dest="append", action="store_false",
                      help="same as --append=false")
  parser.add_argument("--new_row_init", choices=("mean", "unk"), default="mean",
                      help="new rows (embedding and MLM bias): mean of the ordinary tokens' rows, "
                           "or a copy of [UNK]'s")
  parser.add_argument("--max_documents", type=int, default=0,
                      help="read at most this many documents (0: all)")
  parser.add_argument("--no_progress", action="store_true", default=False,
                      help="no progress bar")
  return parser


def main(argv=None):
  args = cli.parse_args(build_parser(), argv)
  try:
    inputs = _checked_inputs(args)
    return _adapt(args, *inputs)
  except (ValueError, OSError) as error:  # CheckpointError, AdaptError: ValueErrors
    return cli.fail(PROG, error)


def _checked_inputs(args):
  """(config dict, base tokens, input paths, checkpoint tensors); ValueError for anything that
  would stop the run later, before the corpus is read or anything is written."""
  from bert_fin.modeling import checkpoint  # pylint: disable=g-import-not-at-top
  from bert_fin.modeling import vocab_rows  # pylint: disable=g-import-not-at-top
  if args.min_count < 1 or args.max_new_tokens < 0 or args.max_documents < 0:
    raise ValueError("--min_count must be >= 1, --max_new_tokens and --max_documents >= 0")
  io_utils.check_input_files([args.vocab_file], "--vocab_file")
  io_utils.check_input_files([args.bert_config_file], "--bert_config_file")
  try:  # a regular file of at most 4 MiB, nested at most untrusted.MAX_JSON_DEPTH deep
    config = untrusted.load_json(args.bert_config_file, 4 << 20, what="bert_config.json")
  except ValueError as error:
    raise ValueError("--bert_config_file %s is not a JSON config: %s" % (args.bert_config_file,
                                                                         error)) from None
  try:
    base = vocab_lib.read_vocab(args.vocab_file)
  except UnicodeDecodeError:
    raise ValueError("--vocab_file %s is not UTF-8 text (one token a line)"
                     % args.vocab_file) from None
  if not isinstance(config, dict) or not isinstance(config.get("vocab_size"), int):
    raise ValueError("--bert_config_file %s has no integer vocab_size" % args.bert_config_file)
  if not args.append and not vocab_lib.unused_slots(base):
    raise ValueError("--vocab_file %s has no [unusedN] slot and appending is off: drop "
                     "--no_append (new rows at the end) or use a vocab with [unusedN] slots"
                     % args.vocab_file)
  if vocab_lib.UNK not in base:
    raise ValueError("--vocab_file %s has no %s token" % (args.vocab_file, vocab_lib.UNK))
  tensors = checkpoint.model_tensors(_readable(args.init_checkpoint))
  rows = vocab_rows.vocab_rows(tensors)
  if not len(base) <= rows == config["vocab_size"]:
    raise ValueError("--vocab_file %s has %d tokens, --bert_config_file vocab_size %d, the "
                     "checkpoint's %s %d rows: pass the vocab and config the checkpoint was "
                     "trained with" % (args.vocab_file, len(base), config["vocab_size"],
                                       vocab_rows.WORD_EMBEDDINGS, rows))
  if len(base) < rows:  # a vocab_size padded past the vocab: those rows are free slots too
    print("%s: the checkpoint has %d rows for %d tokens: rows %d..%d become [unusedN] slots"
          % (PROG, rows, len(base), len(base), rows - 1))
    base = base + adapt.padding_tokens(base, rows - len(base))
  paths = io_utils.expand_file_patterns(args.input_file)
  io_utils.check_input_files(paths, "--input_file")
  sentence_documents.check_inputs(paths, args.input_format)
  io_utils.check_output_dir(args.output_dir, "--output_dir")
  present = [name for name in OUTPUT_NAMES
             if os.path.exists(os.path.join(args.output_dir, name))]
  if present:
    raise ValueError("--output_dir %s already holds %s: choose a new directory"
                     % (args.output_dir, ", ".join(present)))
  return config, base, paths, tensors


def _readable(init_checkpoint):
  from bert_fin.modeling import checkpoint  # pylint: disable=g-import-not-at-top
  checkpoint.checkpoint_shapes(init_checkpoint)  # CheckpointError naming the path
  return init_checkpoint


def _texts(args, paths, skipped, label):
  """The sentences of the corpus (at most --max_documents documents), with a byte progress bar;
  documents that cannot be used are counted in skipped {reason: count}."""
  from bert_fin.data.create import common  # pylint: disable=g-import-not-at-top
  position = sentence_documents.ReadPosition(paths)
  used = 0
  with common.progress_bar(not args.no_progress, unit="B", total=position.total) as bar:
    bar.set_description(label, refresh=False)
    for document in sentence_documents.iter_documents(paths, args.input_format, position):
      if document.skip_reason:
        skipped[document.skip_reason] = skipped.get(document.skip_reason, 0) + 1
        continue
      if args.max_documents and used >= args.max_documents:
        break
      used += 1
      yield from document.sentences
      common.advance_to(bar, position)


def _adapt(args, config, base, paths, tensors):
  from bert_fin.modeling import checkpoint  # pylint: disable=g-import-not-at-top
  from bert_fin.modeling import vocab_rows  # pylint: disable=g-import-not-at-top
  skipped = {}
  tokenizer = fast.FastFullTokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
  before = unk_census.count(tokenizer, _texts(args, paths, skipped, "count [UNK]"))
  if not before.pieces:
    raise ValueError("--input_file %s: no text (%s)" % (args.input_file, _skips(skipped) or
                                                        "empty files"))
  vocab_plan = adapt.plan(base, before.role_pieces, args.min_count, args.max_new_tokens,
                          args.append)
  reference = [i for i, token in enumerate(base) if _is_ordinary(token)]
  grown = vocab_rows.grow(tensors, len(vocab_plan.tokens), vocab_plan.new_ids, reference,
                          base.index(vocab_lib.UNK), args.new_row_init)
  os.makedirs(args.output_dir, exist_ok=True)
  with io_utils.work_dir(args.output_dir, "adapt-") as scratch:
    vocab_path = os.path.join(scratch, VOCAB_NAME)
    vocab_lib.write_vocab(vocab_path, vocab_plan.tokens)
    after_tokenizer = fast.FastFullTokenizer(vocab_path, do_lower_case=args.do_lower_case)
    after = unk_census.count(after_tokenizer, _texts(args, paths, {}, "re-tokenize"))
    checkpoint.write_checkpoint(os.path.join(scratch, CKPT_NAME), grown)
    report = _report(args, before, after, vocab_plan, tensors, skipped)
    _write_reports(scratch, before, vocab_plan, report)
    new_config = dict(config, vocab_size=len(vocab_plan.tokens))
    with open(os.path.join(scratch, CONFIG_NAME), "w", encoding="utf-8") as f:
      f.write(json.dumps(new_config, indent=2, sort_keys=True) + "\n")
    for name in OUTPUT_NAMES:  # the checkpoint's data before its index: never half a checkpoint
      os.replace(os.path.join(scratch, name), os.path.join(args.output_dir, name))
  _print_summary(args, report)
  return 0


def _is_ordinary(token):
  return not (vocab_lib.is_unused(token) or token in special_tokens.ALL or
              token in vocab_lib.HEAD_TOKENS)


def _skips(skipped):
  return ", ".join("%d %s" % (n, reason) for reason, n in sorted(skipped.items()))


def _report(args, before, after, vocab_plan, tensors, skipped):
  from bert_fin.modeling import vocab_rows  # pylint: disable=g-import-not-at-top
  return {
      "init_checkpoint": args.init_checkpoint, "vocab_file": args.vocab_file,
      "input_file": args.input_file, "do_lower_case": args.do_lower_case,
      "unk_rate_before": before.unk_rate, "unk_rate_after": after.unk_rate,
      "pieces_before": before.pieces, "unk_pieces_before": before.unk_pieces,
      "pieces_after": after.pieces, "unk_pieces_after": after.unk_pieces,
      "unk_words_too_long": before.too_long,
      "vocab_size_before": vocab_plan.base_size, "vocab_size_after": len(vocab_plan.tokens),
      "filled_slots": len(vocab_plan.filled), "appended": len(vocab_plan.appended),
      "padding_unused": len(vocab_plan.pads), "left_out": len(vocab_plan.left_out),
      "free_slots_left": sum(1 for token in vocab_plan.tokens[:vocab_plan.base_size]
                             if vocab_lib.is_unused(token)),
      "new_row_init": args.new_row_init,
      "grown_variables": [name for name in vocab_rows.VOCAB_SIZED if name in tensors],
      "documents_skipped": skipped,
  }


def _write_reports(directory, census, vocab_plan, report):
  where = {token: "slot %d" % i for i, token in vocab_plan.filled}
  where.update((token, "appended %d" % i) for i, token in vocab_plan.appended)
  where.update((token, "left out: " + reason) for token, _, reason in vocab_plan.left_out)
  with open(os.path.join(directory, PIECES_NAME), "w", encoding="utf-8") as f:
    f.write("piece\tcount\tcode_points\tid_or_reason\n")
    for piece, n in sorted(census.role_pieces.items(), key=lambda item: (-item[1], item[0])):
      chars = piece[2:] if piece.startswith("##") and len(piece) > 2 else piece
      f.write("%s\t%d\t%s\t%s\n" % (piece, n, " ".join("U+%04X" % ord(c) for c in chars),
                                    where.get(piece, "")))
  with open(os.path.join(directory, WORDS_NAME), "w", encoding="utf-8") as f:
    f.write("word\tcount\n")
    for word, n in sorted(census.unk_words.items(), key=lambda item: (-item[1], item[0])):
      f.write("%s\t%d\n" % (word, n))
  with open(os.path.join(directory, REPORT_NAME), "w", encoding="utf-8") as f:
    json.dump(report, f, ensure_ascii=False, indent=2, sort_keys=True)
    f.write("\n")


def _print_summary(args, report):
  print("%s: [UNK] rate before %.6f (%d of %d pieces), after %.6f (%d of %d)" % (
      PROG, report["unk_rate_before"], report["unk_pieces_before"], report["pieces_before"],
      report["unk_rate_after"], report["unk_pieces_after"], report["pieces_after"]))
  print("%s: vocab %d -> %d: %d [unusedN] slots filled (%d left), %d appended, %d padding "
        "[unusedN], %d pieces left out (%s)" % (
            PROG, report["vocab_size_before"], report["vocab_size_after"],
            report["filled_slots"], report["free_slots_left"], report["appended"],
            report["padding_unused"], report["left_out"], PIECES_NAME))
  if report["documents_skipped"]:
    print("%s: warning: documents skipped: %s" % (PROG, _skips(report["documents_skipped"])),
          file=sys.stderr)
  print("%s: wrote %s in %s (new rows: %s; training state dropped)" % (
      PROG, ", ".join(OUTPUT_NAMES), args.output_dir, args.new_row_init))


def console_main():
  sys.exit(main())


if __name__ == "__main__":
  console_main()
