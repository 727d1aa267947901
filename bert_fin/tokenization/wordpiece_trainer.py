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

Memory (train() grows with the distinct words, which grow with the corpus): a word costs 4 bytes
a symbol in one flat int32 array, 12 for its offset and length and 8 for its count; a pair is one
int (left << bits | right, bits enough for every id up to vocab_size), one object keying two dicts
(its count; its word ids: an int for a pair in one word, an int32 array otherwise); a heap entry
is one int (-count above the pair bits: count descending, then (left id, right id) ascending, the
tuple order), and the heap is rebuilt from the live pairs when stale entries pass a tenth of them.
Measured peak (tracemalloc): ~290 bytes a distinct word (48k distinct words of 550 MB of Chinese
reviews, 21128 tokens; their pairs, the token strings and the id dict included). The word counts
themselves are not held through the merges (train's docstring), when the pairs made by merges are
at their most; a merge reads its words' ids straight from their array and a heap rebuild drops
the stale entries before making the new ones (no second copy of either at the peak).
"""
import array
import collections
import heapq

PREFIX = "##"
# Sentences joined per normalizer call (a space never joins two words, so the words are the same
# as one call per sentence; batching only saves Python call overhead).
_BATCH_SENTENCES = 256
# The heap is rebuilt from the live pairs when its stale entries outnumber STALE_HEAP_SHARE of
# them plus STALE_HEAP_SLACK.
STALE_HEAP_SHARE, STALE_HEAP_SLACK = 0.1, 1024


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


def _merge_symbols(symbols, left, right, new):
  """symbols with each non-overlapping (left, right), scanned left to right, replaced by new."""
  merged, i, end = [], 0, len(symbols) - 1
  while i <= end:
    if i < end and symbols[i] == left and symbols[i + 1] == right:
      merged.append(new)
      i += 2
    else:
      merged.append(symbols[i])
      i += 1
  return merged


class _Merger:
  """BPE state, compact (module docstring): words in one flat id array, pairs and heap entries
  as single ints, pair -> word ids as an int (one word) or an array."""

  def __init__(self, tokens, ids, max_tokens, words):
    """tokens: id -> token string (grows by one a merge, up to max_tokens); ids: its inverse;
    words: (count, symbol ids) pairs, in word order."""
    self.tokens, self.ids = tokens, ids
    self.shift = max(max_tokens, len(tokens)).bit_length()  # pair = left << shift | right
    self.mask = (1 << self.shift) - 1
    self.symbols, self.starts, self.lengths = array.array("i"), array.array("q"), array.array("i")
    self.counts = array.array("q")
    self.pair_counts, self.where = collections.defaultdict(int), {}
    shift = self.shift
    for index, (count, symbols) in enumerate(words):
      self.starts.append(len(self.symbols))
      self.lengths.append(len(symbols))
      self.symbols.extend(symbols)
      self.counts.append(count)
      for left, right in zip(symbols, symbols[1:]):
        pair = left << shift | right
        self.pair_counts[pair] += count
        self._add(pair, index)
    # A pair whose count falls to 0 is in no word (its word ids can go) unless counts are < 0.
    self.prune = min(self.counts, default=0) >= 0
    self.heap = []
    self._rebuild_heap()

  def _add(self, pair, index):
    """Records that word `index` holds `pair` (an index repeated back to back is kept once;
    one repeated later costs merge a second look at the word)."""
    found = self.where.get(pair)
    if found is None:
      self.where[pair] = index
    elif found.__class__ is int:
      if found != index:
        self.where[pair] = array.array("i", (found, index))
    elif found[-1] != index:
      found.append(index)

  def _entry(self, pair, count):
    """One int whose order = count descending, then (left id, right id) ascending."""
    return -count << (2 * self.shift) | pair

  def _rebuild_heap(self):
    """The heap with exactly one (current) entry a pair: the same answers as the lazy heap."""
    self.heap.clear()  # the stale entries go before the new ones are made
    self.heap.extend(self._entry(pair, count) for pair, count in self.pair_counts.items())
    heapq.heapify(self.heap)

  def best(self, min_frequency):
    """The pair to merge next as (left id, right id), or None when no pair occurs
    min_frequency times (or at all)."""
    if len(self.heap) > len(self.pair_counts) * (1 + STALE_HEAP_SHARE) + STALE_HEAP_SLACK:
      self._rebuild_heap()  # drop stale entries
    bits = 2 * self.shift
    while self.heap:
      entry = self.heap[0]
      pair = entry & ((1 << bits) - 1)
      count = self.pair_counts.get(pair, 0)  # (no defaultdict insertion)
      if count == -(entry >> bits):
        return (pair >> self.shift, pair & self.mask) if count >= max(min_frequency, 1) else None
      heapq.heappop(self.heap)  # stale: re-queue with the current count
      if count > 0:
        heapq.heappush(self.heap, self._entry(pair, count))
    return None

  def merge(self, pair):
    """Merges `pair` (left id, right id) everywhere; returns the new token (its id reused if the
    string exists)."""
    left, right = self.tokens[pair[0]], self.tokens[pair[1]]
    token = left + (right[len(PREFIX):] if right.startswith(PREFIX) else right)
    if token not in self.ids:
      assert len(self.tokens) <= self.mask, "more tokens than max_tokens"
      self.ids[token] = len(self.tokens)
      self.tokens.append(token)
    new = self.ids[token]
    shift, starts, lengths, counts, flat = (self.shift, self.starts, self.lengths, self.counts,
                                            self.symbols)
    delta = collections.defaultdict(int)
    found = self.where.pop(pair[0] << shift | pair[1], ())
    # Words in the order recorded, an index possibly twice: the second visit finds the pair gone
    # (a merge leaves no occurrence), and the outcome does not depend on the order (the heap's
    # total order picks the next pair); no set or list of all the indices is built.
    for index in (found,) if found.__class__ is int else found:
      start = starts[index]
      symbols = flat[start:start + lengths[index]].tolist()
      merged = _merge_symbols(symbols, pair[0], pair[1], new)
      if len(merged) == len(symbols):
        continue
      count = counts[index]
      for left, right in zip(symbols, symbols[1:]):
        delta[left << shift | right] -= count
      for left, right in zip(merged, merged[1:]):
        new_pair = left << shift | right  # one int object, the key of delta and where
        delta[new_pair] += count
        if left == new or right == new:  # every other pair of `merged` was in `symbols`
          self._add(new_pair, index)
      flat[start:start + len(merged)] = array.array("i", merged)
      lengths[index] = len(merged)
    for changed_pair, change in delta.items():  # (a new pair: pair_counts shares where's key)
      count = self.pair_counts[changed_pair] + change
      if count <= 0:
        del self.pair_counts[changed_pair]
        if self.prune:
          self.where.pop(changed_pair, None)
      else:
        self.pair_counts[changed_pair] = count
        if change > 0:  # a smaller count is re-queued lazily, when its old entry surfaces
          heapq.heappush(self.heap, self._entry(changed_pair, count))
    return token


def _kept_positions(word, kept):
  """(position in word, char) of the word's characters that are in the alphabet."""
  return [(position, char) for position, char in enumerate(word) if char in kept]


def train(word_counts, vocab_size, special_tokens=(), min_frequency=2, limit_alphabet=0):
  """Learned tokens (special_tokens excluded) in training order: alphabet, "##" characters,
  then merged pieces in merge order. len(special_tokens) + len(result) <= vocab_size, smaller
  when merges run out. word_counts: {word: count} (count_words); it is read while the merge
  state is built and not referenced during the merges, so a caller that keeps no reference of its
  own (build_vocab passes CorpusCounts.pop_words()) has the words and their strings freed before
  the merges, where the pairs take their place."""
  chars = alphabet(word_counts, limit_alphabet)
  kept = set(chars)
  order = sorted(word_counts)
  continuations = set()
  for word in order:
    continuations.update(PREFIX + char for position, char in _kept_positions(word, kept)
                         if position)
  tokens = list(special_tokens)
  taken = set(tokens)
  tokens += [token for token in chars + sorted(continuations) if token not in taken]
  ids = {token: i for i, token in enumerate(tokens)}
  first = {char: ids[char] for char in chars}
  inner = {token[len(PREFIX):]: ids[token] for token in continuations}
  words = ((word_counts[word], [inner[char] if position else first[char]
                                for position, char in _kept_positions(word, kept)])
           for word in order)
  merger = _Merger(tokens, ids, max(len(tokens), vocab_size),
                   ((count, symbols) for count, symbols in words if symbols))
  del word_counts, order, words  # (the docstring: not kept through the merges)
  while len(merger.tokens) < vocab_size:
    pair = merger.best(min_frequency)
    if pair is None:
      break
    merger.merge(pair)
  return merger.tokens[len(special_tokens):]
