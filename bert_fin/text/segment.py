"""Chinese word segmentation for whole-word masking: jieba or rjieba, plus a jieba user dictionary.

A segmenter turns one sentence into words: `segmenter.cut("无创dna检测") -> ["无创", "dna", "检测"]`.
Whitespace-only words are dropped (the word-piece tokenizer drops them anyway). Each word becomes one
whole-word-masking group after word-piecing (see data/instances.py).

User dictionary (jieba format, UTF-8): one entry a line, `word [freq] [tag]`; blank lines and lines
starting with `#` are ignored. Company full and short names, stock codes and product terms listed
there are kept as single words.

rjieba (a Rust port, ~15x faster) is used when asked for and when it provably honours the user
dictionary: after loading it, every user word must cut to itself. If not, we fall back to jieba and
say so (logged, and visible as `segmenter.name` / `segmenter.fallback_reason`).
"""
import logging

_LOG = logging.getLogger(__name__)

SEGMENTERS = ("jieba", "rjieba")


def read_user_dict(path):
  """Returns [(word, freq or None, tag or None)] from a jieba-format user dictionary.

  Raises ValueError naming the file and line for a malformed entry (non-integer frequency).
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
          raise ValueError("%s:%d: frequency %r is not an integer (jieba format: word [freq] [tag])"
                           % (path, line_number, parts[1])) from None
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
  """Cuts sentences into words. Attributes: name ("jieba"|"rjieba"), requested, fallback_reason."""

  def __init__(self, impl, requested, fallback_reason=None):
    self._impl = impl
    self.name = impl.name
    self.requested = requested
    self.fallback_reason = fallback_reason

  def cut(self, sentence):
    """sentence: str -> list of non-whitespace words whose concatenation is the sentence minus
    whitespace."""
    return [w for w in self._impl.raw_cut(sentence) if w.strip()]


def _unhonoured_words(impl, user_entries):
  return [word for word, _, _ in user_entries if impl.raw_cut(word) != [word]]


def make_segmenter(name="jieba", user_dict=None):
  """Builds a Segmenter. name: "jieba" or "rjieba"; user_dict: path to a jieba-format file or None.

  With rjieba, falls back to jieba (and logs why) if rjieba is missing or any user word does not
  cut to itself after loading the dictionary.
  """
  if name not in SEGMENTERS:
    raise ValueError("unknown segmenter %r, expected one of %s" % (name, ", ".join(SEGMENTERS)))
  user_entries = read_user_dict(user_dict) if user_dict else []
  if name == "rjieba":
    try:
      impl = _RjiebaSegmenter(user_entries)
    except ImportError as e:
      reason = "rjieba is not importable (%s)" % e
    else:
      missed = _unhonoured_words(impl, user_entries)
      if not missed:
        return Segmenter(impl, requested=name)
      reason = "rjieba does not keep %d user-dict word(s) whole, e.g. %r" % (len(missed), missed[:3])
    _LOG.warning("segmenter: falling back from rjieba to jieba: %s", reason)
    return Segmenter(_JiebaSegmenter(user_entries), requested=name, fallback_reason=reason)
  return Segmenter(_JiebaSegmenter(user_entries), requested=name)
