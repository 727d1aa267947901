"""Deterministic WordPiece trainer: BPE with a "##" continuation prefix over word counts.

The same algorithm as HF `tokenizers`' WordPieceTrainer (a BpeTrainer with
continuing_subword_prefix="##"), with every choice made by a total order, so the same corpus and
settings give the same tokens in the same order in every process (HF breaks count ties by token
ids that depend on Rust HashMap iteration order, randomised per process).

  words:    BertNormalizer(clean_text, handle_chinese_chars, lowercase=do_lower_case, accents
            stripped with lower-casing) + BertPreTokenizer (whitespace and punctuation split), as
            the HF trainer and google's BasicTokenizer: each CJK ideograph is a word of its own.
  alphabet: every character of the words (limit_alphabet > 0: the most frequent ones, ties by code
            point), in code-point order; then "##c" for each alphabet character c that occurs
            after a word's first position, in code-point order of c (characters outside the
            alphabet are dropped from words, as HF does).
  ids:      special tokens, alphabet, "##" characters in the order above, then each new merged
            token in merge order: a function of the corpus only (HF assigns the "##" ids in
            HashMap order, the one source of its run-to-run differences).
  merges:   repeatedly the adjacent symbol pair with the highest count (summed over word
            occurrences); ties by the smaller (left id, right id), HF's tie rule, here on
            deterministic ids: a total order, so the choice never depends on iteration order.
            The merged token is left + right with right's "##" dropped (an existing token's id is
            reused). Stops when the vocab (special tokens included) reaches vocab_size or the
            best count is below min_frequency.
Pair counts are updated incrementally: only words containing the merged pair are re-read
(index pair -> word ids), and a lazy max-heap keeps the candidates.
"""
import collections
import heapq

PREFIX = "##"
# Sentences joined per normalizer call (a space never joins two words, so the words are the same
# as one call per sentence; batching only saves Python call overhead).
_BATCH_SENTENCES = 256


def count_words(sentences, do_lower_case=True):
  """Counter {word: occurrences} over `sentences` (iterable of str), words as documented above:
  HF's BertNormalizer + BertPreTokenizer, the HF trainer's own pipeline. The normalised text is
  first cut at spaces and counted (C speed); each distinct chunk is then pre-tokenized once
  (a space is whitespace to BertPreTokenizer, so cutting there first gives the same words)."""
  from tokenizers import normalizers, pre_tokenizers  # pylint: disable=import-outside-toplevel
  normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                          strip_accents=None, lowercase=do_lower_case)
  chunks = collections.Counter()
  batch = []
  for sentence in sentences:
    batch.append(sentence)
    if len(batch) >= _BATCH_SENTENCES:
      chunks.update(normalizer.normalize_str(" ".join(batch)).split(" "))
      batch = []
  if batch:
    chunks.update(normalizer.normalize_str(" ".join(batch)).split(" "))
  pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  counts = collections.Counter()
  for chunk, count in chunks.items():
    for word, _ in pre_tokenizer.pre_tokenize_str(chunk):
      counts[word] += count
  return counts


def alphabet(word_counts, limit_alphabet=0):
  """The kept characters (code-point order): all, or the limit_alphabet most frequent (weighted
  by word counts; ties by code point)."""
  char_counts = collections.Counter()
  for word, count in word_counts.items():
    for char in word:
      char_counts[char] += count
  chars = sorted(char_counts, key=lambda char: (-char_counts[char], char))
  if limit_alphabet:
    chars = chars[:limit_alphabet]
  return sorted(chars)


def _pairs(symbols):
  return zip(symbols, symbols[1:])


def _merge_symbols(symbols, left, right, new):
  """symbols with each non-overlapping (left, right), scanned left to right, replaced by new."""
  merged, i = [], 0
  while i < len(symbols):
    if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
      merged.append(new)
      i += 2
    else:
      merged.append(symbols[i])
      i += 1
  return merged


