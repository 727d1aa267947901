"""Shard clean JSONL documents into N files of near-equal character count, shuffled, in bounded memory.

Algorithm (two passes, memory bounded by one bucket):
  1. stream every input line (one document) into one of B temp bucket files chosen by a seeded RNG,
     counting characters; B is chosen so that a bucket is about `bucket_bytes` on disk;
  2. for each bucket in turn: load it, shuffle it with the seeded RNG, and append its documents to
     the current shard, moving to the next shard when the running character total passes
     (shard + 1) * total / N.
Shards are therefore within about one document of total / N characters. The same inputs and seed
give the same shards. Output names: PREFIX-00000-of-00008.jsonl. The set appears all at once: the
shards are written in a temp directory (io_utils.work_dir, a name no `PREFIX-*` glob matches) and
renamed into place together at the end, so a killed run leaves no shard under a final name.
"""
import contextlib
import json
import math
import os
import random
import resource

from bert_fin import io_utils
from bert_fin.text import corpus_format

COMMON_WORKER_COUNTS = (2, 4, 8)


def shard_path(prefix, index, num_shards):
  return "%s-%05d-of-%05d.jsonl" % (prefix, index, num_shards)


def document_chars(line):
  """Characters of the sentences of one JSONL document line; raises ValueError on a bad line."""
  try:
    record = json.loads(line)
  except ValueError:
    raise ValueError("not JSON") from None
  sentences = record.get("sentences") if isinstance(record, dict) else None
  if not isinstance(sentences, list):
    raise ValueError("document has no 'sentences' list")
  return sum(len(sentence) for sentence in sentences)


def uneven_worker_counts(num_shards, worker_counts=COMMON_WORKER_COUNTS):
  """The common worker counts that do not divide num_shards (the training side refuses those)."""
  return [count for count in worker_counts if num_shards % count]


def _bucket_count(inputs, bucket_bytes):
  """Number of temp buckets so that one bucket (loaded whole in pass 2) is about bucket_bytes."""
  total_bytes = sum(os.path.getsize(path) for path in inputs)
  open_files_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
  cap = 4096 if open_files_limit == resource.RLIM_INFINITY else max(1, min(4096,
                                                                          open_files_limit - 64))
  return max(1, min(cap, math.ceil(total_bytes / max(1, bucket_bytes))))


MAX_WARNINGS = 10  # bad lines named one by one; the rest are counted (bad_lines)


def _decoded_lines(path):
  """(line number, str line ending in "\n" or not, or None for a line that is not UTF-8)."""
  with open(path, "rb") as on_disk:
    for line_number, raw in enumerate(corpus_format.decompressed(on_disk, path), 1):
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError:
        yield line_number, None
        continue
      yield line_number, line[:-2] + "\n" if line.endswith("\r\n") else line


def _scatter(inputs, bucket_files, rng):
  """Pass 1: each valid line to a random bucket. Returns (documents, characters, bad_lines,
  first bad line as `path:line: reason` or None)."""
  documents = characters = bad_lines = 0
  first_bad = None
  for path in inputs:
    for line_number, line in _decoded_lines(path):
      if line is not None and not line.strip():
        continue
      try:
        if line is None:
          raise ValueError("not UTF-8")
        chars = document_chars(line)
      except ValueError as error:
        bad_lines += 1
        first_bad = first_bad or "%s:%d: %s" % (path, line_number, error)
        if bad_lines <= MAX_WARNINGS:
          print("warning: %s:%d skipped (%s)" % (path, line_number, error))
        continue
      if not line.endswith("\n"):
        line += "\n"
      bucket_files[rng.randrange(len(bucket_files))].write("%d\t%s" % (chars, line))
      documents += 1
      characters += chars
  if bad_lines > MAX_WARNINGS:
    print("warning: %d bad lines skipped in all (the first %d named above)"
          % (bad_lines, MAX_WARNINGS))
  return documents, characters, bad_lines, first_bad


def shard_corpus(inputs, output_prefix, num_shards, seed=12345, bucket_bytes=256 << 20):
  """Shards JSONL `inputs` into num_shards files. Returns a summary dict (per-shard chars/docs)."""
  if num_shards < 1:
    raise ValueError("num_shards must be >= 1, got %d" % num_shards)
  rng = random.Random(seed)
  output_dir = os.path.dirname(os.path.abspath(output_prefix))
  os.makedirs(output_dir, exist_ok=True)
  outputs = [shard_path(output_prefix, i, num_shards) for i in range(num_shards)]
  with io_utils.work_dir(output_dir, "shard-") as work:
    num_buckets = _bucket_count(inputs, bucket_bytes)
    bucket_paths = [os.path.join(work, "%05d" % i) for i in range(num_buckets)]
    with contextlib.ExitStack() as stack:
      files = [stack.enter_context(open(path, "w", encoding="utf-8")) for path in bucket_paths]
      documents, characters, bad_lines, first_bad = _scatter(inputs, files, rng)
    if documents < num_shards:
      hint = _bad_input_hint(bad_lines, first_bad) if bad_lines else ""
      if not documents:
        raise ValueError("no document in the input%s" % (hint or " (empty files)"))
      raise ValueError("%d documents cannot fill %d shards: lower --num_shards%s" % (
          documents, num_shards, hint))
    temp_outputs = [os.path.join(work, "shard-%05d" % i) for i in range(num_shards)]
    shard_chars, shard_docs = _gather(bucket_paths, temp_outputs, documents, characters, rng)
    for temp, final in zip(temp_outputs, outputs):  # all finished: rename the set into place
      os.replace(temp, final)
  return {"documents": documents, "characters": characters, "bad_lines": bad_lines,
          "num_shards": num_shards, "seed": seed, "shard_characters": shard_chars,
          "shard_documents": shard_docs, "outputs": outputs}


def _bad_input_hint(bad_lines, first_bad):
  return ("; %d line(s) skipped (first: %s): shard_corpus reads the JSON Lines of "
          "tools/clean_corpus.py (a \"sentences\" list per line); clean raw text with it first"
          % (bad_lines, first_bad))


def _shuffled_documents(bucket_paths, rng):
  """Yields (chars, json line) from each bucket in turn, each bucket shuffled in memory."""
  for path in bucket_paths:
    with open(path, encoding="utf-8") as f:
      lines = f.readlines()
    rng.shuffle(lines)
    for line in lines:
      chars, record = line.split("\t", 1)
      yield int(chars), record


def _gather(bucket_paths, shard_paths, total_docs, total_chars, rng):
  """Pass 2: shuffled buckets -> consecutive shards (written to shard_paths, fsynced) cut at
  multiples of total_chars / N. Requires total_docs >= N; every shard gets at least one document."""
  num_shards = len(shard_paths)
  shard_chars, shard_docs = [0] * num_shards, [0] * num_shards
  shard, running, remaining = 0, 0, total_docs
  out = open(shard_paths[0], "w", encoding="utf-8")
  try:
    for chars, record in _shuffled_documents(bucket_paths, rng):
      shards_left = num_shards - shard - 1
      boundary = (shard + 1) * total_chars / num_shards
      if shard_docs[shard] and shards_left and (running >= boundary or remaining <= shards_left):
        _close_synced(out)
        shard += 1
        out = open(shard_paths[shard], "w", encoding="utf-8")
      out.write(record)
      running += chars
      shard_chars[shard] += chars
      shard_docs[shard] += 1
      remaining -= 1
  finally:
    _close_synced(out)
  return shard_chars, shard_docs


def _close_synced(f):
  if not f.closed:
    f.flush()
    os.fsync(f.fileno())
    f.close()
