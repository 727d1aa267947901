"""pack_records on several MPI ranks (mpirun -np N, hosts sharing a filesystem): the same packed
files and stats as one process with the same flags (data/packing/pack_files.py).

One process surveys the files in order, plans each window of consecutive records on its length
histogram, packs window after window (the packs' order seeded by (random_seed, window)) and
deals the packed records round-robin to the output files. Here the ranks survey the files in
parallel (biggest first); every rank joins the per-file surveys into the same windows and plans;
rank r packs its contiguous run of windows, reading only those records, into part files
(parts.py) in a directory rank 0 made beside the output; rank 0 deals the parts, window after
window, to the output files and writes the stats. Bad input stops every rank before anything is
written; a rank that fails stops every rank, the output appears only when whole (atomic), and a
rerun starts over.
"""
import os
import time

import numpy as np

from bert_fin import mpi
from bert_fin.data import shuffle as shuffle_lib
from bert_fin.data import writer
from bert_fin.data.multihost import parts
from bert_fin.data.packing import pack_files
from bert_fin.data.packing import plans
from bert_fin.records import tfrecord_index


def _part_path(part_dir, window):
  return os.path.join(part_dir, "window-%06d.part" % window)


def _pack_mine(world, files, found, plans, max_predictions, encoder, options, part_dir):
  """This rank's windows into part files."""
  mine = world.share(len(plans))
  if not mine:
    return
  for window, sequences in pack_files.iter_windows(files, found, mine.start, mine.stop):
    counts = pack_files.PackCounts(np.zeros(options["max_sequences_per_pack"] + 1, np.int64),
                                   [0], [0])
    with parts.PartWriter(_part_path(part_dir, window)) as part:
      for chunk in pack_files.packed_records(
          window, sequences, plans[window], found.layout, max_predictions,
          options["max_sequences_per_pack"], options["random_seed"], encoder, counts):
        part.add(*shuffle_lib.pack_records([tfrecord_index.frame_record(r) for r in chunk]))
      part.info = {"window": window, "slots_used": counts.slots_used.tolist(),
                   "sequences": counts.sequences[0], "real_tokens": counts.real_tokens[0]}


def _deal(files, found, paths, stats_path, part_dir, max_predictions, options, started):
  """Rank 0: the parts, window after window, round-robin to the output files; the stats."""
  counts = pack_files.PackCounts(np.zeros(options["max_sequences_per_pack"] + 1, np.int64),
                                 [0], [0])
  with writer.ShardedRecordWriter(paths) as out:
    for window in range(len(found.window_histograms)):
      path = _part_path(part_dir, window)
      for blob, lengths in parts.iter_part(path):
        out.write_dealt(shuffle_lib.deal_records(blob, lengths, len(paths), out.next_file),
                        shuffle_lib.count_records(lengths))
      info = parts.read_info(path)
      counts.slots_used[:] += np.array(info["slots_used"], np.int64)
      counts.sequences[0] += info["sequences"]
      counts.real_tokens[0] += info["real_tokens"]
    written = list(out.counts)
  return pack_files.finish_stats(found, files, paths, stats_path, written, counts,
                                 max_predictions, options["max_sequences_per_pack"],
                                 options["algorithm"], options["random_seed"],
                                 options["window_size"], started)


def pack_files_on_ranks(world, input_file, output_file, num_output_files=1,
                        max_sequences_per_pack=plans.DEFAULT_MAX_SEQUENCES_PER_PACK,
                        algorithm=plans.DEFAULT_ALGORITHM, random_seed=12345,
                        window_size=pack_files.DEFAULT_WINDOW_SIZE, log=print):
  """pack_files.pack_files on every rank of `world`: the same output and stats.

  Args:
    world: mpi.World.
    input_file ... log: as pack_files.pack_files (log is used on rank 0 only).

  Returns:
    the stats dict on rank 0, None on the others.

  Raises:
    mpi.RankError: on every rank when one fails (bad input before anything is written).
  """
  started = time.time()
  options = dict(max_sequences_per_pack=max_sequences_per_pack, algorithm=algorithm,
                 random_seed=random_seed, window_size=window_size)

  def check():
    pack_files.check_arguments(algorithm, max_sequences_per_pack, window_size)
    files, paths, stats_path = pack_files.output_of(input_file, output_file, num_output_files)
    return files, paths, stats_path, pack_files.files_layout(files)

  files, paths, stats_path, layout = world.settle("checking the input", check)
  world.check_same("input files", [(f, os.path.getsize(f)) for f in files])
  mine = world.spread([os.path.getsize(f) for f in files])
  surveyed = world.settle("surveying records", lambda: {
      i: pack_files.survey_file(files[i], layout) for i in mine})
  surveyed = {i: s for part in world.allgather(surveyed) for i, s in part.items()}
  found = world.settle("planning", lambda: pack_files.combine_surveys(
      layout, [surveyed[i] for i in range(len(files))], window_size))
  plans, max_predictions, encoder = pack_files.plan_and_encoder(
      found, max_sequences_per_pack, algorithm, len(files), log if world.is_root else _quiet)
  output_dir = os.path.dirname(os.path.abspath(paths[0]))
  with mpi.shared_work_dir(world, output_dir, "pack-parts-") as part_dir:
    world.settle("packing", lambda: _pack_mine(world, files, found, plans, max_predictions,
                                               encoder, options, part_dir))
    return world.settle("writing the output", lambda: _deal(
        files, found, paths, stats_path, part_dir, max_predictions, options, started)
                        if world.is_root else None)


def _quiet(*_):
  pass
