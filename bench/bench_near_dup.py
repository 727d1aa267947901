"""Near-duplicate removal: quality against exact Jaccard and speed against datasketch, same run.

  python bench/bench_near_dup.py [--corpus DIR] [--originals 6000] [--threshold 0.8] [--quick]
Builds a reprint set: distinct documents (samples/corpus cleaned, plus the reviews of
../shared/corpora/reviews beside the repo or --corpus, one per line, >= --min_chars characters,
exact repeats dropped), and for a share of them 1-3 reprints each with a news header, a footer or
editor line, a changed date and 1-5% character edits (substituted, deleted, inserted characters),
all shuffled (seeded). Then, on the same documents and num_perm:
  ours       near_dup.signatures (a Pool of --processes) + near_dup_clusters.NearDupIndex (band
             keys in disk buckets, verified pairs, union-find): the first of a cluster is kept;
             again verifying by the estimate alone (how documents of an earlier batch whose output
             was moved are met);
  datasketch MinHash(num_perm).update_batch(shingles) + MinHashLSH(threshold, num_perm), query
             then insert the kept ones, a candidate verified by MinHash.jaccard >= threshold
             (skipped, with a message, when datasketch is not importable: a bench-only dependency);
both given the same shingles (our token 5-grams: characters of Chinese, words of Latin; strings
for datasketch, which hashes them itself with sha1).
Ground truth: exact Jaccard of character 5-grams (whitespace removed), an independent definition:
pairs >= --recall_at found exactly by prefix filtering. Printed per method: removed, precision
(removed documents with an exact Jaccard >= threshold with another member of their cluster),
precision vs kept (the same, with the kept document only), recall (documents with an earlier one of
exact Jaccard >= --recall_at that were removed), removed below 0.5 (vs the kept document), docs/s
(best of --repeats), and the ratio to datasketch. Then the cost of the flag in
clean_corpus: the same set cleaned with and without --near_dup_threshold (best of --repeats),
seconds and the extra seconds per GB of input.
"""
import argparse
import collections
import json
import math
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _quick  # pylint: disable=wrong-import-position  (bench/_quick.py)
from bert_fin.text import clean  # pylint: disable=wrong-import-position
from bert_fin.text.dedup import near_dup  # pylint: disable=wrong-import-position
from bert_fin.text.dedup import near_dup_clusters  # pylint: disable=wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_REVIEWS = _quick.SHARED_REVIEWS
QUICK = dict(corpus="", originals=150, repeats=1)
HEADERS = ["新华社北京1月5日电 ", "本报讯（记者 张伟）", "【财联社3月8日讯】", "中国证券网讯 ", "转自：证券时报 "]
FOOTERS = ["（责任编辑：王五）", "（编辑 李明 校对 赵强）", " 本文来源：东方财富网", "（完）", " 风险提示：股市有风险，投资需谨慎。"]


# ---- the reprint set ---------------------------------------------------------------------------
def sample_documents(work_dir):
  """Texts of samples/corpus, cleaned by clean_corpus (sentences joined)."""
  out = os.path.join(work_dir, "samples.jsonl")
  clean.clean_corpus([os.path.join(REPO, "samples", "corpus")], out, None,
                     clean.CleanConfig(text_field="content"))
  with open(out, encoding="utf-8") as f:
    return ["".join(json.loads(line)["sentences"]) for line in f]


def corpus_documents(corpus, min_chars, join=1):
  """The lines of the files in corpus with >= min_chars characters, `join` lines a document."""
  lines = []
  for name in sorted(os.listdir(corpus)):
    with open(os.path.join(corpus, name), encoding="utf-8", errors="replace") as f:
      lines.extend(line.strip() for line in f if len(line.strip()) >= min_chars)
  return ["".join(lines[i:i + join]) for i in range(0, len(lines), join)]


