"""What a vocab turns into [UNK] over a corpus, and which vocab tokens would cure it.

google's WordPiece (FullTokenizer) works word by word (BasicTokenizer's words: one per CJK
ideograph, punctuation split off, lower-cased and accent-stripped with do_lower_case) and gives
[UNK] for a WHOLE word as soon as one of its characters cannot be covered. Greedy longest-match
covers a word whenever every character has its single-character piece: the character itself at
the start of the word, "##" + character inside it. So a word is [UNK] exactly when one of those
"role pieces" is missing from the vocab (or the word is longer than max_input_chars_per_word),
and adding every missing role piece of a word makes it tokenize again:
  "鍪"        (a CJK word)             needs "鍪"
  "‰"         (punctuation: own word)  needs "‰"
  "25℃"       (℃ is a symbol, So)      needs "##℃"  (and "℃" where a word starts with it)
The census counts, over the [UNK] words of the texts, each missing role piece (occurrences), each
[UNK] word and each unknown character, plus the [UNK] pieces and all pieces (the [UNK] rate:
[UNK] pieces / pieces, as build_vocab and compare_checkpoints count it).
"""
import collections
import dataclasses

from bert_fin.tokenization import google
from bert_fin.tokenization import special_tokens

SUBWORD_PREFIX = "##"


@dataclasses.dataclass
class UnkCensus:
  """Counts over a corpus (see the module docstring). pieces / unk_pieces: all word pieces and
  the [UNK] ones; unk_words: Counter {word: occurrences as [UNK]}; role_pieces: Counter {missing
  piece ("c" or "##c"): occurrences in [UNK] words}; unknown_chars: Counter {char: occurrences in
  [UNK] words, either role}; too_long: [UNK] words longer than max_input_chars_per_word (no vocab
  token cures those)."""
  pieces: int = 0
  unk_pieces: int = 0
  too_long: int = 0
  unk_words: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  role_pieces: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  unknown_chars: collections.Counter = dataclasses.field(default_factory=collections.Counter)

  @property
  def unk_rate(self):
    return self.unk_pieces / self.pieces if self.pieces else 0.0


def missing_role_pieces(word, vocab):
  """[(character, piece)] of `word` whose piece ({token: id} vocab lacks it) makes WordPiece give
  [UNK]: for the character at position i, piece = the character (i = 0) or "##" + it (i > 0)."""
  roles = ((char, char if i == 0 else SUBWORD_PREFIX + char) for i, char in enumerate(word))
  return [(char, piece) for char, piece in roles if piece not in vocab]


def count(tokenizer, texts, census=None):
  """Adds the [UNK] counts of `texts` (iterable of str) under `tokenizer` (a FastFullTokenizer:
  words + tokenize_words, the same pieces as FullTokenizer) to census (new if None); returns it."""
  census = census or UnkCensus()
  vocab = tokenizer.vocab
  for text in texts:
    words = tokenizer.words(text)
    for word, pieces in zip(words, tokenizer.tokenize_words(words)):
      census.pieces += len(pieces)
      if pieces != [special_tokens.UNK]:
        continue
      census.unk_pieces += 1
      census.unk_words[word] += 1
      if len(word) > google.MAX_INPUT_CHARS_PER_WORD:
        census.too_long += 1
        continue
      missing = missing_role_pieces(word, vocab)
      census.role_pieces.update(piece for _, piece in missing)
      census.unknown_chars.update(char for char, _ in missing)
  return census
