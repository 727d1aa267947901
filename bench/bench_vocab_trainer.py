# coding=utf-8
"""bert_fin's deterministic WordPiece trainer vs HF `tokenizers`' (Rust) trainer, the baseline.

  python bench/bench_vocab_trainer.py [--input CLEAN.jsonl] [--vocab_sizes 21128,8000]
                                      [--holdout_every 10] [--synthetic_lines N]
                                      [--output_json PATH] [--quick]
Default input: ../shared/corpora/reviews (beside the checkout) cleaned with tools/clean_corpus.py into a temp dir
(mostly CJK: merges run out near 5.8k tokens). --synthetic_lines N: a seeded merge-heavy Latin
corpus instead (N lines of 20 syllable words; 30000 lines learn a full 21128 vocab).
--quick: 300 synthetic lines, vocab size 500.
Every holdout_every-th document is held out; both trainers see the rest. For each vocab size
prints the seconds of each trainer (word counting included: HF does it in Rust), the ratio
ours/HF, the learned-token overlap (ours vs HF, and HF vs a second HF run: HF is not
deterministic), the vocab.txt sizes and the [UNK] rate of both google-layout vocabs on the
held-out documents.
"""
import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import _quick  # pylint: disable=wrong-import-position  (bench/_quick.py)
from bert_fin.tokenization import vocab as vocab_lib  # pylint: disable=wrong-import-position

SHARED_CORPUS = _quick.SHARED_REVIEWS
QUICK = dict(synthetic_lines=300, vocab_sizes="500")


def hf_train(sentences, vocab_size, min_frequency=2):
  """The baseline: what build_vocab ran before (HF BertWordPieceTokenizer.train_from_iterator)."""
  from tokenizers import BertWordPieceTokenizer  # pylint: disable=import-outside-toplevel
  tokenizer = BertWordPieceTokenizer(clean_text=True, handle_chinese_chars=True,
                                     strip_accents=None, lowercase=True)
  tokenizer.train_from_iterator(sentences, vocab_size=vocab_size, min_frequency=min_frequency,
                                limit_alphabet=1 << 30, special_tokens=list(vocab_lib.HEAD_TOKENS),
                                show_progress=False, wordpieces_prefix="##")
  head = set(vocab_lib.HEAD_TOKENS)
  return [t for t, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
          if t not in head]


def clean_default_corpus(work_dir):
  output = os.path.join(work_dir, "reviews.jsonl")
  subprocess.run([sys.executable, os.path.join(REPO, "tools", "clean_corpus.py"), "--output",
                  output, "--text_format", "line", "--no_progress", SHARED_CORPUS],
                 check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=REPO))
  return output


def synthetic_corpus(path, num_lines, seed=0):
  """Seeded words of 1-5 syllables (70% from a 40-syllable core): many long mergeable words."""
  rng = random.Random(seed)
  syllables = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiou"] + list("0123456789")
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(num_lines):
      words = ["".join(rng.choice(syllables[:40]) if rng.random() < 0.7 else rng.choice(syllables)
                       for _ in range(rng.randint(1, 5))) for _ in range(20)]
      f.write(json.dumps({"sentences": [" ".join(words)]}) + "\n")
  return path


def split_documents(path, holdout_every):
  train, held_out = [], []
  for index, line in enumerate(open(path, encoding="utf-8")):
    (held_out if index % holdout_every == 0 else train).append(json.loads(line)["sentences"])
  return train, held_out


def held_out_unk_rate(learned, vocab_size, char_counts, held_out, work_dir):
  tokens = vocab_lib.google_layout(learned, vocab_size, char_counts=char_counts)
  path = os.path.join(work_dir, "vocab.txt")
  vocab_lib.write_vocab(path, tokens)
  tokenizer = vocab_lib.GoogleTokenizer(tokens, vocab_file=path)
  rate, _, _ = vocab_lib.unk_rate(tokenizer, [s for doc in held_out for s in doc])
  return tokens, rate


def overlap(a, b):
  return len(set(a) & set(b)) / max(len(set(b)), 1)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--input", default=None)
  parser.add_argument("--vocab_sizes", default="21128,8000")
  parser.add_argument("--holdout_every", type=int, default=10)
  parser.add_argument("--synthetic_lines", type=int, default=0)
  parser.add_argument("--output_json", default=None)
  args = _quick.parse_args(parser, None, QUICK)
  with tempfile.TemporaryDirectory() as work_dir:
    if args.synthetic_lines:
      path = synthetic_corpus(os.path.join(work_dir, "synthetic.jsonl"), args.synthetic_lines)
    else:
      path = args.input or clean_default_corpus(work_dir)
    train_docs, held_out = split_documents(path, args.holdout_every)
    sentences = [s for doc in train_docs for s in doc]
    char_counts = collections.Counter()
    for _ in vocab_lib.counting(sentences, char_counts):
      pass
    print("corpus %s: %d train documents (%d chars), %d held out" %
          (path, len(train_docs), sum(map(len, sentences)), len(held_out)))
    results = []
    for vocab_size in [int(v) for v in args.vocab_sizes.split(",")]:
      start = time.perf_counter()
      hf = hf_train(iter(sentences), vocab_size)
      hf_seconds = time.perf_counter() - start
      hf_again = hf_train(iter(sentences), vocab_size)
      start = time.perf_counter()
      ours = vocab_lib.train_wordpiece(iter(sentences), vocab_size)
      our_seconds = time.perf_counter() - start
      hf_tokens, hf_unk = held_out_unk_rate(hf, vocab_size, char_counts, held_out, work_dir)
      our_tokens, our_unk = held_out_unk_rate(ours, vocab_size, char_counts, held_out, work_dir)
      row = {"vocab_size": vocab_size, "hf_seconds": round(hf_seconds, 3),
             "ours_seconds": round(our_seconds, 3), "ratio_ours_over_hf": our_seconds / hf_seconds,
             "overlap_ours_hf": overlap(ours, hf), "overlap_hf_hf": overlap(hf_again, hf),
             "hf_vocab_txt": len(hf_tokens), "ours_vocab_txt": len(our_tokens),
             "hf_heldout_unk_rate": hf_unk, "ours_heldout_unk_rate": our_unk}
      results.append(row)
      print("vocab_size %d: HF %.2fs, ours %.2fs (ratio %.1fx); overlap ours/HF %.2f%% "
            "(HF/HF rerun %.2f%%); vocab.txt %d vs %d; held-out [UNK] HF %.6f ours %.6f" %
            (vocab_size, hf_seconds, our_seconds, row["ratio_ours_over_hf"],
             100 * row["overlap_ours_hf"], 100 * row["overlap_hf_hf"], len(hf_tokens),
             len(our_tokens), hf_unk, our_unk))
  if args.output_json:
    with open(args.output_json, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
