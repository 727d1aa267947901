"""MinHash signatures and LSH banding for near-duplicate documents (pure maths, numpy, no I/O).

Shingles. A text is cut into tokens: every non-space character is one token (digits too: a changed
figure changes a few shingles, as in character 5-grams), except runs of ASCII letters, which are
one token each (a Latin word, case folded). A shingle is SHINGLE_SIZE
consecutive tokens, so Chinese text gets character 5-grams and Latin text word 5-grams (a
whitespace tokeniser would make an unbroken run of Chinese one token). A text with fewer tokens
than SHINGLE_SIZE (but at least one) has exactly one shingle, all its tokens: it can only match a
text with the same tokens, never every other short text. A text without tokens has no shingle and
gets a signature of EMPTY values, which band_keys leaves out (it is never a candidate).
Shingles are 64-bit hashes: tokens are hashed by code point (a Latin word by a polynomial over its
letters), mixed (splitmix64's finaliser) and combined 5 at a time. No Python `hash` (salted per
process): the same text has the same shingles in every process, on every host.

Signatures. num_perm hash functions h_k(x) = ((a_k * x + b_k) mod 2^64) >> 32 (multiply-shift, a_k
odd; a, b drawn once from a fixed seed, HASH_SEED), applied to the shingle hashes of a document;
the signature is the minimum of each: uint32 [num_perm]. The share of equal positions of two
signatures estimates the Jaccard similarity of their shingle sets (standard error
sqrt(J (1 - J) / num_perm)). All documents of a batch are hashed in one [num_perm, shingles] pass.

Banding. lsh_params(threshold, num_perm) picks b bands of r rows (b * r <= num_perm) minimising the
weighted areas of false positives below the threshold and false negatives above it under the
S-curve P(s) = 1 - (1 - s^r)^b; band_keys(signatures, b, r) hashes each band (and its index) to a
uint64 key: two documents are candidates when one of their keys is equal.
"""
import numpy as np

try:
  from bert_fin.text.dedup import _minhash
except ImportError:  # not compiled: numpy_signatures computes the same values, slower
  _minhash = None

SHINGLE_SIZE = 5
DEFAULT_NUM_PERM = 128
HASH_SEED = 20240532  # the hash family: changing it changes every signature (seen manifests too)
# (so does any change to the tokens or shingles: tests/test_near_dup.py pins a signature)
EMPTY = np.uint32(0xFFFFFFFF)
# false negatives (pairs above the threshold never compared) are lost for good, false positives
# only cost a verification: the banding weighs the former more
FALSE_POSITIVE_WEIGHT = 0.05
FALSE_NEGATIVE_WEIGHT = 0.95
_CHUNK_ELEMENTS = 1 << 18  # num_perm x shingles hashed at once by numpy (2 MB of uint64)
_MAX_WORD = 4096
_WORD_BASE = np.uint64(0x100000001B3)
_SHINGLE_BASE = np.uint64(0x9E3779B97F4A7C15)
_BAND_BASE = np.uint64(0xC2B2AE3D27D4EB4F)
with np.errstate(over="ignore"):
  _WORD_POWERS = np.concatenate([[1], np.cumprod(np.full(_MAX_WORD - 1, _WORD_BASE, np.uint64),
                                                 dtype=np.uint64)]).astype(np.uint64)
_U64 = np.uint64


def mix64(values):
  """splitmix64's finaliser on a uint64 array (wrapping arithmetic): a bijection that spreads
  every input bit over the output."""
  x = np.array(values, dtype=np.uint64)
  with np.errstate(over="ignore"):
    x ^= x >> _U64(30)
    x *= _U64(0xBF58476D1CE4E5B9)
    x ^= x >> _U64(27)
    x *= _U64(0x94D049BB133111EB)
    x ^= x >> _U64(31)
  return x


def _tokens(points):
  """uint64 code points [chars] -> (uint64 [tokens] mixed token hashes, int64 [tokens] index of
  each token's first character)."""
  space = (points <= 32) | (points == 0x3000) | (points == 0xA0) | (points == 0x85)
  folded = points | _U64(32)
  latin = (folded >= 97) & (folded <= 122)
  continues = latin & np.concatenate([[False], latin[:-1]])
  keep = np.flatnonzero(~space)
  starts = ~continues[keep]
  values = np.where(latin[keep], folded[keep], points[keep])
  if starts.all():  # no Latin word longer than one letter: one token per character
    return mix64(values), keep
  positions = np.arange(len(values))
  start_of = np.maximum.accumulate(np.where(starts, positions, 0))
  weights = _WORD_POWERS[np.minimum(positions - start_of, _MAX_WORD - 1)]
  first = np.flatnonzero(starts)
  with np.errstate(over="ignore"):
    return mix64(np.add.reduceat(values * weights, first)), keep[first]


