"""The C NSP kernel (data/_nsp_kernel.c) against the pure-Python path (fused.FusedBlock): the same
bytes, the same stats, the same rng state afterwards, over many random blocks and configs."""
import functools
import random

import pytest

from bert_fin.data import fused
from bert_fin.data import instances
from bert_fin.data import nsp_kernel
from bert_fin.data import stats as stats_lib
from bert_fin.data import writer

CLS, SEP, MASK, UNK = 2, 3, 4, 1


def _doc(rng, num_sentences, max_len):
  doc = []
  for _ in range(num_sentences):
    n = rng.randint(1, max_len)
    ids = [rng.choice([UNK, MASK]) if rng.random() < 0.05 else rng.randint(100, 70000)
           for _ in range(n)]
    doc.append(instances.Sentence(ids, [rng.random() < 0.6 for _ in range(n)]))
  return doc


def _random_case(rng):
  max_seq_length = rng.choice([5, 8, 32, 128, 512])
  config = instances.InstanceConfig(
      max_seq_length, rng.choice([1, 5, 20, 80]), rng.choice([0.15, 0.5, 0.9]),
      rng.choice([0.0, 0.1, 1.0]), "bert", CLS, SEP, MASK,
      rng.sample(range(100, 5000), rng.choice([1, 7, 500])))
  # long sentences force truncations of > 64 tokens (getrandbits over several 32-bit words)
  block = [_doc(rng, rng.randint(1, 9), rng.choice([3, 12, 40, 300]))
           for _ in range(rng.randint(1, 6))]
  return block, config, _encoder(max_seq_length, config.max_predictions_per_seq,
                                 rng.random() < 0.5)


@functools.lru_cache(maxsize=None)
def _encoder(max_seq_length, max_predictions_per_seq, write_input_mask):
  return writer.ExampleEncoder(max_seq_length, max_predictions_per_seq, write_input_mask,
                               max_value=70000)


def _run(block_object, seed):
  rng, stats = random.Random(seed), stats_lib.PretrainingStats()
  records, produced = block_object.dupe_records(rng, stats)
  return records, produced, stats.to_json(512), rng.getstate()


def test_kernel_is_built():
  """make install builds the extension; a silent fallback would hide a broken build in CI."""
  assert nsp_kernel.available(), nsp_kernel.IMPORT_ERROR
  assert nsp_kernel.resolve("auto") == "c"


@pytest.mark.parametrize("case_seed", range(12))
def test_kernel_equals_python_path(case_seed):
  rng = random.Random(case_seed)
  for trial in range(25):
    block, config, encoder = _random_case(rng)
    python_block = fused.FusedBlock(block, encoder, config, UNK)
    c_block = nsp_kernel.KernelBlock(block, encoder, config, UNK)
    for dupe in range(2):
      seed = rng.getrandbits(64)
      want = _run(python_block, seed)
      got = _run(c_block, seed)
      assert got[0] == want[0] and got[0]
      assert got[1:] == want[1:]


def test_python_block_equals_document_records_in_order():
  rng = random.Random(3)
  block, config, encoder = _random_case(rng)
  python_block = fused.FusedBlock(block, encoder, config, UNK)
  records, produced = python_block.dupe_records(random.Random(9), stats_lib.PretrainingStats())
  again, draws = [], random.Random(9)
  for position in range(len(block)):
    again += python_block.document_records(position, draws, stats_lib.PretrainingStats())
  assert records == again and all(produced)


def test_kernel_rejects_bad_input_with_a_message():
  config = instances.InstanceConfig(16, 3, 0.15, 0.1, "bert", CLS, SEP, MASK, [100, 101])
  encoder = writer.ExampleEncoder(16, 3, max_value=1000)
  with pytest.raises(ValueError, match="non-empty"):
    nsp_kernel.KernelBlock([[]], encoder, config, UNK)
  with pytest.raises(ValueError, match="out of range"):
    nsp_kernel.KernelBlock([[instances.Sentence([-5], [True])]], encoder, config, UNK)
  # ids whose varints do not fit the encoder's tables (max_value too small) -> error, not garbage
  block = nsp_kernel.KernelBlock([[instances.Sentence([10 ** 9] * 12, [True] * 12)]], encoder,
                                 config, UNK)
  with pytest.raises(ValueError, match="payload too long"):
    block.dupe_records(random.Random(0), stats_lib.PretrainingStats())


def test_kernel_crc_paths_equal_tfrecord_index():
  from bert_fin import tfrecord_index
  from bert_fin.data import _nsp_kernel
  rng = random.Random(5)
  for size in (0, 1, 7, 8, 9, 63, 64, 65, 1000):
    data = bytes(rng.getrandbits(8) for _ in range(size))
    want = tfrecord_index.masked_crc32c(data)
    assert _nsp_kernel.masked_crc32c(data, True) == want
    assert _nsp_kernel.masked_crc32c(data, False) == want


def test_resolve_choices():
  assert nsp_kernel.resolve("python") == "python"
  with pytest.raises(ValueError):
    nsp_kernel.resolve("fortran")
