"""wordpiece_trainer.train against a plain reference of the documented algorithm: the same tokens
in the same order (alphabet, "##" characters, merges with count ties broken by the smaller
(left id, right id), reused token strings, special tokens, limit_alphabet, min_frequency), on
tie-heavy synthetic words and real-looking ones, with and without heap compaction."""
import collections
import random

from bert_fin.tokenization import wordpiece_trainer


def _reference_train(word_counts, vocab_size, special_tokens=(), min_frequency=2,
                     limit_alphabet=0):
  """The module docstring's algorithm, written plainly: every pair recounted before each merge."""
  char_counts = collections.Counter()
  for word, count in word_counts.items():
    for char in word:
      char_counts[char] += count
  chars = sorted(char_counts, key=lambda char: (-char_counts[char], char))
  chars = sorted(chars[:limit_alphabet] if limit_alphabet else chars)
  words = []
  for word in sorted(word_counts):
    symbols = [char if position == 0 else "##" + char
               for position, char in enumerate(word) if char in chars]
    if symbols:
      words.append((symbols, word_counts[word]))
  continuations = sorted({symbol for symbols, _ in words for symbol in symbols
                          if symbol.startswith("##")})
  tokens = list(special_tokens)
  tokens += [token for token in chars + continuations if token not in special_tokens]
  ids = {token: i for i, token in enumerate(tokens)}
  words = [([ids[symbol] for symbol in symbols], count) for symbols, count in words]
  while len(tokens) < vocab_size:
    pair_counts = collections.Counter()
    for symbols, count in words:
      for pair in zip(symbols, symbols[1:]):
        pair_counts[pair] += count
    if not pair_counts:
      break
    (left, right), count = min(pair_counts.items(), key=lambda item: (-item[1], item[0]))
    if count < max(min_frequency, 1):
      break
    right_text = tokens[right]
    token = tokens[left] + (right_text[2:] if right_text.startswith("##") else right_text)
    if token not in ids:
      ids[token] = len(tokens)
      tokens.append(token)
    for i, (symbols, count) in enumerate(words):
      merged, j = [], 0
      while j < len(symbols):
        if symbols[j:j + 2] == [left, right]:
          merged.append(ids[token])
          j += 2
        else:
          merged.append(symbols[j])
          j += 1
      words[i] = (merged, count)
  return tokens[len(special_tokens):]


def _tie_heavy_words(rng, n=1500):
  """Short words over a tiny alphabet with small counts: many equal pair counts, many repeated
  pairs inside a word (aaaa), merged strings reached two ways (a+##ab, aa+##b)."""
  return collections.Counter({"".join(rng.choice("aab") for _ in range(rng.randint(1, 8))):
                              rng.randint(1, 3) for _ in range(n)})


def _real_looking_words(rng, n=2000):
  """Stock codes, decimals, Latin words, mixed words and CJK characters with Zipf-like counts."""
  stems = ["growth", "revenue", "iphone", "investors", "bank", "net", "profit", "dna", "q3",
           "ipo", "etf", "nasdaq", "csi", "pe", "roe"]
  words = collections.Counter()
  for i in range(n):
    kind = i % 5
    if kind == 0:
      word = "%06d" % rng.choice([600519, 300750, 600036, 1, 2, 300, 688981, rng.randint(0, 999999)])
    elif kind == 1:
      word = "%d.%d" % (rng.randint(0, 99), rng.randint(0, 99))
    elif kind == 2:
      word = rng.choice(stems) + rng.choice(["", "s", "ed", str(rng.randint(0, 20))])
    elif kind == 3:
      word = rng.choice("茅台宁德招商银行净利润增长")
    else:
      word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789é")
                     for _ in range(rng.randint(2, 9)))
    words[word] += max(1, int(200 / (1 + i % 97)))
  return words


def _cases():
  rng = random.Random(7)
  tie_heavy, real = _tie_heavy_words(rng), _real_looking_words(rng)
  return [
      (tie_heavy, dict(vocab_size=220, min_frequency=1)),
      (tie_heavy, dict(vocab_size=120, special_tokens=("[PAD]", "a", "##b", "ab"),
                       min_frequency=2)),  # "ab": a merge reuses its id
      (real, dict(vocab_size=500, special_tokens=("[UNK]", "[CLS]"), min_frequency=2)),
      (real, dict(vocab_size=400, min_frequency=3, limit_alphabet=20)),  # first chars dropped
      (real, dict(vocab_size=30, min_frequency=2)),  # alphabet alone exceeds vocab_size
  ]


def test_train_matches_the_reference_algorithm():
  for word_counts, settings in _cases():
    expected = _reference_train(word_counts, **settings)
    assert len(expected) > 60 or settings["vocab_size"] == 30
    assert wordpiece_trainer.train(word_counts, **settings) == expected, settings


def test_heap_compaction_keeps_the_tokens(monkeypatch):
  rebuilds = []
  rebuild = wordpiece_trainer._Merger._rebuild_heap  # pylint: disable=protected-access

  def counted(self):
    rebuilds.append(len(self.heap))
    rebuild(self)

  monkeypatch.setattr(wordpiece_trainer, "STALE_HEAP_SHARE", 0)  # at every stale entry
  monkeypatch.setattr(wordpiece_trainer, "STALE_HEAP_SLACK", 0)
  monkeypatch.setattr(wordpiece_trainer._Merger, "_rebuild_heap", counted)  # pylint: disable=protected-access
  word_counts, settings = _cases()[1]
  assert wordpiece_trainer.train(word_counts, **settings) == _reference_train(word_counts,
                                                                             **settings)
  assert len(rebuilds) > 10  # the start, then compactions


class _WatchedCounter(collections.Counter):
  """A Counter that can be watched with a weak reference."""


def test_the_word_counts_are_freed_before_the_merges_when_the_caller_lets_them_go(monkeypatch):
  """The word strings and their counts are not held through the merges (the memory peak): handed
  over as CorpusCounts.pop_words() hands them, they are gone at the first merge."""
  import weakref  # pylint: disable=import-outside-toplevel
  from bert_fin.tokenization import corpus_counts  # pylint: disable=import-outside-toplevel
  word_counts, settings = _cases()[1]
  counts = corpus_counts.CorpusCounts(words=_WatchedCounter(word_counts))
  watch = weakref.ref(counts.words)
  alive_at_merges = []
  merge = wordpiece_trainer._Merger.merge  # pylint: disable=protected-access

  def watched(self, pair):
    alive_at_merges.append(watch() is not None)
    return merge(self, pair)

  monkeypatch.setattr(wordpiece_trainer._Merger, "merge", watched)  # pylint: disable=protected-access
  # (a call with **settings would keep its argument tuple, a reference, for the whole call)
  learned = wordpiece_trainer.train(counts.pop_words(), vocab_size=settings["vocab_size"],
                                    special_tokens=settings["special_tokens"],
                                    min_frequency=settings["min_frequency"])
  assert learned == _reference_train(word_counts, **settings)
  assert alive_at_merges and not any(alive_at_merges)
  assert counts.words == collections.Counter()  # the record keeps an empty Counter
