"""Resume policy of the data order: data_order.json (load, save, archive), what a resumed run may
change (resume_order), epochs recorded ahead of the position (record_ahead: a growing corpus joins
at an epoch boundary) and the position a checkpoint holds.

resume_order's answer, for the run's sources (one --input_file or a --input_source mixture,
mixture.py), source by source: no saved order -> a new one; same layout, sources (names and
weights) and files -> the saved order (exact resume); files only added under the same glob -> the
saved order (they join at the source's next epoch); anything else -> StreamError naming what
changed, or with --data_order=restart a new order beginning at the checkpoint's position.
"""
import os

import numpy as np

from bert_fin import io_utils
from bert_fin.input.stream import mixture
from bert_fin.input.stream import order as order_lib

ORDER_FILE = "data_order.json"


class StreamError(ValueError):
  """The data stream cannot go on as asked (one line: what changed and the flag that accepts it)."""


def load_order(output_dir):
  """The DataOrder (or mixture.MixedOrder) saved in output_dir, or None; StreamError when the file
  is not one."""
  path = os.path.join(output_dir, ORDER_FILE)
  return io_utils.read_saved(path, mixture.order_from_json, lambda e: StreamError(
      "%s is not a data order bert_fin wrote (%s: %s): restore it, or pass --data_order=restart "
      "to start a new order from the checkpoint" % (path, type(e).__name__, e)))


def save_order(output_dir, order):
  with io_utils.atomic_output(os.path.join(output_dir, ORDER_FILE)) as f:
    f.write(order.to_json())


def archive_order(output_dir, step):
  """Keeps a copy of the order --data_order=restart replaces, data_order-until-step-N.json (a
  copy: a run killed before the new order is saved still has the old one)."""
  path = os.path.join(output_dir, ORDER_FILE)
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f, io_utils.atomic_output(os.path.join(
        output_dir, "data_order-until-step-%d.json" % step)) as archive:
      archive.write(f.read())


def _absolute(saved, files_now):
  """saved with relative paths (data_order.json of bert_fin before absolute paths) made absolute:
  the file given now whose path ends with it, else relative to the working directory."""
  def fix(path):
    if os.path.isabs(path) or "://" in path:
      return path
    tail = os.sep + os.path.normpath(path)
    matches = [f for f in files_now if f.endswith(tail)]
    return matches[0] if len(matches) == 1 else os.path.abspath(path)

  return order_lib.DataOrder(
      saved.seed, saved.num_workers, saved.batch_size, saved.sharding,
      [order_lib.Epoch([fix(f) for f in e.files], e.records) for e in saved.epochs],
      saved.input_file, saved.start_position)


def _names(paths, limit=3):
  shown = ", ".join(os.path.basename(p) for p in paths[:limit])
  return shown + (", ..." if len(paths) > limit else "")


def resume_order(saved, seed, num_workers, batch_size, sharding, sources, files_now, position,
                 restart=False, describe_layout=None):
  """(mixture.MixedOrder to continue at `position`, [what changed]) against the saved order.

  saved: the MixedOrder of data_order.json or None; seed: --seed (None: the saved one, or drawn
  for a new order); num_workers, batch_size, sharding: this run's; sources: [mixture.Source] of
  --input_file (mixture.input_file_source) or --input_source; files_now: [[absolute paths]] a
  source, now; restart: --data_order=restart. Exact resume needs the same layout, seed and sources
  (names and weights, in order); each source's files are judged at the records of it the position
  has consumed (files only added under the same glob: a growing source, joining at its next
  epoch). Anything else -> StreamError naming what changed, or with restart a new order beginning
  at `position` and the changes. describe_layout(old_files, new_files) may add what differs in
  the records ('' if nothing).
  """
  if saved is None:
    return mixture.MixedOrder(_drawn(seed), num_workers, batch_size, sharding, sources,
                              start_position=position), []
  saved = mixture.MixedOrder(saved.seed, saved.num_workers, saved.batch_size, saved.sharding,
                             saved.sources, [_absolute(o, f) for o, f in zip(saved.orders,
                                                                              files_now)],
                             saved.start_position)
  changes = _layout_changes(saved, seed, num_workers, batch_size, sharding, position)
  if (saved.sources[0].name is None) != (sources[0].name is None):
    changes.append("%s holds %s, now %s" % (ORDER_FILE, mixture.held_text(saved.sources),
                                            mixture.given_text(sources)))
  elif [(s.name, s.weight) for s in saved.sources] != [(s.name, s.weight) for s in sources]:
    changes.append("--input_source %s -> %s" % (mixture.sources_text(saved.sources),
                                                mixture.sources_text(sources)))
  elif position >= saved.start_position:
    for order, consumed, source, files in zip(saved.orders, saved.consumed(position), sources,
                                              files_now):
      files_changed = _files_changed(order, consumed, source.input_file, files,
                                     mixture.flag_of(source), describe_layout)
      changes += [files_changed] if files_changed else []
  seed = saved.seed if seed is None else seed
  if not changes:
    saved.sources = list(sources)
    for order, source in zip(saved.orders, sources):
      order.input_file = source.input_file
    return saved, []
  _refuse_unless(restart, changes)
  return mixture.MixedOrder(seed, num_workers, batch_size, sharding, sources,
                            start_position=position), changes