def reprint(text, rng, alphabet):
  """One reprint: header / footer / date change (each maybe) and 1-5% character edits."""
  if rng.random() < 0.5:
    text = rng.choice(HEADERS) + text
  if rng.random() < 0.5:
    text = text + rng.choice(FOOTERS)
  if rng.random() < 0.3:
    text = "%d年%d月%d日 " % (rng.randint(2015, 2024), rng.randint(1, 12), rng.randint(1, 28)) + text
  chars = list(text)
  for _ in range(max(1, round(rng.uniform(0.01, 0.05) * len(chars)))):
    position, kind = rng.randrange(len(chars)), rng.random()
    if kind < 0.6:
      chars[position] = rng.choice(alphabet)
    elif kind < 0.8 and len(chars) > 1:
      del chars[position]
    else:
      chars.insert(position, rng.choice(alphabet))
  return "".join(chars)


def reprint_set(originals, share, seed=0):
  """(shuffled texts, origin index of each or -1): originals + 1-3 reprints of `share` of them."""
  rng = random.Random(seed)
  alphabet = sorted({ch for text in originals for ch in text if not ch.isspace()})
  items = [(text, -1) for text in originals]
  for index, text in enumerate(originals):
    if rng.random() < share:
      items.extend((reprint(text, rng, alphabet), index) for _ in range(rng.randint(1, 3)))
  rng.shuffle(items)
  return [text for text, _ in items], [origin for _, origin in items]


# ---- exact ground truth --------------------------------------------------------------------------
def char_5grams(text):
  text = "".join(text.split())
  return {text[i:i + 5] for i in range(max(1, len(text) - 4))}


def exact_jaccard(left, right):
  return len(left & right) / len(left | right) if left or right else 0.0


def pairs_at_least(sets, threshold):
  """{(i, j): Jaccard} for every pair i < j with exact Jaccard >= threshold (prefix filtering:
  such a pair shares one of the first |A| - ceil(t |A|) + 1 grams of each, rarest first)."""
  frequency = collections.Counter(gram for grams in sets for gram in grams)
  postings, found = collections.defaultdict(list), {}
  for j, grams in enumerate(sets):
    ordered = sorted(grams, key=lambda gram: (frequency[gram], gram))
    prefix = ordered[:len(ordered) - math.ceil(threshold * len(ordered)) + 1]
    candidates = {i for gram in prefix for i in postings[gram]}
    for i in candidates:
      similarity = exact_jaccard(sets[i], grams)
      if similarity >= threshold:
        found[(i, j)] = similarity
    for gram in prefix:
      postings[gram].append(j)
  return found


def quality(matches, sets, should_go, threshold):
  """matches: {removed doc: the kept doc it goes for} -> (precision, precision vs the kept doc,
  recall, removed below 0.5 vs the kept doc). precision: removed documents with an exact Jaccard
  >= threshold with another member of their cluster (the kept doc and the others removed for it:
  union-find joins chains, A~B~C, so C's kept document may be A)."""
  clusters = collections.defaultdict(set)
  for doc, kept in matches.items():
    clusters[kept].update((doc, kept))
  vs_kept = {doc: exact_jaccard(sets[doc], sets[kept]) for doc, kept in matches.items()}
  justified = sum(any(other != doc and exact_jaccard(sets[doc], sets[other]) >= threshold
                      for other in clusters[kept]) for doc, kept in matches.items())
  count = max(1, len(matches))
  recall = len(should_go & set(matches)) / max(1, len(should_go))
  return (justified / count, sum(v >= threshold for v in vs_kept.values()) / count, recall,
          sum(v < 0.5 for v in vs_kept.values()))


# ---- the two methods -----------------------------------------------------------------------------
def _signatures(chunk_and_perm):
  texts, num_perm = chunk_and_perm
  return near_dup.signatures(texts, num_perm)


