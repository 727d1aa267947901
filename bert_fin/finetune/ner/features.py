"""Tagged sentences -> WordPiece windows for the token tagger, and window predictions -> unit tags.

Alignment: each unit (ner_data: a character, or a Latin word / digit run) is tokenized alone by
bert_fin's WordPiece tokenizer (google's rules). Its first piece carries the unit's tag (weight 1
in the loss, the piece whose prediction is the unit's); further pieces of the unit (`##` pieces of
a Latin word) get weight 0. A unit the tokenizer returns nothing for (a space, a control
character) or a character missing from the vocab becomes one [UNK] piece and keeps its tag.

Windows: a sentence whose pieces do not fit max_seq_length - 2 ([CLS] ... [SEP]) is split at unit
boundaries into windows of at most that many pieces; each window starts at the first unit at least
half a window ((max_seq_length - 2) // 2 pieces) after the previous window's start, so consecutive
windows overlap by about half a window, and every unit is in one window or more. A unit's
prediction is read from the window where it has the most context: the largest
min(pieces before it, pieces after it) in that window (the earlier window on ties). A single unit
longer than a window keeps its first max_seq_length - 2 pieces (its first piece carries its tag,
so no tag is lost); this is counted (Encoded.cut_units). Nothing else is cut.

Arrays (numpy int32, one row a window, sentences in order, their windows in order):
  input_ids [N, S], input_len [N], segment_ids [N, S] (zeros), label_ids [N, S] (the unit's tag id
  at its first piece, 0 elsewhere and for untagged sentences), label_mask [N, S] (1 at each unit's
  first piece, also for untagged sentences: the positions predictions are read from).
"""
import collections

import numpy as np

from bert_fin.records import schema as records
from bert_fin.finetune import batches
from bert_fin.tokenization import special_tokens as special

LABEL_IDS = batches.LABEL_IDS
LABEL_MASK = "label_mask"

Window = collections.namedtuple("Window", ["sentence", "first_unit", "positions"])
Window.__doc__ = """One row: its sentence's index, the index of its first unit, and positions: the
row position of each of its units' first piece (units first_unit, first_unit + 1, ...)."""
Encoded = collections.namedtuple("Encoded", ["arrays", "windows", "num_units", "cut_units"])
Encoded.__doc__ = """arrays (module docstring), windows (list of Window, one a row), num_units:
units per sentence, cut_units: units longer than a window (pieces past it dropped)."""


def unit_pieces(units, tokenizer):
  """WordPiece pieces of each unit (list of lists); never empty: [UNK] for a unit without any."""
  pieces = tokenizer.tokenize_batch(list(units)) if units else []
  return [list(p) if p else [special.UNK] for p in pieces]


def plan_windows(lengths, capacity):
  """[(first unit, end unit exclusive)] covering units of the given piece lengths (module
  docstring's rule); capacity: pieces a window holds (max_seq_length - 2)."""
  if capacity < 1:
    raise ValueError("window capacity must be >= 1, got %d" % capacity)
  lengths = [min(n, capacity) for n in lengths]
  starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
  windows, first = [], 0
  while True:
    end = first
    while end < len(lengths) and starts[end + 1] - starts[first] <= capacity:
      end += 1
    windows.append((first, end))
    if end >= len(lengths):
      return windows
    following = first + 1
    while following < end and starts[following] < starts[first] + capacity // 2:
      following += 1
    first = following


def choose_windows(windows, lengths):
  """For each unit, the index in `windows` of the one its prediction is read from."""
  starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
  best = [None] * len(lengths)
  for index, (first, end) in enumerate(windows):
    for unit in range(first, end):
      context = min(starts[unit] - starts[first], starts[end] - starts[unit + 1])
      if best[unit] is None or context > best[unit][0]:
        best[unit] = (context, index)
  return [b[1] for b in best]


def encode(sentences, labels, tokenizer, max_seq_length):
  """Lays out ner_data.Sentence's as windows. labels: the tag list (tag -> its id). Returns
  Encoded."""
  if max_seq_length < 3:
    raise ValueError("max_seq_length must be >= 3 ([CLS] unit [SEP]), got %d" % max_seq_length)
  capacity = max_seq_length - 2
  tag_ids = {tag: i for i, tag in enumerate(labels)}
  flat = unit_pieces([u for s in sentences for u in s.units], tokenizer)
  rows, windows, cut = [], [], 0
  offset = 0
  for index, sentence in enumerate(sentences):
    pieces = flat[offset:offset + len(sentence.units)]
    offset += len(sentence.units)
    cut += sum(len(p) > capacity for p in pieces)
    pieces = [p[:capacity] for p in pieces]
    for first, end in plan_windows([len(p) for p in pieces], capacity):
      tokens, positions, tags = [special.CLS], [], []
      for unit in range(first, end):
        positions.append(len(tokens))
        tokens += pieces[unit]
        tags.append(tag_ids[sentence.tags[unit]] if sentence.tags else 0)
      tokens.append(special.SEP)
      rows.append((tokenizer.convert_tokens_to_ids(tokens), positions, tags))
      windows.append(Window(index, first, positions))
  arrays = {name: np.zeros([len(rows), max_seq_length], np.int32)
            for name in (records.INPUT_IDS, records.SEGMENT_IDS, LABEL_IDS, LABEL_MASK)}
  arrays[records.INPUT_LEN] = np.zeros([len(rows)], np.int32)
  for row, (ids, positions, tags) in enumerate(rows):
    arrays[records.INPUT_IDS][row, :len(ids)] = ids
    arrays[records.INPUT_LEN][row] = len(ids)
    arrays[LABEL_IDS][row, positions] = tags
    arrays[LABEL_MASK][row, positions] = 1
  return Encoded(arrays, windows, [len(s.units) for s in sentences], cut)


def join(encoded, row_values):
  """Per-sentence lists of per-unit values from per-row values ([N, S] array-likes, e.g. the
  predicted tag ids of each window row): each unit's value is read at its first piece in the
  window choose_windows picks."""
  by_sentence = collections.defaultdict(list)
  for row, window in enumerate(encoded.windows):
    by_sentence[window.sentence].append(row)
  joined = []
  for index, num_units in enumerate(encoded.num_units):
    rows = by_sentence[index]
    spans, lengths = [], [0] * num_units
    for row in rows:
      window = encoded.windows[row]
      ends = window.positions[1:] + [int(encoded.arrays[records.INPUT_LEN][row]) - 1]
      for k, unit in enumerate(range(window.first_unit, window.first_unit + len(ends))):
        lengths[unit] = ends[k] - window.positions[k]
      spans.append((window.first_unit, window.first_unit + len(window.positions)))
    chosen = choose_windows(spans, lengths)
    values = []
    for unit in range(num_units):
      row = rows[chosen[unit]]
      window = encoded.windows[row]
      values.append(row_values[row][window.positions[unit - window.first_unit]])
    joined.append(values)
  return joined
