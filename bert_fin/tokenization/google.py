# coding=utf-8
"""google-research/bert tokenization, behaviour for behaviour (the faithful path).

`FullTokenizer(vocab_file, do_lower_case)` = `BasicTokenizer` then `WordpieceTokenizer`, exactly as
google's tokenization.py (master): control/format chars (Cc, Cf) and U+0000 / U+FFFD removed,
whitespace (" ", \\t, \\n, \\r, Zs) becomes a space, CJK ideographs are split one per token,
lower-casing lower()s then NFD-decomposes and drops Mn (accents), punctuation (Unicode P* and all
non-alphanumeric ASCII) is split off, and WordPiece is greedy longest-match-first with "##"
continuation and "[UNK]" for a word longer than 200 chars or with an unmatchable piece.
Special tokens written in the text ("[MASK]") are NOT kept whole, as in google.

No normalisation beyond google's lives here (no full-width -> half-width, no quote folding): that
is corpus cleaning. The HF-backed twin with identical output is
`fast.FastFullTokenizer` (tokenization/fast.py); `tokenization.make_tokenizer` picks one.
"""
import collections
import logging
import re
import unicodedata

from bert_fin.text.cjk import is_chinese_char  # google's _is_chinese_char, its ranges in text/
from bert_fin.tokenization import special_tokens

_LOG = logging.getLogger(__name__)
_BOM = "\ufeff"

UNK_TOKEN = special_tokens.UNK  # google's name
MAX_INPUT_CHARS_PER_WORD = 200  # google's value (HF's WordPiece default is 100).
MAX_VOCAB_BYTES = 64 << 20  # a vocab file of a million tokens is ~10 MB
MAX_TOKEN_CHARS = 1024

_LOWER_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                 "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12")
_CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                 "multi_cased_L-12_H-768_A-12")


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
  """Raises ValueError when `do_lower_case` contradicts a google checkpoint's name (heuristic)."""
  if not init_checkpoint:
    return
  match = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
  if match is None:
    return
  model_name = match.group(1)
  if model_name in _LOWER_MODELS and not do_lower_case:
    actual, case_name, opposite = "False", "lowercased", "True"
  elif model_name in _CASED_MODELS and do_lower_case:
    actual, case_name, opposite = "True", "cased", "False"
  else:
    return
  raise ValueError(
      "You passed in `--do_lower_case=%s` with `--init_checkpoint=%s`. However, `%s` seems to be "
      "a %s model, so you should pass in `--do_lower_case=%s` so that the fine-tuning matches how "
      "the model was pre-trained." % (actual, init_checkpoint, model_name, case_name, opposite))


def convert_to_unicode(text):
  """Returns `text` as str; bytes are decoded as UTF-8 dropping invalid bytes (google's rule)."""
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    return text.decode("utf-8", "ignore")
  raise ValueError("Unsupported string type: %s" % type(text))


def printable_text(text):
  """Returns `text` as a str suitable for print / logging."""
  return convert_to_unicode(text)


def read_vocab_bytes(vocab_file):
  """The bytes of a local vocab file; ValueError (one line) when it is not a regular file (a
  FIFO would block the reader, a device never end) or holds more than MAX_VOCAB_BYTES."""
  from bert_fin.guard import untrusted  # pylint: disable=g-import-not-at-top
  return untrusted.read_bytes(str(vocab_file), MAX_VOCAB_BYTES, None,
                              "vocab file (one token a line)")


def check_vocab_lines(lines, vocab_file):
  """ValueError (one line) for an empty vocab or a line longer than MAX_TOKEN_CHARS (not a
  vocab: a token that long never matches a word, google's WordPiece stops at 200 characters)."""
  if not lines:
    raise ValueError("%s has no tokens: an empty vocab" % vocab_file)
  for number, line in enumerate(lines, 1):
    if len(line) > MAX_TOKEN_CHARS:
      raise ValueError("%s: line %d is %d characters long: not a vocab file (one token a "
                       "line)" % (vocab_file, number, len(line)))


