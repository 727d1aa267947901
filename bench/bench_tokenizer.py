# coding=utf-8
"""Fast (HF tokenizers) vs faithful (google Python) FullTokenizer speed on a Chinese corpus.

  python bench/bench_tokenizer.py [--corpus FILE] [--max_lines N] [--vocab_file V] [--cased]
                                  [--repeat N] [--output_json PATH] [--synthetic_lines N]
                                  [--quick]
Default corpus: ../shared/corpora/reviews/pos.txt beside the checkout (one review a line) if present, else (and with
--synthetic_lines N; --quick: 300) a seeded synthetic Chinese/Latin corpus of 5000 (N) lines.
Default vocab: built from the corpus like google's Chinese vocab (specials at ids 0..103, every
char seen twice, "##"+char for non-CJK chars, frequent Latin words). Prints chars/s of each path
and the speed ratio over the faithful tokenizer (the baseline, measured in the same run), for whole
lines and for jieba words (whole-word masking's use), and checks that both paths give identical
tokens on every line/word (mismatch count must be 0).
"""
import argparse
import collections
import os
import random
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _quick  # pylint: disable=wrong-import-position  (bench/_quick.py)
from bert_fin.tokenization import fast as fast_tokenization  # pylint: disable=wrong-import-position
from bert_fin import io_utils  # pylint: disable=wrong-import-position
from bert_fin import tokenization  # pylint: disable=wrong-import-position

SHARED_CORPUS = os.path.join(_quick.SHARED_REVIEWS, "pos.txt")
SPECIAL = (["[PAD]"] + ["[unused%d]" % i for i in range(1, 100)] +
           ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])
QUICK = dict(synthetic_lines=300, word_lines=100)


def synthetic_corpus(num_lines, seed=0):
  """Seeded lines of CJK chars, Latin words, digits and full-width punctuation."""
  rng = random.Random(seed)
  hanzi = [chr(cp) for cp in range(0x4E00, 0x4E00 + 3000)]
  latin = ["iPhone", "ETF", "IPO", "CPU", "A股", "GDP", "www.example.com", "2019年", "3.5%"]
  lines = []
  for _ in range(num_lines):
    parts = []
    for _ in range(rng.randint(10, 80)):
      parts.append(rng.choice(hanzi) if rng.random() < 0.85 else rng.choice(latin + list("，。！")))
    lines.append("".join(parts))
  return lines


def build_vocab(lines, path, do_lower_case):
  """Writes a google-Chinese-style vocab for `lines` to `path` (atomically); returns its size."""
  basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  chars, words = collections.Counter(), collections.Counter()
  for line in lines:
    for token in basic.tokenize(line):
      chars.update(token)
      if len(token) > 1 and re.match(r"^[a-z0-9]+$", token, re.I):
        words[token] += 1
  singles = sorted(c for c, n in chars.items() if n >= 2)
  pieces = ["##" + c for c in singles if not tokenization.is_chinese_char(ord(c))]
  frequent = [w for w, n in words.most_common(3000) if n >= 3]
  tokens = list(dict.fromkeys(SPECIAL + singles + pieces + frequent))
  with io_utils.atomic_output(path) as f:
    f.write("\n".join(tokens) + "\n")
  return len(tokens)


def timed(function, *args, repeat=1):
  """Returns (result, best wall seconds, CPU seconds of that run; CPU includes HF's threads)."""
  best = None
  for _ in range(repeat):
    start, cpu_start = time.perf_counter(), time.process_time()
    result = function(*args)
    run = (time.perf_counter() - start, time.process_time() - cpu_start)
    best = run if best is None or run[0] < best[0] else best
  return (result,) + best


def count_mismatches(expected, got):
  return sum(1 for a, b in zip(expected, got) if a != b) + abs(len(expected) - len(got))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--corpus", default=None, help="UTF-8 text, one document a line")
  parser.add_argument("--max_lines", type=int, default=0, help="0 = all lines")
  parser.add_argument("--vocab_file", default=None)
  parser.add_argument("--cased", dest="do_lower_case", action="store_false",
                      help="do_lower_case=False (default True, as google's Chinese model)")
  parser.add_argument("--word_lines", type=int, default=3000, help="lines cut by jieba for words")
  parser.add_argument("--repeat", type=int, default=1, help="best wall time of N runs")
  parser.add_argument("--output_json", default=None, help="also write the figures here")
  parser.add_argument("--synthetic_lines", type=int, default=0,
                      help="N > 0: a synthetic corpus of N lines instead of --corpus")
  args = _quick.parse_args(parser, argv, QUICK)

  corpus = args.corpus or (SHARED_CORPUS if os.path.exists(SHARED_CORPUS) else None)
  if corpus and not args.synthetic_lines:
    with open(corpus, encoding="utf-8", errors="replace") as f:
      lines = [line.rstrip("\n") for line in f]
  else:
    corpus, lines = "synthetic (seed 0)", synthetic_corpus(args.synthetic_lines or 5000)
  if args.max_lines:
    lines = lines[:args.max_lines]
  with tempfile.TemporaryDirectory(prefix="bench_tokenizer-") as workdir:
    vocab_file = args.vocab_file
    if not vocab_file:
      vocab_file = os.path.join(workdir, "vocab.txt")
      size = build_vocab(lines, vocab_file, args.do_lower_case)
      print("vocab: built from the corpus, %d tokens" % size)
    return _run(args, corpus, lines, vocab_file)


