"""google-compatible WordPiece vocab.txt: train one from clean JSONL, or extend an existing one.

Layout (as google's chinese_L-12_H-768_A-12 / bert-base-chinese vocab.txt):
  0 [PAD], 1..99 [unused1]..[unused99], 100 [UNK], 101 [CLS], 102 [SEP], 103 [MASK], 104 <S>,
  105 <T>, then single characters (code-point order), then "##" + character, then longer pieces in
  training order; padded with [unused100], [unused101], ... to a multiple of 8 (tensor cores).
Training (wordpiece_trainer: HF's WordPiece/BPE algorithm with every tie broken by a total order,
so byte-identical output in every process) runs on text pre-split exactly like google's
BasicTokenizer (clean text, one token per CJK ideograph, punctuation split, lower case + accent
stripping when do_lower_case), so every piece is reachable by FullTokenizer and CJK characters stay
single tokens.

Extending (`extend_vocab`) keeps every id of the base vocab and writes the corpus's most frequent
characters that are missing from it into [unusedN] slots, so a checkpoint trained with the base
vocab still loads (same vocab size, same ids).
"""
import collections
import io
import json
import re

from bert_fin import io_utils
from bert_fin.tokenization import fast
from bert_fin.tokenization import google
from bert_fin.tokenization import special_tokens as special
from bert_fin.tokenization import wordpiece_trainer
from bert_fin.text import corpus_format
from bert_fin.text import raw_documents as text_documents
from bert_fin.text import filters

NUM_UNUSED = 99
HEAD_TOKENS = ([special.PAD] + ["[unused%d]" % i for i in range(1, NUM_UNUSED + 1)] +
               [special.UNK, special.CLS, special.SEP, special.MASK, "<S>", "<T>"])
UNK = special.UNK
MAX_INPUT_CHARS_PER_WORD = google.MAX_INPUT_CHARS_PER_WORD
_UNUSED_RE = re.compile(r"^\[unused\d+\]$")


_PRECHECK_LINES = 200


def field_sentences(record, text_field):
  """A JSONL record's text_field as a list of sentences (a str is one), or None if absent."""
  value = record.get(text_field) if isinstance(record, dict) else None
  if isinstance(value, str):
    return [value]
  if isinstance(value, list) and all(isinstance(item, str) for item in value):
    return value
  return None


def check_inputs(paths, input_format="auto", text_field="sentences"):
  """Refuses input build_vocab would misread, before training: a JSONL file whose first lines are
  not JSON (names file:line; google's text format needs --input_format text or a non-.jsonl
  name), or none of which has `text_field` (names the fields found and the flag). Raises
  ValueError. Any file that is binary or not UTF-8 (sampled across the file) is refused too:
  clean_corpus detects encodings, this reader does not."""
  for path in paths:
    problem = text_documents.not_utf8_text(path)
    if problem:
      raise ValueError("%s is %s: build_vocab reads UTF-8 text (clean_corpus output); clean it "
                       "with tools/clean_corpus.py first" % (path, problem))
    if corpus_format.format_of(path, input_format) != corpus_format.JSONL:
      continue
    fields, seen, found = set(), 0, False
    with corpus_format.open_text(path, errors="replace") as f:
      for line_number, line in enumerate(f, 1):
        if not line.strip():
          continue
        try:
          record = json.loads(line)
        except ValueError:
          raise ValueError("%s:%d is not JSON; for google's text format (one sentence a line, "
                           "blank lines between documents) pass --input_format text"
                           % (path, line_number)) from None
        if field_sentences(record, text_field) is not None:
          found = True
          break
        fields.update(record if isinstance(record, dict) else ())
        seen += 1
        if seen >= _PRECHECK_LINES:
          break
    if seen and not found:
      raise ValueError("%s: no document among the first %d has a %r field (fields found: %s); "
                       "pass --text_field with the field holding the text"
                       % (path, seen, text_field, ", ".join(sorted(fields)) or "none"))


