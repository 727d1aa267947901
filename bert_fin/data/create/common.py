"""What the two modes of create_pretraining_data (faithful.py, fast.py) share: the checks
before a run, the tokenizer and its special ids, the progress bar, and finishing a run (stats
JSON, summary, shard advice)."""
import logging
import os

from bert_fin import io_utils
from bert_fin import objectives
from bert_fin.data import writer as writer_lib
from bert_fin.data.create import sentence_documents
from bert_fin.data.create import masking
from bert_fin.data.create import options as options_lib
from bert_fin.records import masking_config as masking_config_lib
from bert_fin.text import raw_documents as text_documents

_LOG = logging.getLogger(__name__)

def preflight(options):
  """Checks what can be found before any work.

  Args:
    options: the run's options (options.py).

  Raises:
    ValueError: one line naming flag, file and fix: outputs that cannot be written, inputs that
      cannot be read (a directory, no permission), a vocab or user dictionary that is not UTF-8
      text, input files that are the wrong kind of input (sentence_documents.check_inputs: HTML
      pages, JSON Lines without "sentences").
  """
  paths, stats_path = writer_lib.output_paths(options.output_file, options.num_output_files)
  io_utils.check_output_files(paths + [stats_path], "--output_file")
  input_paths = io_utils.expand_file_patterns(options.input_file)
  io_utils.check_input_files(input_paths, "--input_file")
  for flag, path in (("--vocab_file", options.vocab_file), ("--user_dict", options.user_dict)):
    if path and "://" not in path:
      io_utils.check_input_files([path], flag)
      problem = text_documents.not_utf8_text(path)
      if problem:
        raise ValueError("%s %s is %s" % (flag, path, problem))
  sentence_documents.check_inputs(input_paths, options.input_format)


def load_tokenizer(vocab_file, do_lower_case, fast):
  """The tokenizer of --vocab_file.

  Args:
    vocab_file, do_lower_case: as tokenization.make_tokenizer.
    fast: try the fast tokenizer first.

  Returns:
    make_tokenizer(fast=...), falling back to the pure-Python FullTokenizer if the fast one is
    unavailable (logged).
  """
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
  """Moves a byte bar to position.bytes_read() (sentence_documents.ReadPosition)."""
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
  """Stops a run whose input gave no training instance.

  Raises:
    ValueError: stats counts no instance (nothing is written then); names what was skipped.
  """
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


def sentence_limit(options):
  """The most tokens of one sentence an instance keeps whole.

  Returns:
    objective bert: max_seq_length - 3, what its pair holds (longer sentences are cut, as in
    google's algorithm); None for roberta, which splits long sentences over instances.
  """
  return options.max_seq_length - 3 if options.objective == objectives.BERT else None


def warn_overlong(stats, options):
  """Logs how many sentences lost tokens to truncation (stats.overlong_sentences)."""
  if stats.overlong_sentences:
    _LOG.warning(
        "%d sentence(s) are longer than max_seq_length - 3 = %d tokens: each is cut to fit one "
        "instance (google's algorithm) and the rest of its tokens never reaches a record. Split "
        "long lines (tools/clean_corpus.py cuts sentences at --max_sentence_chars), raise "
        "--max_seq_length, or use --objective roberta", stats.overlong_sentences,
        sentence_limit(options))


_SKIP_WARNINGS = {
    "markup": "%d document(s) skipped: mostly HTML/XML markup (tags, scripts, entities); clean "
              "that input with tools/clean_corpus.py to train on its text",
    "no_sentences_field": "%d JSON line(s) skipped: no \"sentences\" list of strings (JSON "
                          "Lines input is tools/clean_corpus.py output)",
}


def warn_skips(stats):
  """Logs the skipped documents that mean part of the input is the wrong kind of input."""
  for reason, message in _SKIP_WARNINGS.items():
    if stats.documents_skipped.get(reason):
      _LOG.warning(message, stats.documents_skipped[reason])


def finish(options, stats, stats_path, paths, counts, seconds, mode, num_workers, segmenter,
           record_kernel=None, masking_config=None):
  """Writes the stats JSON atomically and logs the summary/advice.

  Args:
    options: the run's options.
    stats: the run's PretrainingStats.
    stats_path: where the stats JSON goes.
    paths, counts: the output files and the records each got.
    seconds: the run's wall time.
    mode, num_workers, segmenter, record_kernel: recorded in the JSON (segmenter may be None).
    masking_config: records/masking_config.py's MaskingConfig, written as "dynamic_masking" for --masking=dynamic
      (what training needs to draw the masks: [MASK], the random-replacement ids, prob and cap).

  Returns:
    the stats dict.
  """
  advice = shard_advice(len(paths))
  if advice:
    _LOG.warning(advice)
  warn_skips(stats)
  warn_overlong(stats, options)
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
  if options.masking == "dynamic":
    extra["dynamic_masking"] = masking_config_lib.config_to_json(masking_config)
  result = stats.to_json(options.max_seq_length, extra)
  io_utils.write_json_atomic(stats_path, result)
  _LOG.info("wrote %d instances to %d file(s); stats in %s", stats.instances, len(paths),
            stats_path)
  return result
