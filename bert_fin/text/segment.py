"""Chinese word segmentation for whole-word masking: jieba or rjieba, plus a jieba user dictionary.

A segmenter turns one sentence into words: `segmenter.cut("无创dna检测") -> ["无创", "dna", "检测"]`.
Whitespace-only words are dropped (the word-piece tokenizer drops them anyway). Each word becomes one
whole-word-masking group after word-piecing (see data/create/instances.py).

User dictionary (jieba format, UTF-8): one entry a line, `word [freq] [tag]`; blank lines and lines
starting with `#` are ignored. Company full and short names, stock codes and product terms listed
there are kept as single words.

jieba (and rjieba) first split text into blocks of CJK, ASCII letters, digits and `+#&._%-`, so a
user word holding any other character -- `中国平安保险（集团）股份有限公司`, `A&B（中国）` -- can never
come out whole from either. Such words are matched in the sentence before segmentation (longest
first) and kept as one word each; the rest of the sentence is segmented as usual. This is logged,
and counted as `segmenter.protected_words`.

rjieba (a Rust port, ~15x faster) is used when asked for and when it provably honours the user
dictionary: after loading it, every user word must cut to itself. If not, we fall back to jieba and
say so (logged, and visible as `segmenter.name` / `segmenter.fallback_reason`).
"""
import logging
import re

_LOG = logging.getLogger(__name__)

SEGMENTERS = ("jieba", "rjieba")
# one character of the blocks jieba segments (jieba.re_han_default); others split blocks
_JIEBA_BLOCK_CHAR = re.compile("[\u4E00-\u9FD5a-zA-Z0-9+#&._%\\-]")


def read_user_dict(path):
  """Returns [(word, freq or None, tag or None)] from a jieba-format user dictionary.

  Raises ValueError naming the file and line for a malformed entry (a frequency that is not a
  non-negative integer).
  """
  entries = []
  with open(path, encoding="utf-8-sig") as f:
    for line_number, line in enumerate(f, 1):
      line = line.strip()
      if not line or line.startswith("#"):
        continue
      parts = line.split()
      word, freq, tag = parts[0], None, None
      if len(parts) >= 2:
        try:
          freq = int(parts[1])
        except ValueError:
          freq = -1
        if freq < 0:
          raise ValueError("%s:%d: frequency %r is not a non-negative integer (jieba format: word "
                           "[freq] [tag])" % (path, line_number, parts[1]))
      if len(parts) >= 3:
        tag = parts[2]
      entries.append((word, freq, tag))
  return entries


class _JiebaSegmenter(object):
  """jieba.Tokenizer with its own dictionary state (never the global one)."""

  name = "jieba"

  def __init__(self, user_entries):
    import jieba
    jieba.setLogLevel(logging.WARNING)
    self._tokenizer = jieba.Tokenizer()
    self._tokenizer.initialize()
    for word, freq, tag in user_entries:
      self._tokenizer.add_word(word, freq, tag)
      if freq is None:
        # jieba's load_userdict semantics: without a frequency the word must still win.
        self._tokenizer.suggest_freq(word, tune=True)

  def raw_cut(self, sentence):
    return self._tokenizer.lcut(sentence, HMM=True)


class _RjiebaSegmenter(object):
  """rjieba.Jieba with the user entries added."""

  name = "rjieba"

  def __init__(self, user_entries):
    import rjieba
    self._jieba = rjieba.Jieba()
    for word, freq, tag in user_entries:
      if freq is None:
        freq = self._jieba.suggest_freq(word)
      self._jieba.add_word(word, freq, tag)

  def raw_cut(self, sentence):
    return self._jieba.cut(sentence, True)


class Segmenter(object):
  """Cuts sentences into words. Attributes: name ("jieba"|"rjieba"), requested, fallback_reason,
  protected_words (user words matched before segmentation, see the module docstring)."""

  def __init__(self, impl, requested, fallback_reason=None, protected_words=()):
    self._impl = impl
    self.name = impl.name
    self.requested = requested
    self.fallback_reason = fallback_reason
    self.protected_words = tuple(protected_words)
    self._protected = None
    if self.protected_words:
      self._protected = re.compile("|".join(
          map(re.escape, sorted(self.protected_words, key=len, reverse=True))))

  def cut(self, sentence):
    """sentence: str -> list of non-whitespace words whose concatenation is the sentence minus
    whitespace."""
    if self._protected is None:
      return list(filter(str.strip, self._impl.raw_cut(sentence)))
    words, cursor = [], 0
    for match in self._protected.finditer(sentence):
      if match.start() > cursor:
        words += self._impl.raw_cut(sentence[cursor:match.start()])
      words.append(match.group())
      cursor = match.end()
    if cursor < len(sentence):
      words += self._impl.raw_cut(sentence[cursor:])
    return list(filter(str.strip, words))


def split_by_jieba(word):
  """True when the word holds a character outside jieba's segmentation blocks: no jieba-style
  segmenter can return it whole."""
  return any(not _JIEBA_BLOCK_CHAR.match(char) for char in word)


def _unhonoured_words(segmenter, user_entries):
  return [word for word, _, _ in user_entries if segmenter.cut(word) != [word]]


def make_segmenter(name="jieba", user_dict=None):
  """Builds a Segmenter. name: "jieba" or "rjieba"; user_dict: path to a jieba-format file or None.

  With rjieba, falls back to jieba (and logs why) if rjieba is missing or any user word does not
  cut to itself after loading the dictionary.
  """
  if name not in SEGMENTERS:
    raise ValueError("unknown segmenter %r, expected one of %s" % (name, ", ".join(SEGMENTERS)))
  user_entries = read_user_dict(user_dict) if user_dict else []
  protected = [word for word, _, _ in user_entries if split_by_jieba(word)]
  if protected:
    _LOG.info("segmenter: %d user-dict word(s) hold characters jieba splits text on (e.g. %r); "
              "they are matched whole before segmentation", len(protected), protected[:3])
  if name == "rjieba":
    try:
      segmenter = Segmenter(_RjiebaSegmenter(user_entries), name, protected_words=protected)
    except ImportError as e:
      reason = "rjieba is not importable (%s)" % e
    else:
      missed = _unhonoured_words(segmenter, user_entries)
      if not missed:
        return segmenter
      reason = "rjieba does not keep %d user-dict word(s) whole, e.g. %r" % (len(missed), missed[:3])
    _LOG.warning("segmenter: falling back from rjieba to jieba: %s", reason)
    return Segmenter(_JiebaSegmenter(user_entries), requested=name, fallback_reason=reason,
                     protected_words=protected)
  return Segmenter(_JiebaSegmenter(user_entries), requested=name, protected_words=protected)