def token_hashes(text):
  """text -> uint64 [tokens]: one mixed hash per token (see the module docstring)."""
  return _tokens(np.frombuffer(text.encode("utf-32-le"), "<u4").astype(np.uint64))[0]


def _combine(tokens, size):
  """uint64 [n] -> uint64 [n - size + 1]: hashes of every `size` consecutive tokens."""
  count = len(tokens) - size + 1
  with np.errstate(over="ignore"):
    combined = tokens[:count].copy()
    for offset in range(1, size):
      combined *= _SHINGLE_BASE
      combined += tokens[offset:offset + count]
    if size != SHINGLE_SIZE:
      combined ^= _U64(size)  # a short text never equals a 5-gram of a longer one
  return mix64(combined)


def shingle_batch(texts):
  """list of str -> (uint64 [shingles] of every text in turn, int64 [len(texts)] how many each
  has): hashes of SHINGLE_SIZE consecutive tokens, or the one hash of all tokens of a text shorter
  than that, or none (repeats included: a signature does not mind). The texts are tokenised as
  one array (newline-joined: a token never spans two texts) for speed."""
  lengths = np.array([len(text) for text in texts], np.int64)
  points = np.frombuffer("\n".join(texts).encode("utf-32-le"), "<u4").astype(np.uint64)
  tokens, token_starts = _tokens(points)
  text_starts = np.cumsum(lengths + 1) - lengths - 1
  token_text = np.searchsorted(text_starts, token_starts, side="right") - 1
  per_text = np.bincount(token_text, minlength=len(texts))
  size = SHINGLE_SIZE
  valid = np.flatnonzero(token_text[:len(tokens) - size + 1] == token_text[size - 1:]) \
      if len(tokens) >= size else np.zeros([0], np.int64)
  hashes, owners = _combine(tokens, size)[valid] if len(valid) else tokens[:0], token_text[valid]
  short = np.flatnonzero((per_text > 0) & (per_text < size))
  if len(short):  # too short for one shingle: all its tokens are its one shingle
    firsts = np.cumsum(per_text) - per_text
    extra = np.concatenate([_combine(tokens[firsts[t]:firsts[t] + per_text[t]], per_text[t])
                            for t in short.tolist()])
    order = np.argsort(np.concatenate([owners, short]), kind="stable")
    hashes = np.concatenate([hashes, extra])[order]
    owners = np.concatenate([owners, short])[order]
  return hashes, np.bincount(owners, minlength=len(texts)).astype(np.int64)


def shingle_hashes(text):
  """text -> uint64 [shingles]: shingle_batch of one text."""
  return shingle_batch([text])[0]


def hash_family(num_perm, seed=HASH_SEED):
  """(a, b): uint64 [num_perm, 1] each, a odd: the fixed family of MinHash functions, the
  splitmix64 sequence from `seed` (plain arithmetic: no random generator whose stream a numpy
  release could change, so signatures on disk stay comparable)."""
  with np.errstate(over="ignore"):
    states = _U64(seed) + np.arange(1, 2 * num_perm + 1, dtype=np.uint64) * _SHINGLE_BASE
  values = mix64(states).reshape(2, num_perm, 1)
  return values[0] | _U64(1), values[1]


def signatures(texts, num_perm=DEFAULT_NUM_PERM, family=None):
  """list of str -> uint32 [len(texts), num_perm] MinHash signatures (EMPTY rows for texts
  without a token). family: hash_family(num_perm) (computed when None). Hashed by the C
  extension (_minhash.c, built by `make install`) when it is there, else by numpy_signatures:
  the same values."""
  a, b = family if family is not None else hash_family(num_perm)
  if _minhash is None:
    return numpy_signatures(*shingle_batch(texts), a, b)
  result = np.full((len(texts), num_perm), EMPTY, np.uint32)
  _minhash.text_signatures(np.frombuffer("\n".join(texts).encode("utf-32-le"), "<u4"),
                           np.array([len(text) for text in texts], np.int64),
                           np.ascontiguousarray(a.reshape(-1)),
                           np.ascontiguousarray(b.reshape(-1)), _WORD_POWERS, result)
  return result


