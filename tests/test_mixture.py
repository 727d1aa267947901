"""Weighted corpus mixing (--input_source; input/stream/mixture.py and the tf.data reader): the
schedule's proportions over a long stream (pure arithmetic), its closed forms against the stream
itself, one or two workers, a stream from a position, a one-source mixture reading what
--input_file reads, source bits in dynamic-masking keys, data_order.json (mixtures and the older
single-source files), resume decisions and a growing source. In process, no training."""
import json
import os

import numpy as np
import pytest

import tiny_data

from bert_fin.input import stream
from bert_fin.training import distributed
from bert_fin.training import sources as train_sources

SEQ, P, BATCH = 32, 5, 4


def test_proportions_hold_within_a_block_over_a_long_stream_and_the_closed_forms_agree():
  weights = [5.0, 3.0, 1.5, 0.5]
  schedule = stream.Schedule(weights, seed=11)
  n = 200000
  ids = schedule.sources(0, n)
  fractions = np.asarray(weights) / sum(weights)
  for s, fraction in enumerate(fractions):
    prefix_counts = np.cumsum(ids == s)
    deviation = np.abs(prefix_counts - np.arange(1, n + 1) * fraction).max()
    assert deviation < stream.mixture.BLOCK + len(weights), (s, deviation)  # every prefix
    assert abs(prefix_counts[-1] / n - fraction) < 1e-3
  # Stratified and shuffled: every block holds its quota, in an order drawn from (seed, block).
  for number in range(50):
    block = schedule.block_sources(number)
    start = schedule.block_start(number)
    assert ids[start:start + len(block)].tolist() == block.tolist()
    quota = np.bincount(block, minlength=4) - stream.mixture.BLOCK * fractions
    assert np.abs(quota).max() <= 1 and list(block) != sorted(block)
  other = stream.Schedule(weights, seed=12).sources(0, n)
  end = schedule.block_start(1000)  # another seed: other orders, the same quotas a block
  assert (other != ids).any() and list(np.bincount(other[:end])) == list(np.bincount(ids[:end]))
  # counts(n) and index_of(s, k) (no enumeration) are the stream's own.
  rng = np.random.default_rng(0)
  for m in [0, 1, 127, 128, 129] + rng.integers(0, n, 20).tolist():
    assert schedule.counts(m) == [int((ids[:m] == s).sum()) for s in range(4)], m
  for s in range(4):
    where = np.flatnonzero(ids == s)
    for k in [0, 1, len(where) - 1] + rng.integers(0, len(where), 10).tolist():
      assert schedule.index_of(s, k) == where[k], (s, k)
  # Far into a stream (a long run resumed) the closed forms cost no enumeration.
  far = 10 ** 11
  counts = schedule.counts(far)
  assert sum(counts) == far and all(abs(c - far * f) < 200 for c, f in zip(counts, fractions))
  assert schedule.counts(schedule.index_of(3, counts[3]))[3] == counts[3]


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory):
  """(sources, [[paths]], {record key: source index}): "small" 2 files x 6 records, "large" 4
  files x 10, weights 1 : 2."""
  directory = tmp_path_factory.mktemp("mixture")
  small, small_contents = tiny_data.write_records(str(directory / "small"), 2, 6, seq_len=SEQ,
                                                  max_predictions=P, seed=1, prefix="s")
  large, large_contents = tiny_data.write_records(str(directory / "large"), 4, 10, seq_len=SEQ,
                                                  max_predictions=P, seed=2, prefix="l")
  owner = {}
  for index, contents in enumerate((small_contents, large_contents)):
    owner.update({_key(i["input_ids"]): index for file in contents for i in file})
  sources = [stream.Source("small", str(directory / "small" / "*"), 1.0),
             stream.Source("large", str(directory / "large" / "*"), 2.0)]
  return sources, [small, large], owner


def _key(ids_row):
  return tuple(int(x) for x in ids_row)


def _order(two_sources, seed=5, num_workers=1, batch_size=BATCH, through=40):
  sources, files, _ = two_sources
  order = stream.MixedOrder(seed, num_workers, batch_size, "files", sources)
  stream.record_ahead(order, through, 1, files, stream.record_count)
  return order