def _read_text(path):
  """A vocab file's text: local files checked (read_vocab_bytes) and decoded as google's GFile
  + convert_to_unicode do (invalid UTF-8 dropped: warned here); gs:// / hdfs:// via tf.io.gfile."""
  if "://" in str(path):
    import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
    with tf.io.gfile.GFile(path, "r") as reader:
      return convert_to_unicode(reader.read())
  data = read_vocab_bytes(path)
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    _LOG.warning("%s is not valid UTF-8 (byte %d): invalid bytes dropped, as google's "
                 "load_vocab does", path, e.start)
    return data.decode("utf-8", "ignore")


def load_vocab(vocab_file):
  """Reads a vocab file (one token a line) into an OrderedDict token -> line index.

  Each line is whitespace-stripped; a repeated token keeps its first position and its last index
  (google's semantics), with a warning; a leading UTF-8 byte order mark is dropped (warned).
  Refused (ValueError, one line): a local file that is not a regular file or larger than
  MAX_VOCAB_BYTES, an empty vocab, a line longer than MAX_TOKEN_CHARS.
  """
  lines = _read_text(vocab_file).split("\n")  # only "\n" ends a line, as in GFile.
  if lines and not lines[-1]:
    lines.pop()
  check_vocab_lines(lines, vocab_file)
  if lines and lines[0].startswith(_BOM):  # a Windows editor's UTF-8 byte order mark
    lines[0] = lines[0][len(_BOM):]
    _LOG.warning("%s starts with a UTF-8 byte order mark; ignored", vocab_file)
  vocab = collections.OrderedDict()
  for index, line in enumerate(lines):
    vocab[line.strip()] = index
  if len(vocab) != len(lines):
    seen, repeated = set(), []
    for line in lines:
      token = line.strip()
      if token in seen and token not in repeated:
        repeated.append(token)
      seen.add(token)
    _LOG.warning("%s has %d duplicate token(s) (%s): each keeps the id of its last line, as in "
                 "google's load_vocab; the earlier lines' ids are never produced", vocab_file,
                 len(lines) - len(vocab), ", ".join(repr(t) for t in repeated[:5]))
  return vocab


def convert_by_vocab(vocab, items):
  """Maps tokens -> ids (or ids -> tokens); an item missing from `vocab` is a KeyError naming it."""
  output = []
  for item in items:
    try:
      output.append(vocab[item])
    except KeyError:
      raise KeyError("%r is not in the vocabulary (%d entries)" % (item, len(vocab))) from None
  return output


def convert_tokens_to_ids(vocab, tokens):
  return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
  return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
  """Strips `text` and splits it on (Python) whitespace."""
  text = text.strip()
  if not text:
    return []
  return text.split()


def is_whitespace(char):
  """google's whitespace: space, \\t, \\n, \\r and category Zs."""
  if char in (" ", "\t", "\n", "\r"):
    return True
  return unicodedata.category(char) == "Zs"


def is_control(char):
  """google's control chars: categories Cc and Cf, except \\t \\n \\r (whitespace)."""
  if char in ("\t", "\n", "\r"):
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
  """google's punctuation: every non-alphanumeric printable ASCII char, and categories P*."""
  cp = ord(char)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(char).startswith("P")


