"""What the two modes of create_pretraining_data (faithful.py, pipeline.py) share: the tokenizer
and its special ids, the progress bar, and finishing a run (stats JSON, summary, shard advice)."""
import logging
import os

from bert_fin import io_utils
from bert_fin.data import options as options_lib

_LOG = logging.getLogger(__name__)

def load_tokenizer(vocab_file, do_lower_case, fast):
  """make_tokenizer(fast=...), falling back to the pure-Python FullTokenizer if the fast one is
  unavailable (logged)."""
  from bert_fin import tokenization  # pylint: disable=import-outside-toplevel
  if fast:
    try:
      return tokenization.make_tokenizer(vocab_file, do_lower_case, fast=True)
    except ImportError as e:
      _LOG.warning("fast tokenizer unavailable (%s); using the pure-Python FullTokenizer", e)
  return tokenization.make_tokenizer(vocab_file, do_lower_case, fast=False)


def progress_bar(enabled, unit="doc", total=None):
  """tqdm on stderr; unit "B" (total = input bytes) shows KiB/MiB and an ETA."""
  from tqdm import tqdm  # pylint: disable=import-outside-toplevel
  scaled = dict(unit_scale=True, unit_divisor=1024) if unit == "B" else {}
  return tqdm(unit=unit, total=total, disable=not enabled, mininterval=1.0, dynamic_ncols=True,
              **scaled)


def advance_to(bar, position):
  """Moves a byte bar to position.bytes_read() (documents.ReadPosition)."""
  done = position.bytes_read()
  if done > bar.n:
    bar.update(done - bar.n)


def shard_advice(num_output_files):
  """The training side needs num_output_files % workers == 0; warn about odd or small counts."""
  if num_output_files == 1:
    return "1 output file: training can only use 1 worker (needs num_output_files % workers == 0)"
  if num_output_files % 2 or num_output_files < 8:
    return ("%d output files: training needs num_output_files %% workers == 0, so only worker counts"
            " dividing %d are possible" % (num_output_files, num_output_files))
  return None


UNK_RATE_WARNING = 0.01


def check_produced(stats):
  """Raises ValueError (nothing is written then) when the input gave no training instance."""
  if stats.instances == 0:
    raise ValueError(
        "no training instance from %d document(s) read (skipped: %s); nothing written. Is the "
        "input empty, binary or not UTF-8 (clean_corpus detects encodings), or --input_format "
        "wrong?" % (stats.documents_read, dict(stats.documents_skipped) or "none"))


def warn_unk_rate(stats, threshold=UNK_RATE_WARNING):
  """Logs why a [UNK] rate above threshold matters and what to do about it."""
  rate = stats.unk_tokens / stats.tokens if stats.tokens else 0.0
  if rate > threshold:
    _LOG.warning(
        "[UNK] rate %.1f%% (%d of %d tokens) is above %.0f%%: the text has characters the vocab "
        "lacks, often because the vocab was built from normalised text (clean_corpus: full-width "
        "to half-width, control characters removed) and this input is raw, or the vocab is small "
        "for this text. Clean the input with clean_corpus, add the missing characters with "
        "build_vocab --base_vocab, or build a larger vocab (--vocab_size)",
        100 * rate, stats.unk_tokens, stats.tokens, 100 * threshold)


def finish(options, stats, stats_path, paths, counts, seconds, mode, num_workers, segmenter,
           record_kernel=None):
  """Writes the stats JSON atomically and logs the summary/advice; returns the stats dict."""
  advice = shard_advice(len(paths))
  if advice:
    _LOG.warning(advice)
  warn_unk_rate(stats)
  extra = {
      "mode": mode,
      "num_workers": num_workers,
      "seconds": round(seconds, 3),
      "instances_per_second": round(stats.instances / seconds, 1) if seconds > 0 else None,
      "output_files": {os.path.basename(p): n for p, n in zip(paths, counts)},
      "shard_advice": advice,
      "record_kernel": record_kernel,
      "segmenter": segmenter.name if segmenter else None,
      "segmenter_fallback": segmenter.fallback_reason if segmenter else None,
      "segmenter_protected_words": len(segmenter.protected_words) if segmenter else 0,
      "options": {k: v for k, v in options_lib.as_dict(options).items() if k != "progress"},
  }
  result = stats.to_json(options.max_seq_length, extra)
  io_utils.write_json_atomic(stats_path, result)
  _LOG.info("wrote %d instances to %d file(s); stats in %s", stats.instances, len(paths),
            stats_path)
  return result