def _run(args, corpus, lines, vocab_file):
  """Times both tokenizers on `lines`; prints (and optionally writes) the figures."""
  num_chars = sum(len(line) for line in lines)
  print("corpus %s: %d lines, %.2f M chars, do_lower_case=%s" %
        (corpus, len(lines), num_chars / 1e6, args.do_lower_case))

  faithful, init_faithful, _ = timed(tokenization.FullTokenizer, vocab_file, args.do_lower_case)
  fast, init_fast, _ = timed(fast_tokenization.FastFullTokenizer, vocab_file, args.do_lower_case)
  print("init: faithful %.2f s, fast %.2f s (includes char tables, once per process)" %
        (init_faithful, init_fast))
  warm_up = fast_tokenization.FastFullTokenizer(vocab_file, args.do_lower_case)
  warm_up.tokenize_batch(lines[:20])  # one-off library/regex start-up, not per-call cost
  warm_up.tokenize_words(lines[:20])

  figures = {"corpus": corpus, "lines": len(lines), "chars": num_chars}
  expected, base_wall, base_cpu = timed(faithful.tokenize_batch, lines, repeat=args.repeat)
  num_tokens = sum(len(tokens) for tokens in expected)
  print("%d tokens. Speed ratio = faithful time / fast time (wall: best of %d; cpu: process time)"
        % (num_tokens, args.repeat))
  row = "%-32s wall %6.2f s %9.0f chars/s  x%5.2f | cpu %6.2f s  x%5.2f | mismatches %s"
  print(row % ("faithful tokenize (baseline)", base_wall, num_chars / base_wall, 1.0, base_cpu, 1.0,
               "-"))
  figures["faithful"] = {"wall_seconds": base_wall, "cpu_seconds": base_cpu}
  runs = (("fast tokenize, one text a call", lambda: [fast.tokenize(line) for line in lines]),
          ("fast tokenize_batch", lambda: fast.tokenize_batch(lines)))
  for name, run in runs:
    got, wall, cpu = timed(run, repeat=args.repeat)
    mismatches = count_mismatches(expected, got)
    print(row % (name, wall, num_chars / wall, base_wall / wall, cpu, base_cpu / cpu, mismatches))
    figures[name] = {"wall_seconds": wall, "cpu_seconds": cpu, "wall_ratio": base_wall / wall,
                     "cpu_ratio": base_cpu / cpu, "mismatches": mismatches}

  try:
    import jieba  # pylint: disable=import-outside-toplevel
    jieba.setLogLevel(60)
    words = [w for line in lines[:args.word_lines] for w in jieba.lcut(line)]
  except ImportError:
    words = None
    print("jieba not installed: tokenize_words not measured")
  if words:
    word_chars = sum(len(w) for w in words)
    expected_words, base_wall, base_cpu = timed(faithful.tokenize_words, words)
    got_words, wall, cpu = timed(fast.tokenize_words, words)  # cold word cache: one run only.
    mismatches = count_mismatches(expected_words, got_words)
    print("tokenize_words, %d jieba words (%d chars) of %d lines, fast cache cold:" %
          (len(words), word_chars, min(len(lines), args.word_lines)))
    print(row % ("  faithful tokenize_words", base_wall, word_chars / base_wall, 1.0, base_cpu, 1.0,
                 "-"))
    print(row % ("  fast tokenize_words", wall, word_chars / wall, base_wall / wall, cpu,
                 base_cpu / cpu, mismatches))
    figures["tokenize_words"] = {"words": len(words), "chars": word_chars,
                                 "faithful_wall_seconds": base_wall, "fast_wall_seconds": wall,
                                 "wall_ratio": base_wall / wall, "cpu_ratio": base_cpu / cpu,
                                 "mismatches": mismatches}
  print("fallbacks to the faithful path: %d" % fast.fallback_count)
  figures["fallbacks"] = fast.fallback_count
  if args.output_json:
    io_utils.write_json_atomic(args.output_json, figures)
  return 0


if __name__ == "__main__":
  sys.exit(main())
