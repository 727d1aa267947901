"""The fast pipeline's NSP records from the optional C kernel, with the pure-Python path as fallback.

`make_nsp_block(documents, encoder, config, unk_id, kernel)` returns an object with
`dupe_records(rng, stats) -> (records, produced)`: the TFRecord-framed records of every document of
the block for one dupe, in order, and per document whether it gave a record. Both implementations
return the same bytes and leave `rng` in the same state (tested):

  python  fused.FusedBlock (~35 us per instance on one core)
  c       _nsp_kernel.c, compiled by `pip install` / `make install` (~2 us per instance). It runs
          CPython's Mersenne Twister on the state of the `random.Random` it is given
          (getstate/setstate), so it makes exactly the Python path's draws.

`kernel="auto"` uses C when the extension was built and says so once in the log when it was not
(e.g. installed without a C compiler); "c" requires it; "python" forces the fallback.
"""
import logging

from bert_fin.data import fused
from bert_fin.data import masking

_LOG = logging.getLogger(__name__)
KERNELS = ("auto", "c", "python")

try:
  from bert_fin.data import _nsp_kernel
  IMPORT_ERROR = None
except ImportError as e:  # not compiled: the pure-Python path does the same work, slower
  _nsp_kernel = None
  IMPORT_ERROR = str(e)

_warned = False


def available():
  """True when the C extension is importable."""
  return _nsp_kernel is not None


def resolve(kernel):
  """"auto" | "c" | "python" -> "c" or "python"; "c" without the extension is a RuntimeError with
  the fix."""
  global _warned
  if kernel not in KERNELS:
    raise ValueError("kernel must be one of %s, got %r" % (KERNELS, kernel))
  if kernel == "python":
    return "python"
  if available():
    return "c"
  if kernel == "c":
    raise RuntimeError("the C kernel bert_fin.data._nsp_kernel is not built (%s); run `make "
                       "install` (needs a C compiler and Python headers) or use --kernel python"
                       % IMPORT_ERROR)
  if not _warned:
    _LOG.warning("C kernel unavailable (%s): using the pure-Python NSP path, ~10x slower per "
                 "instance; `make install` builds it", IMPORT_ERROR)
    _warned = True
  return "python"


class KernelBlock(object):
  """fused.FusedBlock's dupe_records in C (see the module docstring)."""

  def __init__(self, documents, encoder, config, unk_id):
    """documents: list of list[instances.Sentence] (ids and starts lists, every sentence and
    document non-empty); encoder: writer.ExampleEncoder; config: instances.InstanceConfig, objective
    "bert"."""
    s = config.max_seq_length
    budgets = [masking.num_to_predict(n, config.masked_lm_prob, config.max_predictions_per_seq)
               for n in range(s + 1)]
    sentences = [[(list(sentence.ids), list(sentence.starts)) for sentence in document]
                 for document in documents]
    self._block = _nsp_kernel.make_block(
        sentences, s, config.max_predictions_per_seq, float(config.short_seq_prob), config.cls_id,
        config.sep_id, config.mask_id, unk_id, list(config.random_ids), budgets,
        encoder.packed_tables())

  def dupe_records(self, rng, stats):
    """(records, produced) for one dupe; rng: random.Random (advanced as the Python path would);
    stats: stats.PretrainingStats, updated."""
    version, internal, gauss = rng.getstate()
    records, produced, counts, histogram, internal = _nsp_kernel.dupe_records(self._block, internal)
    rng.setstate((version, internal, gauss))
    stats.add_totals(*counts, length_histogram=histogram)
    return records, [bool(made) for made in produced]


def make_nsp_block(documents, encoder, config, unk_id, kernel="auto"):
  """KernelBlock or fused.FusedBlock for resolve(kernel)."""
  if resolve(kernel) == "c":
    return KernelBlock(documents, encoder, config, unk_id)
  return fused.FusedBlock(documents, encoder, config, unk_id)