def ours(texts, threshold, num_perm, processes, work_dir, exact=True):
  """{removed: kept} by near_dup + near_dup_clusters, signatures on `processes` processes,
  candidates near the threshold checked on their texts as clean_corpus does (exact=False: by the
  estimate alone, as for documents of an earlier batch whose output is gone)."""
  chunks = [(texts[i:i + 256], num_perm) for i in range(0, len(texts), 256)]
  with multiprocessing.get_context("fork").Pool(processes) as pool, \
      near_dup_clusters.NearDupIndex(work_dir, threshold, num_perm) as index:
    for rows in pool.imap(_signatures, chunks):
      index.add(rows)
    result = index.clusters(texts=(lambda docs: [texts[doc] for doc in docs.tolist()])
                            if exact else None)
  return dict(zip(result.removed.tolist(), result.kept.tolist()))


def shingle_strings(text):
  """The same shingles as near_dup.shingle_hashes, as strings (datasketch hashes them)."""
  tokens, word = [], []
  for ch in text:
    if ch.isascii() and ch.isalnum():
      word.append(ch.lower())
      continue
    if word:
      tokens.append("".join(word))
      word = []
    if not ch.isspace() and ch not in "\u3000\xa0\x85":
      tokens.append(ch)
  if word:
    tokens.append("".join(word))
  if len(tokens) < near_dup.SHINGLE_SIZE:
    return ["\x00".join(tokens)] if tokens else []
  return ["\x00".join(tokens[i:i + near_dup.SHINGLE_SIZE])
          for i in range(len(tokens) - near_dup.SHINGLE_SIZE + 1)]


def with_datasketch(texts, threshold, num_perm, datasketch):
  """{removed: kept} by datasketch: query before insert, verified, only kept ones inserted."""
  lsh, minhashes, matches = datasketch.MinHashLSH(threshold=threshold, num_perm=num_perm), {}, {}
  for doc, text in enumerate(texts):
    minhash = datasketch.MinHash(num_perm=num_perm)
    minhash.update_batch([s.encode("utf-8") for s in shingle_strings(text)])
    verified = [other for other in lsh.query(minhash)
                if minhashes[other].jaccard(minhash) >= threshold]
    if verified:
      matches[doc] = min(verified)
    else:
      lsh.insert(doc, minhash)
      minhashes[doc] = minhash
  return matches


def best_times(methods, repeats):
  """{name: (fastest seconds, result)} of the functions in `methods` ({name: fn}), run in turn
  `repeats` times (interleaved: a burst of load on the shared machine hits every method)."""
  best = {}
  for _ in range(repeats):
    for name, fn in methods.items():
      start = time.perf_counter()
      result = fn()
      seconds = time.perf_counter() - start
      if name not in best or seconds < best[name][0]:
        best[name] = (seconds, result)
  return best