def numpy_signatures(flat, counts, a, b):
  """The reference: shingle_batch's (flat, counts) and the family (a, b) -> uint32 [len(counts),
  num_perm], every text's [num_perm, shingles] hashes in one pass, _CHUNK_ELEMENTS at a time."""
  num_perm = len(a)
  result = np.full((len(counts), num_perm), EMPTY, np.uint32)
  rows = np.flatnonzero(counts)
  if not len(rows):
    return result
  ends = np.cumsum(counts[rows])
  step = max(1, _CHUNK_ELEMENTS // num_perm)
  buffer = np.empty(num_perm * step, np.uint64)  # reused: no page faults of a new array a chunk
  first = 0  # index into rows of the first text not yet done
  while first < len(rows):
    begin = ends[first - 1] if first else 0
    last = max(first + 1, int(np.searchsorted(ends, begin + step, side="right")))
    stop = ends[last - 1]
    with np.errstate(over="ignore"):
      if stop - begin <= step:
        hashed = buffer[:num_perm * (stop - begin)].reshape(num_perm, stop - begin)
        np.multiply(a, flat[begin:stop], out=hashed)  # [num_perm, shingles of texts first..]
      else:  # one text longer than a chunk
        hashed = a * flat[begin:stop]
      hashed += b
    offsets = np.concatenate([[0], ends[first:last - 1] - begin])
    # the top 32 bits of the minimum are the minimum of the top 32 bits (a shift is monotone)
    result[rows[first:last]] = (np.minimum.reduceat(hashed, offsets, axis=1) >> _U64(32)).T
    first = last
  return result


def similarity(left, right):
  """Estimated Jaccard similarity: float64 [n], the share of equal positions of uint32
  signatures left and right [n, num_perm] (0 where either has no shingle)."""
  left, right = np.atleast_2d(left), np.atleast_2d(right)
  return np.where(has_shingles(left), (left == right).mean(axis=1), 0.0)


def shingle_sets(texts):
  """list of str -> list of sorted unique uint64 arrays: each text's set of shingles."""
  hashes, counts = shingle_batch(texts)
  return [np.unique(part) for part in np.split(hashes, np.cumsum(counts)[:-1])]


def set_jaccard(left, right):
  """Exact Jaccard similarity of two shingle_sets entries (0.0 when both are empty)."""
  if not len(left) or not len(right):
    return 0.0
  where = np.minimum(np.searchsorted(right, left), len(right) - 1)
  common = int(np.count_nonzero(right[where] == left))  # both sorted and unique
  return common / (len(left) + len(right) - common)


def jaccard(left_text, right_text):
  """Exact Jaccard similarity of the shingle sets of two texts (0.0 when both have none)."""
  return set_jaccard(*shingle_sets([left_text, right_text]))


def verification_margin(threshold, num_perm):
  """4 standard errors of the estimate at the threshold: an estimate this far from it (either
  side) is on the right side of it but for odds of ~3e-5; closer ones deserve an exact check."""
  return 4.0 * np.sqrt(threshold * (1.0 - threshold) / num_perm)


def candidate_probability(similarity_values, bands, rows):
  """P(two documents of Jaccard s share a band) = 1 - (1 - s^rows)^bands."""
  s = np.asarray(similarity_values, np.float64)
  return 1.0 - (1.0 - s**rows) ** bands


def lsh_params(threshold, num_perm, false_positive_weight=FALSE_POSITIVE_WEIGHT,
               false_negative_weight=FALSE_NEGATIVE_WEIGHT):
  """(bands, rows) with bands * rows <= num_perm minimising fp_weight * (area under the S-curve
  below threshold) + fn_weight * (area above it missed); ties: fewer bands."""
  if not 0.0 < threshold < 1.0:
    raise ValueError("the near-duplicate threshold must be in (0, 1), not %r" % threshold)
  below = np.linspace(0.0, threshold, 501)
  above = np.linspace(threshold, 1.0, 501)
  best = None
  for bands in range(1, num_perm + 1):
    for rows in range(1, num_perm // bands + 1):
      false_positive = np.trapz(candidate_probability(below, bands, rows), below)
      false_negative = np.trapz(1.0 - candidate_probability(above, bands, rows), above)
      error = false_positive_weight * false_positive + false_negative_weight * false_negative
      if best is None or error < best[0] - 1e-12:
        best = (error, bands, rows)
  return best[1], best[2]


def band_keys(signature_rows, bands, rows):
  """uint32 [n, num_perm] -> uint64 [n, bands]: one key per band (hash of the band's rows and
  its index). Rows that are EMPTY (no shingle) get no meaningful key: callers drop them
  (has_shingles)."""
  signature_rows = np.asarray(signature_rows, np.uint32)
  keys = np.empty((len(signature_rows), bands), np.uint64)
  with np.errstate(over="ignore"):
    for band in range(bands):
      key = np.full(len(signature_rows), _U64(band + 1), np.uint64)
      for row in range(band * rows, (band + 1) * rows):
        key *= _BAND_BASE
        key += signature_rows[:, row].astype(np.uint64)
      keys[:, band] = mix64(key)
  return keys


def has_shingles(signature_rows):
  """bool [n]: signature rows of texts with at least one shingle (not all EMPTY)."""
  return ~(np.asarray(signature_rows) == EMPTY).all(axis=1)