def _rows(order, worker, position, micro_batches):
  """The input_ids rows (as keys) of `micro_batches` batches of a worker's tf.data stream."""
  from bert_fin.input import tfdata  # pylint: disable=import-outside-toplevel
  from bert_fin.records import schema  # pylint: disable=import-outside-toplevel
  dataset = tfdata.training_dataset(stream.MixtureStream(order.copy(), worker, position),
                                    schema.RecordLayout(SEQ, P), order.batch_size)
  return [[_key(row) for row in batch[schema.INPUT_IDS]]
          for batch in dataset.take(micro_batches).as_numpy_iterator()]


def test_every_row_comes_from_the_scheduled_source_and_each_source_epoch_reads_every_record_once(
    two_sources):
  """1 and 2 workers: each worker's row i of micro-batch p comes from source_of(p * B + i), the
  same schedule on every worker (so a global batch holds workers x that composition, and the
  sources' epochs stay in step over the workers); over each epoch of a source the worker group
  reads each of its records once, as a single --input_file's epochs."""
  _, files, owner = two_sources
  per_source_epoch = {0: 12, 1: 40}
  for workers in (1, 2):
    batch = BATCH * 2 // workers  # the same global batch
    order = _order(two_sources, num_workers=workers, batch_size=batch, through=30)
    schedule = order.schedule.sources(0, 30 * batch)
    read = {0: [], 1: []}
    for worker in range(workers):
      rows = [row for b in _rows(order, worker, 0, 30) for row in b]
      assert [owner[row] for row in rows] == schedule.tolist()
      for source in (0, 1):
        mine = [row for row in rows if owner[row] == source]
        read[source].append(mine)
    for source, epoch_records in per_source_epoch.items():
      share = epoch_records // workers
      for epoch in range(2):
        together = [row for mine in read[source] for row in mine[epoch * share:(epoch + 1) * share]]
        assert len(together) == epoch_records == len(set(together)), (workers, source, epoch)
        assert set(together) == {k for k, v in owner.items() if v == source}
  assert len(files[0]) % 2 == 0 and len(files[1]) % 2 == 0


def test_a_mixture_from_a_position_is_the_rest_of_the_stream_from_the_start(two_sources):
  order = _order(two_sources)
  whole = _rows(order, 0, 0, 20)
  assert _rows(order, 0, 13, 7) == whole[13:]
  consumed = order.consumed(13)
  assert sum(consumed) == 13 * BATCH and consumed == order.schedule.counts(13 * BATCH)
  small_epoch, skipped = stream.MixtureStream(order, 0, 13).source_streams()[0].start()
  assert small_epoch * 12 + skipped == consumed[0] and small_epoch >= 1  # "small" repeats


def test_a_one_source_mixture_reads_what_input_file_reads(two_sources):
  from bert_fin.input import tfdata  # pylint: disable=import-outside-toplevel
  from bert_fin.records import schema  # pylint: disable=import-outside-toplevel
  sources, files, _ = two_sources
  order = stream.MixedOrder(5, 1, BATCH, "files", sources[1:])
  stream.record_ahead(order, 25, 1, files[1:], stream.record_count)
  single = tiny_data.worker_stream(files[1], BATCH, seed=5)
  plain = [[_key(r) for r in b[schema.INPUT_IDS]] for b in tfdata.training_dataset(
      single, schema.RecordLayout(SEQ, P), BATCH).take(25).as_numpy_iterator()]
  assert _rows(order, 0, 0, 25) == plain


def test_dynamic_masking_keys_carry_the_source_in_the_identity(tmp_path):
  from bert_fin.input import tfdata  # pylint: disable=import-outside-toplevel
  paths = [tiny_data.write_dynamic_records(str(tmp_path / name), 2, 4, seq_len=SEQ, seed=seed,
                                           prefix=name)[0] for name, seed in (("a", 1), ("b", 2))]
  sources = [stream.Source(name, "%s/*" % name, 1.0) for name in ("a", "b")]
  order = stream.MixedOrder(3, 1, BATCH, "files", sources)
  stream.record_ahead(order, 4, 1, paths, stream.record_count)
  records = tfdata._mixture_records(stream.MixtureStream(order, 0, 0), 4, 100, identities=True)  # pylint: disable=protected-access
  keys = [int(key) for key, _ in records.take(16).as_numpy_iterator()]
  identities = [k & ((1 << tfdata.IDENTITY_BITS) - 1) for k in keys]
  sources_of_keys = [i >> tfdata.SOURCE_SHIFT for i in identities]
  assert sources_of_keys == order.schedule.sources(0, 16).tolist()
  by_source = {s: sorted(i & ((1 << tfdata.SOURCE_SHIFT) - 1) for i, t in
                         zip(identities, sources_of_keys) if t == s) for s in (0, 1)}
  assert by_source == {0: list(range(8)), 1: list(range(8))}  # one epoch of 8 records each