def _drawn(seed):
  """seed, or one drawn for a new order."""
  return int(np.random.SeedSequence().entropy % 2 ** 31) if seed is None else seed


def _layout_changes(saved, seed, num_workers, batch_size, sharding, position):
  """[what differs] between the saved order's layout, seed and start and this run's."""
  wanted = {"num_workers": num_workers, "batch_size": batch_size, "sharding": sharding}
  changes = ["%s %s -> %s" % (key, saved.layout()[key], value)
             for key, value in wanted.items() if saved.layout()[key] != value]
  if seed is not None and seed != saved.seed:
    changes.append("seed %d -> %d" % (saved.seed, seed))
  if position < saved.start_position:
    changes.append("the checkpoint's data position %d lies before the order's start %d"
                   % (position, saved.start_position))
  return changes


def _files_changed(saved, position, input_file, files_now, flag, describe_layout):
  """What changed in the files of `flag` against the saved DataOrder at `position` (its units),
  or None: added files under another glob, or files of the epochs still to be read removed."""
  current = max([saved.locate(position, w)[0] for w in range(saved.num_workers)], default=0)
  unread = {f for e in saved.epochs[current:] for f in e.files}
  last = saved.epochs[-1].files if saved.epochs else []
  last_files, files_given = set(last), set(files_now)
  added = [f for f in files_now if f not in last_files]
  removed = sorted(f for f in unread if f not in files_given)
  if not (added and saved.input_file not in (None, input_file) or removed):
    return None
  layout = describe_layout(last, files_now) if describe_layout else ""
  return ("%s gives %d files, +%d/-%d against the %d of %s (added: %s; removed: %s)%s"
          % (flag, len(files_now), len(added), len(removed), len(last), ORDER_FILE,
             _names(added) or "none", _names(removed) or "none", layout))


def _refuse_unless(restart, changes):
  if not restart:
    raise StreamError(
        "cannot resume the data order of %s exactly: %s. Resume with the same inputs and flags, "
        "or pass --data_order=restart to keep the weights and step and start a new data order "
        "over the files given now" % (ORDER_FILE, "; ".join(changes)))


def record_epochs(order, position, num_accumulation_steps, files, count_records,
                  flag="--input_file"):
  """Records epochs of `files` until the order ends at least one update past `position` (a file
  already in an earlier epoch keeps its count; count_records(path) counts a new one). Logs each
  epoch (flag: where the files come from); returns the files new to the run."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  known = {}
  for epoch in order.epochs:
    known.update(zip(epoch.files, epoch.records))
  new = [f for f in files if f not in known]
  file_set = set(files)
  what = "" if flag == "--input_file" else " of " + flag
  while order.stop_position(num_accumulation_steps) < position + num_accumulation_steps:
    counts = [known[f] if f in known else count_records(f) for f in files]
    known.update(zip(files, counts))
    gone = [f for f in order.epochs[-1].files if f not in file_set] if order.epochs else []
    number = order.add_epoch(files, counts)
    tf.logging.info("data epoch %d%s: %d files, %d records%s", number, what, len(files),
                    sum(counts), "; %d new: %s" % (len(new), _names(new, 10)) if number and new
                    else "")
    if gone:
      tf.logging.warning("data epoch %d%s: %d file(s) of epoch %d no longer match %s and "
                         "are not read from now on: %s", number, what, len(gone), number - 1,
                         flag, _names(gone, 10))
  return new


def record_ahead(order, position, num_accumulation_steps, files, count_records):
  """record_epochs of each source of the mixture.MixedOrder (files: [[paths]] a source) until it
  covers the records the order reads up to one update past `position`; returns the files new to
  the run."""
  new = []
  needed = order.needed(position + num_accumulation_steps)
  for source, source_order, source_files, records in zip(order.sources, order.orders, files,
                                                         needed):
    new += record_epochs(source_order, records - 1, 1, source_files, count_records,
                         mixture.flag_of(source))
  return new


def checkpoint_position(checkpoint):
  """Micro-batches consumed at `checkpoint` (a path prefix); 0 without a checkpoint. Raises
  StreamError for a checkpoint without a data position (not written by run_pretraining: google's
  or another program's checkpoint left in --output_dir)."""
  if not checkpoint:
    return 0
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  reader = tf.train.load_checkpoint(checkpoint)
  if not reader.has_tensor(order_lib.POSITION_VARIABLE):
    raise StreamError("%s has no %s (not a checkpoint run_pretraining wrote): continue from it "
                      "with --init_checkpoint=%s and a new --output_dir"
                      % (checkpoint, order_lib.POSITION_VARIABLE, checkpoint))
  return int(reader.get_tensor(order_lib.POSITION_VARIABLE))
