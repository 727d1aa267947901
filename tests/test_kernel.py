"""The C kernel (data/kernel/_kernel.c) against the pure-Python reference path (kernel_dispatch.
ReferenceBlock: instances.create_document_instances + encode + framing, both objectives, static
and dynamic-masking records): the same bytes, the same stats, the same rng state afterwards, over
many random blocks and configs."""
import functools
import random

import pytest

from bert_fin.data import writer
from bert_fin.data.create import instances
from bert_fin.data.create import pretraining_rules
from bert_fin.data.create import stats as stats_lib
from bert_fin.data.kernel import dispatch as kernel

CLS, SEP, MASK, UNK = 2, 3, 4, 1


def _doc(rng, num_sentences, max_len):
  doc = []
  for _ in range(num_sentences):
    n = rng.randint(1, max_len)
    ids = [rng.choice([UNK, MASK]) if rng.random() < 0.05 else rng.randint(100, 70000)
           for _ in range(n)]
    starts = [rng.random() < 0.6 for _ in range(n)]
    if rng.random() < 0.3:  # the kernel reads tuples as well as lists
      ids, starts = tuple(ids), tuple(starts)
    doc.append(instances.Sentence(ids, starts))
  return doc


def _random_case(rng):
  objective = rng.choice(["bert", "roberta"])
  max_seq_length = rng.choice([5, 8, 32, 128, 512] + [4] * (objective == "roberta"))
  random_ids = rng.sample(range(100, 5000), rng.choice([1, 7, 500]))
  if rng.random() < 0.3:
    random_ids.append(MASK)  # a random replacement that is [MASK] still counts as one
  dynamic_masking = rng.random() < 0.3  # unmasked records with word_starts, no masking draws
  config = instances.InstanceConfig(
      max_seq_length, rng.choice([1, 5, 20, 80]), rng.choice([0.15, 0.5, 0.9]),
      rng.choice([0.0, 0.1, 1.0]), objective, CLS, SEP, MASK, random_ids, dynamic_masking)
  # long sentences force truncations of > 64 tokens (getrandbits over several 32-bit words) and
  # roberta's cutting of sentences longer than the maximum
  block = [_doc(rng, rng.randint(1, 9), rng.choice([3, 12, 40, 300]))
           for _ in range(rng.randint(1, 6))]
  return block, config, _encoder(max_seq_length, config.max_predictions_per_seq,
                                 rng.random() < 0.5, dynamic_masking)


@functools.lru_cache(maxsize=None)
def _encoder(max_seq_length, max_predictions_per_seq, write_input_mask, dynamic_masking):
  if dynamic_masking:
    return writer.UnmaskedExampleEncoder(max_seq_length, max_value=70000)
  return writer.ExampleEncoder(max_seq_length, max_predictions_per_seq, write_input_mask,
                               max_value=70000)


def _run(block_object, seed):
  rng, stats = random.Random(seed), stats_lib.PretrainingStats()
  records, produced = block_object.dupe_records(rng, stats)
  return records, produced, stats.to_json(512), rng.getstate()


def test_kernel_is_built():
  """make install builds the extension; a silent fallback would hide a broken build in CI."""
  assert kernel.available(), kernel.IMPORT_ERROR
  assert kernel.resolve("auto") == "c"


@pytest.mark.parametrize("case_seed", range(12))
def test_kernel_equals_python_path(case_seed):
  rng = random.Random(case_seed)
  for trial in range(25):
    block, config, encoder = _random_case(rng)
    python_block = kernel.make_block(block, encoder, config, UNK, kernel="python")
    assert isinstance(python_block, kernel.ReferenceBlock)
    c_block = kernel.make_block(block, encoder, config, UNK, kernel="c")
    for dupe in range(2):
      seed = rng.getrandbits(64)
      want = _run(python_block, seed)
      got = _run(c_block, seed)
      assert got[0] == want[0] and got[0]
      assert got[1:] == want[1:]