def iter_sentences(paths, max_docs=0, input_format="auto", text_field="sentences", skipped=None):
  """Streams the sentences of the inputs; max_docs=0: all documents.

  JSONL: `text_field` of each line (a list of sentences, clean_corpus's `sentences`, or one str);
  text: google's format, one sentence a line, blank lines between documents. Lines that are not
  JSON or lack the field are counted in skipped["documents"] (a Counter or dict), not fatal
  (check_inputs refuses files where that is every line).
  """
  docs = 0
  for path in paths:
    jsonl = corpus_format.format_of(path, input_format) == corpus_format.JSONL
    with corpus_format.open_text(path, errors="replace") as f:
      in_document = False
      for line in f:
        if not line.strip():
          in_document = False
          continue
        if jsonl or not in_document:
          if max_docs and docs >= max_docs:
            return
          docs += 1
          in_document = True
        if not jsonl:
          yield line.strip()
          continue
        try:
          sentences = field_sentences(json.loads(line), text_field)
        except ValueError:
          sentences = None
        if sentences is None:
          if skipped is not None:
            skipped["documents"] = skipped.get("documents", 0) + 1
          continue
        yield from sentences


def counting(sentences, counter, do_lower_case=True):
  """Passes `sentences` through, counting their characters (lower-cased like the vocab) into
  counter (collections.Counter): the frequencies google_layout keeps characters by."""
  for sentence in sentences:
    counter.update(sentence.lower() if do_lower_case else sentence)
    yield sentence


def is_cjk_token(token):
  """True when every character of `token` is a CJK ideograph (google's ranges)."""
  return bool(token) and all(filters.is_cjk_char(ch) for ch in token)


class GoogleTokenizer:
  """google's FullTokenizer behaviour: `words(text)` = BasicTokenizer, `pieces(word)` = WordPiece.

  Uses google.FullTokenizer (and its fast twin) given a vocab file, else HF tokenizers with the same settings
  (BertNormalizer + BertPreTokenizer + WordPiece, max_input_chars_per_word=200).
  """

  def __init__(self, vocab_tokens, do_lower_case=True, vocab_file=None):
    self.vocab = {token: index for index, token in enumerate(vocab_tokens)}
    self._google = None
    self._fast = None
    if vocab_file:
      self._google = google.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
      self._fast = fast.FastFullTokenizer(vocab_file, do_lower_case=do_lower_case)
    from tokenizers import models, normalizers, pre_tokenizers  # pylint: disable=import-outside-toplevel
    self._normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                  strip_accents=None, lowercase=do_lower_case)
    self._pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    self._model = models.WordPiece(self.vocab, unk_token=UNK,
                                   max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD)
    self.backend = "bert_fin.tokenization" if self._google else "hf_tokenizers"

  def words(self, text):
    if self._google:
      return self._google.basic_tokenizer.tokenize(text)
    return [word for word, _ in self._pre_tokenizer.pre_tokenize_str(
        self._normalizer.normalize_str(text))]

  def tokenize(self, text):
    """text -> word pieces, as FullTokenizer.tokenize (the Rust-backed twin when available)."""
    if self._fast:
      return self._fast.tokenize(text)
    return [piece for word in self.words(text) for piece in self.pieces(word)]

  def pieces(self, word):
    if self._google:
      return self._google.wordpiece_tokenizer.tokenize(word)
    return [token.value for token in self._model.tokenize(word)]


def unk_rate(tokenizer, sentences):
  """Fraction of word pieces that are [UNK] over `sentences`; returns (rate, unk, total)."""
  unk = total = 0
  for sentence in sentences:
    pieces = tokenizer.tokenize(sentence)
    total += len(pieces)
    unk += sum(1 for piece in pieces if piece == UNK)
  return (unk / total if total else 0.0), unk, total


def train_wordpiece(sentences, vocab_size, do_lower_case=True, min_frequency=2, limit_alphabet=0):
  """Trains WordPiece on `sentences` (iterable of str) with wordpiece_trainer (deterministic: the
  same sentences and settings give the same tokens in the same order in every process). Returns
  the learned tokens (list), HEAD_TOKENS excluded; len(HEAD_TOKENS) + len(result) <= vocab_size.
  limit_alphabet=0 keeps every character seen."""
  word_counts = wordpiece_trainer.count_words(sentences, do_lower_case)
  return wordpiece_trainer.train(word_counts, vocab_size, HEAD_TOKENS, min_frequency,
                                 limit_alphabet)


