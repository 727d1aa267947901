"""clean_corpus on several MPI ranks (mpirun -np N, hosts sharing a filesystem): the same output
and stats as one process with the same flags (text/clean.py).

One process cleans each input file into a part file and appends the parts in input order,
dropping repeated documents (decided on disk: exact_dups.py). Here the input files are spread over the ranks (biggest
first, by bytes); each rank cleans its files into part files in a directory rank 0 made beside
the output, with its own --processes; rank 0 then appends every part in input order exactly as
one process does (duplicates across ranks are dropped there), checks the accounting and writes
the stats. The boilerplate pass (--boilerplate_min_docs) writes each file's line digests on the
ranks the same way (in another shared directory) and rank 0 counts them in input order, so the
frequent lines are the same set.
The near-duplicate pass (--near_dup_threshold) hashes the documents on the ranks (a signature file
beside each part) and clusters them on rank 0 in input order (clean_near_dup.py).
A rank that fails stops every rank; the output appears only when whole (atomic, as always), and
a rerun starts over.
"""
import os

from bert_fin import mpi
from bert_fin import progress as progress_lib
from bert_fin.text import clean
from bert_fin.text import raw_documents
from bert_fin.text.dedup import seen_manifest


def _run_mine(function, tasks, mine, config, frequent, processes, progress, label):
  """{task index: function(task)} for this rank's tasks, with its own worker processes."""
  mine_tasks = [tasks[i] for i in mine]
  sizes = [os.path.getsize(t[0] if isinstance(t, tuple) else t) for t in mine_tasks]
  bar = progress_lib.ByteProgress(sum(sizes), label, progress)
  with clean.task_runner(processes, config, frequent, bar) as run:
    return dict(zip(mine, run(function, mine_tasks)))


def _in_order(world, results):
  """Rank 0: the values of every rank's {index: value}, in index order (None elsewhere)."""
  gathered = world.gather(results)
  if gathered is None:
    return None
  merged = {index: value for part in gathered for index, value in part.items()}
  return [merged[index] for index in range(len(merged))]


def clean_corpus(world, inputs, output_path, stats_path=None, config=clean.CleanConfig(),
                 processes=1, progress=False, seen_manifest_path=None, near_dup_report=None):
  """clean.clean_corpus on every rank of `world` (mpi.World); returns the stats dict on rank 0,
  None on the others. Raises mpi.RankError on every rank when one fails."""
  output_dir = os.path.dirname(os.path.abspath(output_path))

  def check():
    paths = raw_documents.expand_inputs(inputs)
    os.makedirs(output_dir, exist_ok=True)
    seen = (seen_manifest.SeenManifest(seen_manifest_path)
            if seen_manifest_path and world.is_root else None)
    return paths, [os.path.getsize(p) if os.path.isfile(p) else 0 for p in paths], seen

  paths, sizes, seen = world.settle("listing the inputs", check)
  world.check_same("input files", [paths, sizes])
  mine = world.spread(sizes)
  progress = progress and world.is_root
  frequent = frozenset()
  min_docs = config.filter_config.boilerplate_min_docs
  if min_docs > 0:
    with mpi.shared_work_dir(world, output_dir, "line-counts-") as lines_dir:
      tasks = clean.line_tasks(paths, lines_dir)
      counted = world.settle("counting lines", lambda: _run_mine(
          clean.count_file_lines, tasks, mine, config, frozenset(), processes, progress,
          "boilerplate"))
      counted = _in_order(world, counted)
      frequent = world.bcast(world.settle("joining line counts", lambda: clean.frequent_lines_of(
          tasks, counted, sum(sizes), min_docs, lines_dir) if world.is_root else None))
  with mpi.shared_work_dir(world, output_dir, "clean-parts-") as part_dir:
    tasks = clean.part_tasks(paths, part_dir)
    file_stats = world.settle("cleaning", lambda: _run_mine(
        clean.clean_file_to_part, tasks, mine, config, frequent, processes, progress, "clean"))
    file_stats = _in_order(world, file_stats)

    def assemble():
      if not world.is_root:
        return None
      stats = clean.assemble(tasks, file_stats, output_path, config, seen, near_dup_report,
                             progress)
      return clean.finish(stats, paths, frequent, processes, stats_path, seen,
                          seen_manifest_path)

    return world.settle("writing the output", assemble)