# other 80/10/10 and next-sentence probabilities, self-consistent:
# RANDOM_SCALE = 1 / (1 - RANDOM_FROM)
OTHER_RULES = {"MASK_BELOW": 0.5, "RANDOM_FROM": 0.75, "RANDOM_SCALE": 4.0,
               "RANDOM_NEXT_BELOW": 0.25}


def test_kernel_takes_the_rules_from_pretraining_rules(monkeypatch):
  """The rules changed in pretraining_rules.py only: C and Python still write the same bytes, and
  not those of google's rules (neither has 0.8 / 0.9 / 0.5 built in)."""
  rng = random.Random(99)
  cases = [_random_case(rng) for _ in range(40)]
  seeds = [rng.getrandbits(64) for _ in cases]

  def records(kernel_name):
    return [_run(kernel.make_block(block, encoder, config, UNK, kernel=kernel_name), seed)
            for (block, config, encoder), seed in zip(cases, seeds)]

  googles = records("c")
  for name, value in OTHER_RULES.items():
    monkeypatch.setattr(pretraining_rules, name, value)
  others = records("c")
  assert others == records("python")
  changed = [i for i, (other, google) in enumerate(zip(others, googles)) if other != google]
  assert len(changed) > len(cases) // 2, changed


def test_kernel_rejects_rules_out_of_range(monkeypatch):
  config = instances.InstanceConfig(16, 3, 0.15, 0.1, "bert", CLS, SEP, MASK, [100, 101])
  monkeypatch.setattr(pretraining_rules, "RANDOM_FROM", 0.7)  # below MASK_BELOW
  with pytest.raises(ValueError, match="mask_below <= random_from"):
    kernel.KernelBlock([[instances.Sentence([100], [True])]], _encoder(16, 3, False, False),
                       config, UNK)


def test_kernel_rejects_bad_input_with_a_message():
  config = instances.InstanceConfig(16, 3, 0.15, 0.1, "bert", CLS, SEP, MASK, [100, 101])
  encoder = writer.ExampleEncoder(16, 3, max_value=1000)
  with pytest.raises(ValueError, match="non-empty"):
    kernel.KernelBlock([[]], encoder, config, UNK)
  with pytest.raises(ValueError, match="out of range"):
    kernel.KernelBlock([[instances.Sentence([-5], [True])]], encoder, config, UNK)
  # ids whose varints do not fit the encoder's tables (max_value too small) -> error, not garbage
  block = kernel.KernelBlock([[instances.Sentence([10 ** 9] * 12, [True] * 12)]], encoder,
                                 config, UNK)
  with pytest.raises(ValueError, match="payload too long"):
    block.dupe_records(random.Random(0), stats_lib.PretrainingStats())


def test_kernel_crc_paths_equal_tfrecord_index():
  from bert_fin.data.kernel import _kernel
  from bert_fin.records import tfrecord_index
  rng = random.Random(5)
  for size in (0, 1, 7, 8, 9, 63, 64, 65, 1000):
    data = bytes(rng.getrandbits(8) for _ in range(size))
    want = tfrecord_index.masked_crc32c(data)
    assert _kernel.masked_crc32c(data, True) == want
    assert _kernel.masked_crc32c(data, False) == want


def test_without_the_extension_auto_warns_once_and_c_says_how_to_build(monkeypatch, caplog):
  monkeypatch.setattr(kernel, "_kernel", None)
  monkeypatch.setattr(kernel, "IMPORT_ERROR", "No module named '_kernel'")
  monkeypatch.setattr(kernel, "_warned", False)
  assert kernel.resolve("auto") == "python" and kernel.resolve("auto") == "python"
  assert caplog.text.count("C kernel unavailable") == 1
  with pytest.raises(RuntimeError, match="make install"):
    kernel.resolve("c")
  config = instances.InstanceConfig(16, 3, 0.15, 0.1, "roberta", CLS, SEP, MASK, [100, 101])
  block = kernel.make_block([[instances.Sentence([100, 101], [True, False])]],
                            _encoder(16, 3, False, False), config, UNK)
  assert isinstance(block, kernel.ReferenceBlock)


def test_resolve_choices():
  assert kernel.resolve("python") == "python"
  with pytest.raises(ValueError):
    kernel.resolve("fortran")
