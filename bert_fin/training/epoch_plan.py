"""Rank 0 decides the data order; every rank gets it by broadcast (output_dir need not be shared).

Before each stretch of training ("chunk"), rank 0:
  1. loads output_dir/data_order.json (input/epochs.py), or starts one for a new run;
  2. while the recorded epochs end less than one checkpoint interval (save_checkpoints_steps
     updates, at most the remaining ones) past the position, records the next epoch: the --input_file glob expanded NOW (a growing corpus is picked up
     here, at an epoch boundary; files already in an earlier epoch keep their record counts) and
     logs its files;
  3. writes the JSON atomically, then broadcasts it (or its error) to every rank.
Training then runs up to stop_position: no rank reads past the recorded epochs, so the next
epoch's files are decided when the first rank needs them (or, for epochs shorter than a
checkpoint interval, up to one interval before: each chunk costs a graph build and a checkpoint,
so a chunk is never shorter than that), and a restart mid-epoch rebuilds the same epoch from the
JSON. The JSON grows by one file list an epoch.
"""
import os

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin.input import epochs
from bert_fin.input import tfdata

SHARDING = {"tfdata": "files", "dali": "records"}


def resolve_seed(values, dist):
  """The run's data seed, the same on every rank: the saved order's (a resumed run), --seed, or a
  random one (then saved with the order, so a restart continues the same order)."""
  seed, error = 0, ""
  if dist.is_chief:
    saved = epochs.load_order(values.output_dir) if values.output_dir else None
    if saved is not None and values.seed is not None and saved.seed != values.seed:
      error = ("--seed %d differs from the seed %d of the run in %s (%s): use the same seed to "
               "resume, or a new --output_dir" % (values.seed, saved.seed, values.output_dir,
                                                  epochs.ORDER_FILE))
    elif saved is not None:
      seed = saved.seed
    else:
      seed = values.seed if values.seed is not None else int(np.random.SeedSequence().entropy
                                                               % 2 ** 31)
  _raise_broadcast_error(dist, error)
  return dist.broadcast_int(seed)


def _raise_broadcast_error(dist, error):
  error = dist.broadcast_bytes(error.encode("utf-8")).decode("utf-8")
  if error:
    raise ValueError(error)


def _record_epoch(order, input_file):
  """Appends the next epoch from the glob as it is now; logs it. Returns the epoch number."""
  files = tfdata.expand_input_files(input_file)
  known = {}
  for epoch in order.epochs:
    known.update(zip(epoch.files, epoch.records))
  counts = [known[f] if f in known else epochs.record_count(f) for f in files]
  number = order.add_epoch(files, counts)
  previous = set(order.epochs[-2].files) if number else set()
  added = [f for f in files if f not in previous]
  tf.logging.info("data epoch %d: %d files, %d records%s", number, len(files), sum(counts),
                  "" if not number else "; %d new: %s" % (len(added), ", ".join(added)))
  tf.logging.info("data epoch %d files: %s", number, ", ".join(files))
  return number


def _chief_order(values, dist, seed, position, start_step):
  """(order JSON text, "") or ("", error message) on rank 0."""
  wanted = epochs.DataOrder(seed, dist.size, values.train_batch_size,
                            SHARDING[values.input_pipeline])
  path = os.path.join(values.output_dir, epochs.ORDER_FILE)
  try:
    order = epochs.load_order(values.output_dir)
    if order is None:
      order = wanted
    else:
      epochs.check_same_layout(order, wanted, path)
    changed = False
    updates = max(1, min(values.save_checkpoints_steps, values.num_train_steps - start_step))
    wanted_stop = position + updates * values.num_accumulation_steps
    while order.stop_position(values.num_accumulation_steps) < wanted_stop:
      _record_epoch(order, values.input_file)
      changed = True
    text = order.to_json()
    if changed:
      with io_utils.atomic_output(path) as f:
        f.write(text)
    return text, ""
  except (ValueError, OSError) as error:
    return "", str(error)


def next_chunk(values, dist, seed, position, start_step):
  """(DataOrder, stop position) for training on from `position` micro-batches and global step
  `start_step` (every rank calls it)."""
  text, error = (_chief_order(values, dist, seed, position, start_step) if dist.is_chief
                 else ("", ""))
  _raise_broadcast_error(dist, error)
  order = epochs.DataOrder.from_json(dist.broadcast_bytes(text.encode("utf-8")).decode("utf-8"))
  stop = order.stop_position(values.num_accumulation_steps)
  epoch, offset = order.locate(position, dist.rank)
  tf.logging.info("data position %d micro-batches: rank %d at record %d of epoch %d; training "
                  "up to position %d", position, dist.rank, offset, epoch, stop)
  return order, stop

