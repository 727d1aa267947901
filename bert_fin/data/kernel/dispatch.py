"""Dispatch between the compiled C kernel and the pure-Python reference path for the fast mode.

`make_block(documents, encoder, config, unk_id, kernel)` returns an object with
`dupe_records(rng, stats) -> (records, produced)`: the TFRecord-framed records of every document of
the block for one dupe, in order, and per document whether it gave a record; `stats`
(stats.PretrainingStats) counts each instance. Both implementations return the same bytes, count
the same stats and leave `rng` in the same state (tests/test_kernel.py):

  python  ReferenceBlock: instances.create_document_instances (pairing, masking.py's masking) +
          ExampleEncoder.encode + TFRecord framing (UnmaskedExampleEncoder and no masking draws
          for dynamic-masking records), for both objectives: the readable reference,
          and the fallback when the extension was not built (docs/data.md, section 4, for its speed)
  c       _kernel.c, compiled by `make install` / `pip install`. It runs CPython's Mersenne
          Twister on the state of the `random.Random` it is given (getstate/setstate), so it makes
          exactly the reference path's draws.
A masking or pairing algorithm therefore lives in create/masking.py / create/instances.py and in
_kernel*.c/h, nowhere else; the 80/10/10 and next-sentence probabilities live in
create/pretraining_rules.py only and reach the C kernel as make_block parameters. data/shuffle.py
asks resolve() and c_module() here too (the parent's shuffle window in C).

`kernel="auto"` uses C when the extension was built and warns once when it was not (e.g. installed
without a C compiler); "c" requires it; "python" forces the pure-Python path.
"""
import logging

from bert_fin.data.create import instances as instances_lib
from bert_fin.data.create import masking
from bert_fin.data.create import pretraining_rules
from bert_fin.records import tfrecord_index

_LOG = logging.getLogger(__name__)
KERNELS = ("auto", "c", "python")

try:
  from bert_fin.data.kernel import _kernel
  IMPORT_ERROR = None
except ImportError as e:  # not compiled: the pure-Python path does the same work, slower
  _kernel = None
  IMPORT_ERROR = str(e)

_warned = False


def c_module():
  """The compiled extension (callers resolve() first)."""
  return _kernel


def available():
  """True when the C extension is importable."""
  return _kernel is not None


def resolve(kernel):
  """Chooses the implementation for a --kernel value (warns once when "auto" falls back).

  Args:
    kernel: "auto", "c" or "python".

  Returns:
    "c" or "python".

  Raises:
    ValueError: an unknown kernel.
    RuntimeError: "c" without the extension, with the fix.
  """
  global _warned
  if kernel not in KERNELS:
    raise ValueError("kernel must be one of %s, got %r" % (KERNELS, kernel))
  if kernel == "python":
    return "python"
  if available():
    return "c"
  if kernel == "c":
    raise RuntimeError("the C kernel bert_fin.data.kernel._kernel is not built (%s); run `make install` "
                       "(needs a C compiler and Python headers) or use --kernel python"
                       % IMPORT_ERROR)
  if not _warned:
    _LOG.warning("C kernel unavailable (%s): using the pure-Python path, ~15-20x slower per "
                 "instance; `make install` builds it", IMPORT_ERROR)
    _warned = True
  return "python"


def frame_instance(inst, encoder, mask_id, unk_id, stats):
  """Encodes and frames one instance, counting it in stats.

  Args:
    inst: instances.Instance (with writer.ExampleEncoder) or instances.UnmaskedInstance (with
      writer.UnmaskedExampleEncoder).
    encoder: the matching encoder.
    mask_id, unk_id: the [MASK] and [UNK] ids (stats counts them).
    stats: stats.PretrainingStats, updated.

  Returns:
    the TFRecord-framed serialized Example bytes.
  """
  if isinstance(inst, instances_lib.UnmaskedInstance):
    stats.add_instance(inst.input_ids, [], [], inst.next_sentence_label, mask_id, unk_id)
  else:
    stats.add_instance(inst.input_ids, inst.masked_lm_positions, inst.masked_lm_ids,
                       inst.next_sentence_label, mask_id, unk_id)
  return tfrecord_index.frame_record(encoder.encode(*inst))


class ReferenceBlock(object):
  """dupe_records through instances.create_document_instances (both objectives): the pure-Python
  path and the reference the C kernel is tested against."""

  def __init__(self, documents, encoder, config, unk_id):
    self.documents, self.encoder, self.config, self.unk_id = documents, encoder, config, unk_id
    self.prepared = None
    if config.objective == "bert":  # pairs read other documents of the block: flatten once
      self.prepared = [instances_lib.prepare_document(d) for d in documents]

  def document_records(self, position, rng, stats):
    return [frame_instance(inst, self.encoder, self.config.mask_id, self.unk_id, stats)
            for inst in instances_lib.create_document_instances(
                self.documents, position, self.config, rng, self.prepared)]

  def dupe_records(self, rng, stats):
    """The records of one dupe of the block.

    Args:
      rng: random.Random, advanced.
      stats: stats.PretrainingStats, updated.

    Returns:
      (records, produced): document_records for positions 0..n-1 in order; produced[d] is True
      when document d gave at least one record.
    """
    records, produced = [], []
    for position in range(len(self.documents)):
      made = self.document_records(position, rng, stats)
      produced.append(bool(made))
      records += made
    return records, produced


class KernelBlock(object):
  """dupe_records in C (see the module docstring)."""

  def __init__(self, documents, encoder, config, unk_id):
    """documents: list of list[instances.Sentence] (ids and starts lists or tuples, every sentence
    and document non-empty); encoder: writer.ExampleEncoder (writer.UnmaskedExampleEncoder with
    config.dynamic_masking); config: instances.InstanceConfig."""
    s = config.max_seq_length
    budgets = masking.budget_table(s, config.masked_lm_prob, config.max_predictions_per_seq)
    self._block = _kernel.make_block(
        documents if isinstance(documents, list) else list(documents),
        config.objective == "roberta", s, config.max_predictions_per_seq,
        float(config.short_seq_prob), *pretraining_rules.kernel_parameters(), config.cls_id,
        config.sep_id, config.mask_id, unk_id, list(config.random_ids), budgets,
        encoder.packed_tables(), config.dynamic_masking)

  def dupe_records(self, rng, stats):
    """(records, produced) for one dupe; rng: random.Random (advanced as the Python path would);
    stats: stats.PretrainingStats, updated."""
    version, internal, gauss = rng.getstate()
    records, produced, counts, histogram, internal = _kernel.dupe_records(self._block, internal)
    rng.setstate((version, internal, gauss))
    stats.add_totals(*counts, length_histogram=histogram)
    return records, [bool(made) for made in produced]


def make_block(documents, encoder, config, unk_id, kernel="auto"):
  """The block of documents for one implementation (see the module docstring).

  Args:
    documents: list of list[instances.Sentence], every sentence and document non-empty.
    encoder: writer.ExampleEncoder (writer.UnmaskedExampleEncoder with config.dynamic_masking).
    config: instances.InstanceConfig.
    unk_id: the [UNK] id.
    kernel: "auto", "c" or "python".

  Returns:
    KernelBlock for resolve(kernel) == "c", else ReferenceBlock; both have
    dupe_records(rng, stats) -> (records, produced).

  Raises:
    ValueError, RuntimeError: as resolve.
  """
  if resolve(kernel) == "c":
    return KernelBlock(documents, encoder, config, unk_id)
  return ReferenceBlock(documents, encoder, config, unk_id)
