"""Noise filters: span removal inside a document and document-level rejection, each by a reason.

Span filter (text -> text, count):   remove_noise_runs (hash / base64 / URL-like runs).
Document filters (text -> reason or None): too_short, low_cjk_ratio; `first_rejection` runs them.
Corpus-level filters (state across documents): DuplicateFilter (8-byte digests of exact text),
repeated-line boilerplate via `line_digest` + a set of frequent digests.
"""
import dataclasses
import hashlib
import re

from bert_fin.text import cjk

# Reasons a document is filtered; the stats JSON uses these names as keys.
REASON_EMPTY = "empty"
REASON_BINARY = "binary"
REASON_BAD_JSON = "bad_json"
REASON_NO_TEXT_FIELD = "no_text_field"
REASON_TOO_SHORT = "too_short"
REASON_LOW_CJK_RATIO = "low_cjk_ratio"
REASON_DUPLICATE = "duplicate"
REASON_UNREADABLE = "unreadable"
REASON_CLEAN_ERROR = "clean_error"

_URL_RE = re.compile(r"(?:https?://|ftp://|www\.)[\x21-\x7e]+", re.IGNORECASE)
# A run of non-CJK, non-space ASCII symbols typical of hashes, base64, paths and query strings.
_TOKENISH_CHARS = r"[A-Za-z0-9+/=_\-.:%?&#~@]"
_LETTER_RE = re.compile(r"[A-Za-z]")
_DIGIT_RE = re.compile(r"[0-9]")


@dataclasses.dataclass(frozen=True)
class FilterConfig:
  """Thresholds of the noise filters; 0 disables a numeric filter.

  min_noise_run: runs of >= this many ASCII symbol characters mixing letters and digits (or
    containing '/', '=' or a URL scheme) are cut out of the text.
  min_chars: documents with fewer characters (after cleaning) are `too_short`.
  min_cjk_ratio: documents whose CJK / non-space character ratio is lower are `low_cjk_ratio`.
  drop_duplicates: exact duplicate documents (after cleaning) are `duplicate`.
  boilerplate_min_docs: lines seen in at least this many documents are removed (0 = off).
  """
  min_noise_run: int = 16
  remove_urls: bool = True
  min_chars: int = 20
  min_cjk_ratio: float = 0.3
  drop_duplicates: bool = True
  boilerplate_min_docs: int = 0


def is_cjk_char(ch):
  """True for CJK ideographs: google's ranges, defined once in text/cjk.py."""
  return cjk.is_chinese_char(ord(ch))


_NON_CJK_RE = re.compile("[^%s]" % "".join("%s-%s" % (chr(first), chr(last))
                                           for first, last in cjk.CJK_RANGES))


_WHITESPACE_RE = re.compile(r"\s+")


def visible_length(text):
  """Number of non-whitespace characters."""
  return len(text) - sum(len(run) for run in _WHITESPACE_RE.findall(text))


def cjk_ratio(text):
  """CJK ideographs / non-whitespace characters, 0.0 for an empty text."""
  visible = visible_length(text)
  if visible == 0:
    return 0.0
  return len(_NON_CJK_RE.sub("", text)) / visible


def _looks_like_noise(run):
  """A long ASCII run is noise when it mixes letters and digits or has path/base64 symbols."""
  has_letter = _LETTER_RE.search(run) is not None
  has_digit = _DIGIT_RE.search(run) is not None
  return (has_letter and has_digit) or "/" in run or "=" in run


def remove_noise_runs(text, min_run=16, remove_urls=True):
  """Cuts URLs and hash/base64-like runs (>= min_run chars) out of `text`.

  Returns (text, removed_runs: int). Plain long English words (no digits, no '/') are kept;
  min_run <= 0 disables the run rule.
  """
  removed = 0
  if remove_urls:
    text, removed = _URL_RE.subn("", text)
  if min_run > 0:
    pattern = re.compile("%s{%d,}" % (_TOKENISH_CHARS, min_run))

    def _cut(match):
      nonlocal removed
      if _looks_like_noise(match.group(0)):
        removed += 1
        return ""
      return match.group(0)

    text = pattern.sub(_cut, text)
  return text, removed


def too_short(text, min_chars):
  """True when the text has fewer than min_chars non-whitespace characters."""
  return min_chars > 0 and visible_length(text) < min_chars


def low_cjk_ratio(text, min_ratio):
  return min_ratio > 0 and cjk_ratio(text) < min_ratio


def first_rejection(text, config):
  """The reason the cleaned `text` is rejected by the per-document filters, or None to keep it."""
  if not text.strip():
    return REASON_EMPTY
  if too_short(text, config.min_chars):
    return REASON_TOO_SHORT
  if low_cjk_ratio(text, config.min_cjk_ratio):
    return REASON_LOW_CJK_RATIO
  return None


def digest64(text):
  """8-byte blake2b digest of a text (the only per-document state kept for the whole corpus)."""
  return hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()


def line_digest(line):
  return digest64(line.strip())


def remove_boilerplate_lines(text, frequent_digests):
  """Drops the lines of `text` whose digest is in `frequent_digests`. Returns (text, removed)."""
  if not frequent_digests:
    return text, 0
  kept, removed = [], 0
  for line in text.split("\n"):
    if line.strip() and line_digest(line) in frequent_digests:
      removed += 1
    else:
      kept.append(line)
  return "\n".join(kept), removed


class DuplicateFilter:
  """Remembers 8-byte digests of kept documents; `seen(digest)` is True for a repeat."""

  def __init__(self):
    self._digests = set()

  def seen(self, digest):
    if digest in self._digests:
      return True
    self._digests.add(digest)
    return False

  def __len__(self):
    return len(self._digests)