def clean_cost(texts, threshold, processes, work_dir, repeats):
  """Seconds (best of repeats) of clean_corpus on texts (one per line) without and with the
  near-dup pass."""
  path = os.path.join(work_dir, "reprints.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(" ".join(text.split()) + "\n" for text in texts))
  best = best_times({value: lambda c=clean.CleanConfig(text_format="line",
                                                     near_dup_threshold=value): clean.clean_corpus(
      [path], os.path.join(work_dir, "clean.jsonl"), None, c, processes)
                     for value in (0.0, threshold)}, repeats)
  return os.path.getsize(path), [best[0.0][0], best[threshold][0]]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--corpus", default=SHARED_REVIEWS,
                      help="directory of one-document-a-line files ('' : samples/corpus only)")
  parser.add_argument("--originals", type=int, default=6000, help="distinct documents at most")
  parser.add_argument("--min_chars", type=int, default=50)
  parser.add_argument("--join", type=int, default=1,
                      help="corpus lines a document (8: article-sized documents from reviews)")
  parser.add_argument("--reprint_share", type=float, default=0.3)
  parser.add_argument("--threshold", type=float, default=0.8)
  parser.add_argument("--recall_at", type=float, default=0.85)
  parser.add_argument("--num_perm", type=int, default=near_dup.DEFAULT_NUM_PERM)
  parser.add_argument("--processes", type=int, default=2)
  parser.add_argument("--repeats", type=int, default=3)
  args = _quick.parse_args(parser, argv, QUICK)
  work_dir = tempfile.mkdtemp(prefix="bench_near_dup-")
  try:
    originals = sample_documents(work_dir)
    if args.quick:
      _quick.write_synthetic_lines(work_dir, args.originals)
      args.corpus = work_dir
    if args.corpus and os.path.isdir(args.corpus):
      originals += corpus_documents(args.corpus, args.min_chars, args.join)
    elif args.corpus:
      _quick.skipped("corpus %s" % args.corpus, "not found: samples/corpus only")
    originals = list(dict.fromkeys(originals))[:args.originals]
    texts, origins = reprint_set(originals, args.reprint_share)
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    print("reprint set: %d documents (%d distinct, %d reprints), %.2f MB, mean %.0f chars; "
          "threshold %.2f, num_perm %d" % (len(texts), len(originals), sum(o >= 0 for o in origins),
                                           megabytes, np.mean([len(t) for t in texts]),
                                           args.threshold, args.num_perm))
    sets = [char_5grams(text) for text in texts]
    truth = pairs_at_least(sets, min(args.threshold, args.recall_at))
    should_go = {j for (i, j), value in truth.items() if value >= args.recall_at}
    print("ground truth (exact char 5-gram Jaccard): %d pairs >= %.2f, %d documents with an "
          "earlier one >= %.2f" % (sum(v >= args.threshold for v in truth.values()),
                                   args.threshold, len(should_go), args.recall_at))
    methods = {}
    for processes in sorted({1, args.processes}):
      methods["ours, %d process%s" % (processes, "es" if processes > 1 else "")] = (
          lambda p=processes: ours(texts, args.threshold, args.num_perm, p, work_dir))
    methods["ours, estimate only"] = lambda: ours(texts, args.threshold, args.num_perm, 1,
                                                  work_dir, exact=False)
    baseline = None
    try:
      import datasketch  # pylint: disable=import-outside-toplevel
      methods["datasketch %s" % datasketch.__version__] = lambda: with_datasketch(
          texts, args.threshold, args.num_perm, datasketch)
    except ImportError:
      _quick.skipped("datasketch column", "datasketch is not importable (pip install "
                     "datasketch==2.0.0: a bench-only dependency)")
    best = best_times(methods, args.repeats)
    rows = [(name, seconds, matches) for name, (seconds, matches) in best.items()]
    if rows[-1][0].startswith("datasketch"):
      baseline = len(texts) / rows[-1][1]
    print("%-22s %7s %9s %9s %7s %9s %8s %12s" % (
        "method", "removed", "precision", "vs kept", "recall", "below 0.5", "docs/s",
        "x datasketch"))
    for name, seconds, matches in rows:
      precision, vs_kept, recall, wrong = quality(matches, sets, should_go, args.threshold)
      rate = len(texts) / seconds
      print("%-22s %7d %9.4f %9.4f %7.4f %9d %8.0f %12s" % (
          name, len(matches), precision, vs_kept, recall, wrong, rate,
          "%.2fx" % (rate / baseline) if baseline else "-"))
    size, (plain, with_near) = clean_cost(texts, args.threshold, args.processes, work_dir,
                                          args.repeats)
    print("clean_corpus --processes %d on the set (%.2f MB): %.2f s without, %.2f s with "
          "--near_dup_threshold %.2f: +%.0f s/GB (x%.2f the run)" % (
              args.processes, size / 1e6, plain, with_near, args.threshold,
              (with_near - plain) * 1e9 / size, with_near / plain))
    bands, band_rows = near_dup.lsh_params(args.threshold, args.num_perm)
    per_doc = 4 * args.num_perm + 16 * bands
    print("scratch disk: %d B/document (signature %d + %d band keys x 16 B), %.0f MB per GB of "
          "this set" % (per_doc, 4 * args.num_perm, bands,
                        per_doc * len(texts) / (size / 1e9) / 1e6))
  finally:
    shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
  main()