class _Merger:
  """BPE state: words as symbol-id lists, pair counts, pair -> word ids, a lazy max-heap."""

  def __init__(self, tokens, words, counts):
    self.tokens = tokens                      # id -> token string
    self.ids = {token: i for i, token in enumerate(tokens)}
    self.words, self.counts = words, counts   # symbol-id lists, their corpus counts
    self.pair_counts = collections.Counter()
    self.where = collections.defaultdict(set)
    for index, (symbols, count) in enumerate(zip(words, counts)):
      for pair in _pairs(symbols):
        self.pair_counts[pair] += count
        self.where[pair].add(index)
    self.heap = [self._entry(pair, count) for pair, count in self.pair_counts.items()]
    heapq.heapify(self.heap)

  def _entry(self, pair, count):
    """Heap order = count descending, then (left id, right id) ascending."""
    return (-count, pair)

  def best(self, min_frequency):
    """The pair to merge next, or None when no pair occurs min_frequency times (or at all)."""
    while self.heap:
      negative_count, pair = self.heap[0]
      count = self.pair_counts.get(pair, 0)
      if count == -negative_count:
        return pair if count >= max(min_frequency, 1) else None
      heapq.heappop(self.heap)  # stale: re-queue with the current count
      if count > 0:
        heapq.heappush(self.heap, self._entry(pair, count))
    return None

  def merge(self, pair):
    """Merges `pair` everywhere; returns the new token (its id reused if the string exists)."""
    left, right = self.tokens[pair[0]], self.tokens[pair[1]]
    token = left + (right[len(PREFIX):] if right.startswith(PREFIX) else right)
    if token not in self.ids:
      self.ids[token] = len(self.tokens)
      self.tokens.append(token)
    new = self.ids[token]
    delta = collections.defaultdict(int)
    for index in sorted(self.where.pop(pair, ())):
      symbols, count = self.words[index], self.counts[index]
      merged = _merge_symbols(symbols, pair[0], pair[1], new)
      if len(merged) == len(symbols):
        continue
      for old_pair in _pairs(symbols):
        delta[old_pair] -= count
      for new_pair in _pairs(merged):
        delta[new_pair] += count
        if new in new_pair:  # every other pair of `merged` was already in `symbols`
          self.where[new_pair].add(index)
      self.words[index] = merged
    for changed_pair, change in delta.items():
      count = self.pair_counts[changed_pair] + change
      if count <= 0:
        del self.pair_counts[changed_pair]
      else:
        self.pair_counts[changed_pair] = count
        if change > 0:  # a smaller count is re-queued lazily, when its old entry surfaces
          heapq.heappush(self.heap, self._entry(changed_pair, count))
    return token


def train(word_counts, vocab_size, special_tokens=(), min_frequency=2, limit_alphabet=0):
  """Learned tokens (special_tokens excluded) in training order: alphabet, "##" characters,
  then merged pieces in merge order. len(special_tokens) + len(result) <= vocab_size, smaller
  when merges run out. word_counts: {word: count} (count_words)."""
  chars = alphabet(word_counts, limit_alphabet)
  kept = set(chars)
  words, counts, continuations = [], [], set()
  for word in sorted(word_counts):
    symbols = [char if position == 0 else PREFIX + char
               for position, char in enumerate(word) if char in kept]
    if not symbols:
      continue
    continuations.update(symbol for symbol in symbols if symbol.startswith(PREFIX))
    words.append(symbols)
    counts.append(word_counts[word])
  tokens = list(special_tokens)
  taken = set(tokens)
  tokens += [token for token in chars + sorted(continuations) if token not in taken]
  ids = {token: i for i, token in enumerate(tokens)}
  merger = _Merger(tokens, [[ids[s] for s in symbols] for symbols in words], counts)
  while len(merger.tokens) < vocab_size:
    pair = merger.best(min_frequency)
    if pair is None:
      break
    merger.merge(pair)
  return merger.tokens[len(special_tokens):]