class BasicTokenizer(object):
  """Cleaning, CJK splitting, optional lower-casing + accent stripping, punctuation splitting."""

  def __init__(self, do_lower_case=True):
    self.do_lower_case = do_lower_case

  def tokenize(self, text):
    """Returns the list of basic tokens (str) of `text` (str or UTF-8 bytes)."""
    text = convert_to_unicode(text)
    text = self._clean_text(text)
    text = self._tokenize_chinese_chars(text)
    split_tokens = []
    for token in whitespace_tokenize(text):
      if self.do_lower_case:
        token = token.lower()
        token = self._run_strip_accents(token)
      split_tokens.extend(self._run_split_on_punc(token))
    return whitespace_tokenize(" ".join(split_tokens))

  def _run_strip_accents(self, text):
    """NFD-decomposes and drops non-spacing marks (Mn)."""
    text = unicodedata.normalize("NFD", text)
    return "".join(char for char in text if unicodedata.category(char) != "Mn")

  def _run_split_on_punc(self, text):
    """Splits `text` into runs of non-punctuation and single punctuation chars."""
    output = []
    start_new_word = True
    for char in text:
      if is_punctuation(char):
        output.append([char])
        start_new_word = True
      else:
        if start_new_word:
          output.append([])
        start_new_word = False
        output[-1].append(char)
    return ["".join(chars) for chars in output]

  def _tokenize_chinese_chars(self, text):
    """Surrounds every CJK ideograph with spaces."""
    output = []
    for char in text:
      if is_chinese_char(ord(char)):
        output.extend((" ", char, " "))
      else:
        output.append(char)
    return "".join(output)

  def _clean_text(self, text):
    """Drops U+0000, U+FFFD and control chars; turns whitespace into " "."""
    output = []
    for char in text:
      cp = ord(char)
      if cp == 0 or cp == 0xFFFD or is_control(char):
        continue
      output.append(" " if is_whitespace(char) else char)
    return "".join(output)


class WordpieceTokenizer(object):
  """Greedy longest-match-first WordPiece over a vocab (google's algorithm)."""

  def __init__(self, vocab, unk_token=UNK_TOKEN, max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word

  def tokenize(self, text):
    """Word pieces of each whitespace-separated word of `text` (already basic-tokenized).

    A word longer than max_input_chars_per_word, or one that cannot be covered by vocab pieces,
    becomes a single unk_token. Example: "unaffable" -> ["un", "##aff", "##able"].
    """
    output_tokens = []
    for token in whitespace_tokenize(convert_to_unicode(text)):
      output_tokens.extend(self._tokenize_word(token))
    return output_tokens

  def _tokenize_word(self, word):
    if len(word) > self.max_input_chars_per_word:
      return [self.unk_token]
    pieces = []
    start = 0
    while start < len(word):
      end = len(word)
      piece = None
      while start < end:
        candidate = word[start:end]
        if start > 0:
          candidate = "##" + candidate
        if candidate in self.vocab:
          piece = candidate
          break
        end -= 1
      if piece is None:
        return [self.unk_token]
      pieces.append(piece)
      start = end
    return pieces


class FullTokenizer(object):
  """End-to-end google tokenization: text -> word pieces -> ids.

  Attributes: vocab (OrderedDict token -> id), inv_vocab (dict id -> token), do_lower_case.
  """

  def __init__(self, vocab_file, do_lower_case=True):
    self.vocab = load_vocab(vocab_file)
    self.inv_vocab = {v: k for k, v in self.vocab.items()}
    self.do_lower_case = do_lower_case
    self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

  def tokenize(self, text):
    """Returns the word pieces (list of str) of `text`."""
    split_tokens = []
    for token in self.basic_tokenizer.tokenize(text):
      split_tokens.extend(self.wordpiece_tokenizer.tokenize(token))
    return split_tokens

  def tokenize_batch(self, texts):
    """Returns [self.tokenize(text) for text in texts]."""
    return [self.tokenize(text) for text in texts]

  def tokenize_words(self, words):
    """Tokenizes each word independently: one (possibly empty) list of word pieces per word.

    `words` are e.g. jieba segments ("沪深300", "iPhone手机", "，"); the pieces of one word form one
    whole-word-masking group.
    """
    return [self.tokenize(word) for word in words]

  def convert_tokens_to_ids(self, tokens):
    return convert_by_vocab(self.vocab, tokens)

  def convert_ids_to_tokens(self, ids):
    return convert_by_vocab(self.inv_vocab, ids)
