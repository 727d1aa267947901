"""create_pretraining_data's fast mode on several MPI ranks (mpirun -np N, one or several hosts
sharing a filesystem): the same files and stats as one process with the same flags.

One process makes its output from blocks of `block_docs` consecutive documents of the input
stream, each block's records a function of (seed, first document index, dupe) only
(fast.py), pushed in block order through one shuffle window seeded by random_seed and dealt
round-robin to the files. Here:

  1. every rank checks the flags and inputs, and that it sees what rank 0 sees (same files and
     sizes, same flags);
  2. the input files are scanned in parallel (document_index.scan_file, the biggest files
     spread first) and joined into the stream's numbering: every rank then knows where every
     document is;
  3. the blocks are grouped in segments of consecutive blocks; rank r makes the records of its
     contiguous run of segments, reading only its documents (from the file where they begin),
     with its own --num_workers processes, and writes each segment as a part file (parts.py:
     checksummed, renamed when whole) in a directory beside the output;
  4. rank 0 pushes the parts' records in segment order through the one shuffle window, deals them
     to the output files (atomically, as one process does), merges the stats, writes the stats
     JSON and removes the parts.

So the bytes equal a one-process run's. A rank that dies takes the job down (mpirun); its
finished segments stay as parts, and a rerun of the same command makes only the missing ones
(the parts directory is named by a hash of everything the records depend on: flags, input files
and sizes, vocab and user dictionary contents, the segment plan). Documents read, used and
skipped by reason are counted per block as in one process, so the stats account for every
document.
"""
import hashlib
import json
import logging
import os
import random
import shutil
import time

from bert_fin import io_utils
from bert_fin.data import parallel
from bert_fin.data import shuffle as shuffle_lib
from bert_fin.data import writer as writer_lib
from bert_fin.data.create import common
from bert_fin.data.create import fast
from bert_fin.data.create import options as options_lib
from bert_fin.data.create import stats as stats_lib
from bert_fin.data.multihost import document_index
from bert_fin.data.multihost import parts

_LOG = logging.getLogger(__name__)
SEGMENTS_PER_RANK = 8  # segments a rank gets at least, when there are enough blocks
MAX_SEGMENT_DOCUMENTS = 1 << 14  # a part holds at most this many documents' records
MERGE_RECORDS = 1 << 14  # records pushed through the shuffle window at a time on rank 0
# options that do not change a block's records (so a rerun may change them and reuse parts)
_NOT_IN_RECORDS = ("progress", "num_workers", "kernel", "num_output_files", "output_file",
                   "fast_tokenizer", "shuffle_window")


def _file_digest(path):
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      digest.update(chunk)
  return digest.hexdigest()


