"""tfrecord2idx: verified DALI index files for TFRecord shards.

  tfrecord2idx FILE [IDX]        index one file (IDX defaults to FILE.idx), always rewritten
  tfrecord2idx DIR|GLOB... [--index_dir D] [--jobs N] [--force]
                                 index every shard, in parallel, skipping up-to-date indexes

Every record's length and data CRC32C are verified; a truncated or corrupt file stops with
`FILE: record N at byte offset O: reason` and exit status 1, and its index is not written (indexes
are written temp + rename). The index format is DALI's, byte for byte: `offset size` per record.
Under `mpirun -np N` (several hosts sharing a filesystem) the ranks divide the shards.
"""
import concurrent.futures
import fnmatch
import glob
import os
import sys
import time

from bert_fin import cli
from bert_fin import command_line
from bert_fin import io_utils
from bert_fin import mpi
from bert_fin.records import tfrecord_index

DEFAULT_PATTERN = "*.tfrecord*"
PROG = "tfrecord2idx"


def parse_args(argv):
  parser = cli.ArgumentParser(
      prog="tfrecord2idx", description=__doc__.split("\n")[0],
      epilog="single file: tfrecord2idx FILE [IDX]; many: tfrecord2idx DIR|GLOB [...]")
  parser.add_argument("inputs", nargs="+", metavar="FILE|DIR|GLOB",
                      help="a TFRecord file (optionally followed by its index path), or "
                           "directories / globs / files to index each")
  parser.add_argument("--index_dir", default=None,
                      help="write FILE.idx here instead of beside each file (many-file mode)")
  parser.add_argument("--pattern", default=DEFAULT_PATTERN,
                      help="file name pattern of shards inside a directory")
  parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                      help="parallel processes in many-file mode (the CPU count here)")
  parser.add_argument("--force", action="store_true",
                      help="rebuild indexes even when they are up to date")
  return parser.parse_args(argv)


def is_single_file_call(inputs):
  """`FILE IDX` or `FILE`: one existing regular file, optionally followed by a non-existing or
  non-TFRecord path (the index to write)."""
  if not os.path.isfile(inputs[0]) or len(inputs) > 2:
    return False
  return len(inputs) == 1 or not os.path.isfile(inputs[1]) or inputs[1].endswith(
      tfrecord_index.INDEX_SUFFIX)


def expand_inputs(inputs, pattern):
  """Sorted, de-duplicated shard paths from files, directories (filtered by pattern) and globs;
  index files and hidden temp files are never shards. Raises ValueError if nothing matches."""
  paths = []
  for item in inputs:
    if os.path.isdir(item):
      paths += [os.path.join(item, name) for name in os.listdir(item)
                if fnmatch.fnmatch(name, pattern)]
    elif glob.has_magic(item):
      paths += glob.glob(item)
    elif os.path.isfile(item):
      paths.append(item)
    else:
      raise ValueError("%s: no such file or directory" % item)
  shards = sorted({p for p in paths if os.path.isfile(p) and is_shard_name(os.path.basename(p))})
  if not shards:
    raise ValueError("no TFRecord shards found in %s (pattern %s)" % (" ".join(inputs), pattern))
  return shards


def is_shard_name(name):
  return not name.startswith(".") and not name.endswith(tfrecord_index.INDEX_SUFFIX)


def index_one(paths):
  """Worker: (tfrecord, index) -> (tfrecord, #records, #bytes, error message or None)."""
  tfrecord_path, index_path = paths
  try:
    records = tfrecord_index.write_index(tfrecord_path, index_path)
    return tfrecord_path, records, os.path.getsize(tfrecord_path), None
  except tfrecord_index.TFRecordError as error:
    return tfrecord_path, 0, 0, str(error)
  except OSError as error:
    return tfrecord_path, 0, 0, io_utils.os_error_message(error)


def index_many(jobs, num_processes):
  """Runs index_one over [(tfrecord, index)], in a process pool when num_processes > 1."""
  if num_processes <= 1 or len(jobs) <= 1:
    return [index_one(job) for job in jobs]
  with concurrent.futures.ProcessPoolExecutor(max_workers=min(num_processes, len(jobs))) as pool:
    return list(pool.map(index_one, jobs))


def plan_jobs(args):
  """([(tfrecord, index)] to write, number skipped as up to date)."""
  if is_single_file_call(args.inputs):
    source = args.inputs[0]
    target = (args.inputs[1] if len(args.inputs) == 2
              else tfrecord_index.index_path_for(source, args.index_dir))
    check_outputs(args, [(source, target)])
    return [(source, target)], 0
  shards = expand_inputs(args.inputs, args.pattern)
  pairs = [(s, tfrecord_index.index_path_for(s, args.index_dir)) for s in shards]
  jobs = [p for p in pairs if args.force or not tfrecord_index.index_is_current(*p)]
  check_outputs(args, jobs)
  return jobs, len(pairs) - len(jobs)


def check_outputs(args, jobs):
  """Every index can be written (before any is): ValueError naming the path otherwise."""
  if args.index_dir:
    io_utils.check_output_dir(args.index_dir, "--index_dir")
  io_utils.check_output_files([index for _, index in jobs], "index")


def main(argv=None):
  """Under mpirun -np N the ranks index every N-th file each (decided before any index is
  written) and rank 0 prints the summary; the indexes are the same as one process writes."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  start = time.perf_counter()
  try:
    world = mpi.world()
    jobs, skipped = world.settle("listing the shards", lambda: plan_jobs(args))
    world.check_same("shards", jobs)
  except mpi.RankError as error:
    return cli.fail_ranks("tfrecord2idx", error)
  except ValueError as error:
    return cli.fail(PROG, error)
  results = [r for rank_results in world.allgather(
      index_many(jobs[world.rank::world.size], args.jobs)) for r in rank_results]
  if not world.is_root:
    return 1 if any(error for _, _, _, error in results) else 0
  failures = [(path, error) for path, _, _, error in results if error]
  for path, error in failures:
    command_line.say("tfrecord2idx", "%s (index not written)" % error)  # counted below, exit 1
  seconds = time.perf_counter() - start
  megabytes = sum(r[2] for r in results) / 1e6
  print("tfrecord2idx: indexed %d file(s), %d records, %.1f MB in %.2f s (%.1f MB/s); "
        "%d up to date, skipped; %d failed" % (
            len(results) - len(failures), sum(r[1] for r in results), megabytes, seconds,
            megabytes / max(seconds, 1e-9), skipped, len(failures)), file=sys.stderr)
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