def google_layout(learned_tokens, vocab_size, multiple=8, char_counts=None):
  """HEAD_TOKENS + chars + ##chars + longer pieces, cut to vocab_size (the head always stays),
  padded with extra [unusedN] to a multiple of `multiple`.

  When the learned tokens do not fit, the most frequent characters are kept (char_counts: a
  Counter of corpus characters; without it, training order), then ##characters of the most
  frequent characters, then longer pieces in training order. Kept characters are written in
  code-point order, as google's vocab."""
  counts = char_counts or {}
  rank = {t: i for i, t in enumerate(learned_tokens)}
  by_frequency = lambda char: (-counts.get(char, 0), rank.get(char, 0))
  chars = [t for t in learned_tokens if len(t) == 1]
  sub_chars = [t for t in learned_tokens if len(t) == 3 and t.startswith("##")]
  short = set(chars) | set(sub_chars)
  longer = [t for t in learned_tokens if t not in short]
  budget = max(vocab_size, len(HEAD_TOKENS)) - len(HEAD_TOKENS)
  chars = sorted(chars, key=by_frequency)[:budget]
  budget -= len(chars)
  sub_chars = sorted(sub_chars, key=lambda t: by_frequency(t[2]))[:budget]
  budget -= len(sub_chars)
  tokens = (list(HEAD_TOKENS) + sorted(chars, key=ord) + sorted(sub_chars, key=lambda t: ord(t[2]))
            + longer[:budget])
  next_unused = NUM_UNUSED + 1
  while len(tokens) % multiple:
    tokens.append("[unused%d]" % next_unused)
    next_unused += 1
  return tokens


def read_vocab(path):
  """vocab.txt -> list of tokens (line i = id i); trailing newline characters stripped only, and
  a UTF-8 byte order mark at the start (as google.load_vocab). UnicodeDecodeError for a file
  that is not UTF-8; ValueError (one line) for one that is not a regular file, larger than
  google.MAX_VOCAB_BYTES, empty, with a line longer than google.MAX_TOKEN_CHARS or a token
  twice (its ids would shift)."""
  text = google.read_vocab_bytes(path).decode("utf-8-sig")
  tokens = [line.rstrip("\n").rstrip("\r") for line in io.StringIO(text, newline=None)]
  google.check_vocab_lines(tokens, path)
  first = {}
  for number, token in enumerate(tokens, 1):
    if token in first:
      raise ValueError("%s: line %d repeats the token %r of line %d (each token once)" % (
          path, number, token[:60], first[token]))
    first[token] = number
  return tokens


def write_vocab(path, tokens):
  if len(set(tokens)) != len(tokens):
    raise ValueError("vocab has duplicate tokens")
  with io_utils.atomic_output(path) as f:
    for token in tokens:
      f.write(token + "\n")


def missing_char_counts(tokenizer, sentences):
  """Counter {char: occurrences in words that tokenize to [UNK]} for chars absent from the vocab."""
  counts = collections.Counter()
  for sentence in sentences:
    for word in tokenizer.words(sentence):
      if UNK in tokenizer.pieces(word):
        counts.update(ch for ch in word if ch not in tokenizer.vocab)
  return counts


def is_unused(token):
  """True for google's free slots [unused0] .. [unusedN]."""
  return bool(_UNUSED_RE.match(token))


def unused_slots(tokens):
  """Ids of the [unusedN] slots of a vocab (list of tokens), in id order."""
  return [i for i, token in enumerate(tokens) if is_unused(token)]


def ranked_missing(counts, present, min_count=2):
  """Tokens of counts ({token: occurrences}) absent from `present` with count >= min_count, most
  frequent first, ties in code-point order of the token (one fixed order)."""
  return [token for _, token in sorted(((count, token) for token, count in counts.items()
                                        if count >= min_count and token not in present),
                                       key=lambda item: (-item[0], item[1]))]


def extend_vocab(base_tokens, char_counts, min_count=2, max_new=0):
  """Writes the most frequent missing chars (count >= min_count) into [unusedN] slots of a copy of
  base_tokens, in slot order. Returns (tokens, added chars). Ids of all other tokens are kept."""
  slots = unused_slots(base_tokens)
  candidates = ranked_missing(char_counts, set(base_tokens), min_count)
  limit = len(slots) if not max_new else min(max_new, len(slots))
  added = candidates[:limit]
  tokens = list(base_tokens)
  for slot, ch in zip(slots, added):
    tokens[slot] = ch
  return tokens, added