def segment_bounds(total_documents, block_docs, num_ranks):
  """[(first document, end document)] of the segments: whole blocks, at least SEGMENTS_PER_RANK
  a rank when there are enough blocks, at most MAX_SEGMENT_DOCUMENTS documents each."""
  blocks = -(-total_documents // block_docs)
  most = max(1, MAX_SEGMENT_DOCUMENTS // block_docs)
  per_segment = max(1, min(most, -(-blocks // (SEGMENTS_PER_RANK * num_ranks))))
  return [(first * block_docs, min((first + per_segment) * block_docs, total_documents))
          for first in range(0, blocks, per_segment)]


def _check(options, world):
  """Every rank: flags and inputs, before anything is written; (paths, stats_path, inputs)."""
  options_lib.validate_options(options)
  if options.faithful:
    raise ValueError("--faithful is google's single-process algorithm: run it without mpirun")
  paths, stats_path = writer_lib.output_paths(options.output_file, options.num_output_files)
  inputs = io_utils.expand_file_patterns(options.input_file)
  return paths, stats_path, inputs


def _identity(options, inputs):
  """What a block's records depend on besides the plan: flags, inputs, vocab, user dict."""
  flags = {k: v for k, v in options_lib.as_dict(options).items() if k not in _NOT_IN_RECORDS}
  return {"flags": flags, "inputs": [(p, os.path.getsize(p)) for p in inputs],
          "vocab": _file_digest(options.vocab_file),
          "user_dict": _file_digest(options.user_dict) if options.user_dict else None}


def _parts_dir(paths, identity, bounds):
  key = hashlib.sha256(json.dumps([identity, bounds], sort_keys=True).encode()).hexdigest()[:16]
  prefix = os.path.basename(paths[0]).split("-")[0] or "out"
  return os.path.join(os.path.dirname(os.path.abspath(paths[0])),
                      "%sparts-%s-%s-resume" % (io_utils.TEMP_MARKER, prefix, key))


def _part_path(parts_dir, segment):
  return os.path.join(parts_dir, "segment-%06d.part" % segment)


def _make_segments(options, world, plan, bounds, parts_dir):
  """Step 3 on this rank: the parts of its segments that are not whole yet."""
  mine = [s for s in world.share(len(bounds)) if not parts.is_whole(_part_path(parts_dir, s))]
  reused = len(world.share(len(bounds))) - len(mine)
  if reused:
    _LOG.info("rank %d: %d segment(s) already made by an earlier run, kept", world.rank, reused)
  if not mine:
    return
  num_workers = options.num_workers or parallel.default_num_workers()
  for segment in mine:
    begin, end = bounds[segment]
    started = time.time()
    documents = document_index.iter_range(plan, begin, end)
    blocks = ((begin + first, block)
              for first, block in fast.iter_blocks(documents, options.block_docs))
    stats = stats_lib.PretrainingStats()
    with parallel.ordered_map(fast.process_block_packed, blocks, num_workers) as results, \
        parts.PartWriter(_part_path(parts_dir, segment)) as part:
      for blob, lengths, block_stats in results:
        part.add(blob, lengths)
        stats.merge(block_stats)
      if stats.documents_read != end - begin:
        raise RuntimeError("segment %d: read %d documents of %d (did an input file change?)"
                           % (segment, stats.documents_read, end - begin))
      part.info = {"segment": segment, "documents": [begin, end], "stats": stats.state()}
    _LOG.info("rank %d/%d: segment %d of %d (documents %d-%d): %d instances in %.1f s",
              world.rank, world.size, segment + 1, len(bounds), begin, end - 1, stats.instances,
              time.time() - started)


def _merge(options, paths, stats_path, parts_dir, num_segments, started, num_workers):
  """Step 4 on rank 0: the parts, in order, through the shuffle window to the files."""
  worker = fast.worker()
  stats = stats_lib.PretrainingStats()
  for segment in range(num_segments):
    info = parts.read_info(_part_path(parts_dir, segment))
    stats.merge(stats_lib.PretrainingStats.from_state(info["stats"]))
  try:
    common.check_produced(stats)  # before any output file exists
  except ValueError:
    shutil.rmtree(parts_dir, ignore_errors=True)  # nothing written: no parts left either
    raise
  merge_started = time.time()
  shuffler = shuffle_lib.make_shuffler(options.shuffle_window, random.Random(options.random_seed),
                                       worker.kernel)
  with writer_lib.ShardedRecordWriter(paths) as out:
    for segment in range(num_segments):
      for blob, lengths in parts.iter_part(_part_path(parts_dir, segment), MERGE_RECORDS):
        chunk, chunk_lengths = shuffler.push_packed(blob, lengths)
        out.write_dealt(shuffle_lib.deal_records(chunk, chunk_lengths, len(paths), out.next_file,
                                                 worker.kernel),
                        shuffle_lib.count_records(chunk_lengths))
    out.write_many(shuffler.drain())
    counts = list(out.counts)
  _LOG.info("rank 0: %d part(s) shuffled and dealt to %d file(s) in %.1f s", num_segments,
            len(paths), time.time() - merge_started)
  result = common.finish(options, stats, stats_path, paths, counts, time.time() - started,
                             mode="fast", num_workers=num_workers, segmenter=worker.segmenter,
                             record_kernel=worker.kernel, masking_config=worker.masking)
  shutil.rmtree(parts_dir, ignore_errors=True)
  return result


def run(options, world):
  """create_pretraining_data's fast mode on every rank of `world` (mpi.World); returns the stats
  dict on rank 0 and None on the others. Raises mpi.RankError (on every rank) when a rank
  fails."""
  started = time.time()
  paths, stats_path, inputs = world.settle("checking flags and inputs",
                                           lambda: _check(options, world))
  identity = world.settle("reading the vocab", lambda: _identity(options, inputs))
  world.check_same("input files, vocab or flags", identity)
  mine = world.spread([size for _, size in identity["inputs"]])
  scans = world.settle("scanning the input", lambda: {
      i: document_index.scan_file(inputs[i], options.input_format) for i in mine})
  scans = {i: scan for part in world.allgather(scans) for i, scan in part.items()}
  plan = document_index.stream_plan(inputs, options.input_format,
                                    [scans[i] for i in range(len(inputs))])
  total = plan.total
  if plan.starts is None:
    _LOG.warning("a binary file lies inside an open document of google's text format: every rank "
                 "reads the input from its beginning to its own documents (slower, same output)")
  bounds = segment_bounds(total, options.block_docs, world.size)
  parts_dir = _parts_dir(paths, identity, bounds)
  if world.is_root:
    _LOG.info("%d ranks: %d documents in %d file(s), %d segment(s); parts in %s", world.size,
              total, len(inputs), len(bounds), parts_dir)
  num_workers = options.num_workers or parallel.default_num_workers()

  def prepare():
    if world.is_root:
      os.makedirs(parts_dir, exist_ok=True)
    fast.init_worker(options)

  world.settle("loading the tokenizer", prepare)
  world.settle("making records", lambda: _make_segments(options, world, plan, bounds, parts_dir))
  return world.settle("writing the output", lambda: _merge(
      options, paths, stats_path, parts_dir, len(bounds), started, num_workers)
                      if world.is_root else None)