def test_data_order_json_holds_each_source_and_older_single_source_files_still_load(
    two_sources, tmp_path):
  order = _order(two_sources)
  stream.save_order(str(tmp_path), order)
  with open(os.path.join(str(tmp_path), stream.ORDER_FILE), encoding="utf-8") as f:
    saved = json.load(f)
  assert set(saved) == {"seed", "num_workers", "batch_size", "sharding", "start_position",
                        "sources"}
  assert [(s["name"], s["weight"]) for s in saved["sources"]] == [("small", 1.0), ("large", 2.0)]
  assert saved["sources"][0]["seed"] == 5 and saved["sources"][1]["seed"] != 5
  loaded = stream.load_order(str(tmp_path))
  assert isinstance(loaded, stream.MixedOrder) and loaded.to_json() == order.to_json()
  assert loaded.consumed(9) == order.consumed(9)
  # A data_order.json of one --input_file, as every bert_fin before mixtures wrote it.
  older = {"seed": 5, "num_workers": 1, "batch_size": 4, "sharding": "files",
           "input_file": "data/*", "start_position": 0,
           "epochs": [{"files": ["/d/a", "/d/b"], "records": [8, 8]}]}
  (tmp_path / stream.ORDER_FILE).write_text(json.dumps(older))
  single = stream.load_order(str(tmp_path))  # the one-source order of --input_file
  assert [s.name for s in single.sources] == [None] and single.orders[0].epochs[0].records == [8, 8]
  assert json.loads(single.to_json()) == older  # written back in the shape it was read
  resumed, changes = stream.resume_order(single, None, 1, 4, "files",
                                         [stream.input_file_source("data/*")], [["/d/a", "/d/b"]],
                                         2)
  assert changes == [] and stream.MixtureStream(resumed, 0, 2).source_streams()[0].start() == (0, 8)
  with pytest.raises(stream.StreamError, match=r"holds one --input_file \(data/\*\), now "
                     r"--input_source small:1, large:2.*--data_order=restart"):
    stream.resume_order(single, None, 1, 4, "files", two_sources[0], two_sources[1], 2)


def _resume(saved, sources, files, position=10, restart=False, seed=None, batch_size=BATCH):
  return stream.resume_order(saved, seed, 1, batch_size, "files", sources, files, position,
                             restart)


def test_resume_continues_the_same_sources_and_refuses_what_changed(two_sources):
  sources, files, _ = two_sources
  saved = _order(two_sources)
  order, changes = _resume(stream.MixedOrder.from_obj(json.loads(saved.to_json())), sources,
                           files)
  assert changes == [] and order.to_json() == saved.to_json()
  # Files added under a source's glob: a growing source (they join at its next epoch).
  order, changes = _resume(saved.copy(), sources, [files[0], files[1] + ["/new/l-9"]])
  assert changes == [] and order.orders[1].epochs[0].files == files[1]
  reweighted = [sources[0], sources[1]._replace(weight=3.0)]
  with pytest.raises(stream.StreamError, match=r"--input_source small:1, large:2 -> small:1, "
                     r"large:3\. Resume with the same"):
    _resume(saved.copy(), reweighted, files)
  with pytest.raises(stream.StreamError, match=r"--input_source small gives 1 files, \+0/-1"):
    _resume(saved.copy(), sources, [files[0][:1], files[1]])
  with pytest.raises(stream.StreamError, match="batch_size 4 -> 8"):
    _resume(saved.copy(), sources, files, batch_size=8)
  order, changes = _resume(saved.copy(), reweighted, files, restart=True)
  assert len(changes) == 1 and order.start_position == 10 and order.seed == 5
  assert [o.epochs for o in order.orders] == [[], []]


def test_a_growing_source_joins_at_its_own_epoch_boundary_and_the_view_stops_there(tmp_path):
  data, out = tmp_path / "data", tmp_path / "out"
  out.mkdir()
  tiny_data.write_records(str(data / "a"), 2, 4, seq_len=8, max_predictions=2, prefix="a")
  tiny_data.write_records(str(data / "b"), 2, 40, seq_len=8, max_predictions=2, prefix="b")
  sources = [stream.Source("a", str(data / "a" / "*"), 1.0),
             stream.Source("b", str(data / "b" / "*"), 1.0)]
  checked = []
  order, _ = stream.resume_order(None, 5, 1, 4, "files", sources, [[], []], 0)
  data_stream = stream.DataStream(order, distributed.init(False), str(out), checked.extend, 1)
  view = data_stream.view(0)
  assert [len(o.epochs) for o in data_stream.order.orders] == [1, 1]
  end_of_a = data_stream.order.stop_position()  # where source a's 8 records run out
  assert data_stream.order.consumed(end_of_a)[0] <= 8 < data_stream.order.consumed(end_of_a + 1)[0]
  tiny_data.write_records(str(data / "a"), 1, 4, seq_len=8, max_predictions=2, prefix="c")
  tiny_data.write_records(str(data / "a"), 1, 4, seq_len=8, max_predictions=2, prefix="d")
  data_stream.record_ahead(end_of_a)  # source a needs its epoch 1: the glob read again
  a_epochs = data_stream.order.orders[0].epochs
  assert [len(e.files) for e in a_epochs] == [2, 4] and len(checked) == 2
  assert len(data_stream.order.orders[1].epochs) == 1  # b goes on in its first epoch
  assert data_stream.first_change(view) == [1, None]
  assert data_stream.order.stop_position(1, num_epochs=[1, None]) == end_of_a
  assert stream.load_order(str(out)).to_json() == data_stream.order.to_json()
  assert data_stream.first_change(data_stream.view(end_of_a)) is None


@pytest.mark.parametrize("weights,problem", [
    ([1e308, 1.0], r"the largest weight is 1e\+308 times the smallest, more than the 1e\+06"),
    ([1e-320, 1.0], r"the largest weight is over 1\.8e308 times the smallest, more than the "
                    r"1e\+06"),
    ([2e6, 1.0], r"the largest weight is 2e\+06 times the smallest, more than the 1e\+06"),
])
def test_mixture_weights_the_schedule_cannot_represent_are_refused_in_one_line(weights, problem):
  sources = ["a=x/*:%r" % weights[0], "b=y/*:%r" % weights[1]]
  with pytest.raises(ValueError, match=r"^--input_source a:.*, b:1: %s a mixture's schedule "
                     r"represents: give weights within a factor 1e\+06 of each other$"
                     % problem) as error:
    train_sources.parse_input_sources(sources)
  assert "\n" not in str(error.value)
  with pytest.raises(ValueError, match=problem):
    stream.Schedule(weights, 1)  # the schedule refuses them too (a data_order.json's weights)
  with pytest.raises(ValueError, match="weight nan is not a finite number > 0"):
    stream.Schedule([float("nan"), 1.0], 1)


def test_weights_at_the_ends_of_float_arithmetic_give_the_same_schedule_as_small_ones():
  """Two weights of 1e308 sum to inf; normalised by the largest first they are 1:1. The ratio
  bound itself schedules (a source once in a million examples)."""
  huge, small = stream.Schedule([1e308, 1e308], 3), stream.Schedule([1.0, 1.0], 3)
  assert huge.fractions == small.fractions == [0.5, 0.5]
  assert huge.counts(1000) == small.counts(1000)
  edge = stream.Schedule([stream.MAX_WEIGHT_RATIO, 1.0], 3)
  first_rare = edge.index_of(1, 0)
  assert edge.sources(first_rare, first_rare + 1).tolist() == [1]
  assert 0 < first_rare < 2 * stream.MAX_WEIGHT_RATIO
