"""A vocab adapted to a corpus without moving a single id: [unusedN] slots first, then appended.

`plan(base_tokens, counts, ...)` takes the pieces a corpus needs (unk_census: the missing
"role pieces" with their occurrences) and places the most frequent ones (count >= min_count, at
most max_new) into the base vocab's [unusedN] slots in id order; those beyond the slots are
appended after the last id (append=True), and the appended block is padded with new
[unusedN] tokens (numbered after the highest existing one) to a multiple of pad_multiple, as
google's vocabs are (tensor cores; the pads are free slots for the next adaptation). Every token
of the base vocab other than a filled [unusedN] keeps its id, so a checkpoint of the base vocab
stays meaningful row for row (modeling/vocab_rows.py grows its vocab-sized variables to match).
"""
import dataclasses
import re

from bert_fin.tokenization import vocab as vocab_lib

_UNUSED_NUMBER = re.compile(r"^\[unused(\d+)\]$")


class AdaptError(ValueError):
  """The vocab cannot be adapted as asked (one line naming the fix)."""


@dataclasses.dataclass(frozen=True)
class VocabPlan:
  """tokens: the new vocab (list, id = position); filled: ((id, token), ...) written into
  [unusedN] slots; appended: ((id, token), ...) added after the base vocab (pads excluded);
  pads: ids of the [unusedN] tokens that pad the appended block; left_out: ((token, count,
  reason), ...) of needed pieces not placed; base_size: len(base vocab)."""
  tokens: list
  filled: tuple
  appended: tuple
  pads: tuple
  left_out: tuple
  base_size: int

  @property
  def new_ids(self):
    """Ids whose rows are new (filled slots, appended tokens and pads), ascending."""
    return sorted([i for i, _ in self.filled] + [i for i, _ in self.appended] + list(self.pads))


def padding_tokens(tokens, count):
  """`count` new [unusedN] names numbered after the highest [unusedN] of tokens (pass the base
  vocab too: its filled slots' numbers stay taken)."""
  numbers = [int(m.group(1)) for m in map(_UNUSED_NUMBER.match, tokens) if m]
  start = max(numbers, default=0) + 1
  return ["[unused%d]" % n for n in range(start, start + count)]


def plan(base_tokens, counts, min_count=2, max_new=0, append=True, pad_multiple=8):
  """VocabPlan (see the module docstring). counts: {piece: occurrences}; max_new 0: no limit.

  Raises AdaptError when append is False and the base vocab has no [unusedN] slot."""
  slots = vocab_lib.unused_slots(base_tokens)
  if not append and not slots:
    raise AdaptError("the vocab has no [unusedN] slot and appending is off (--no_append): allow "
                     "appending (new rows at the end of the embeddings) or use a vocab with "
                     "[unusedN] slots")
  ranked = vocab_lib.ranked_missing(counts, set(base_tokens), min_count)
  chosen = ranked[:max_new] if max_new else ranked
  left_out = [(token, counts[token], "over --max_new_tokens") for token in ranked[len(chosen):]]
  left_out += sorted(((token, n, "below --min_count") for token, n in counts.items()
                      if n < min_count and token not in base_tokens),
                     key=lambda item: (-item[1], item[0]))
  tokens = list(base_tokens)
  filled = tuple(zip(slots, chosen))
  for slot, token in filled:
    tokens[slot] = token
  rest = chosen[len(filled):]
  appended, pads = (), ()
  if rest and not append:
    left_out = [(token, counts[token], "no [unusedN] slot left (appending is off)")
                for token in rest] + left_out
  elif rest:
    appended = tuple((len(tokens) + i, token) for i, token in enumerate(rest))
    tokens.extend(rest)
    padding = padding_tokens(list(base_tokens) + tokens, -len(tokens) % pad_multiple if pad_multiple else 0)
    pads = tuple(range(len(tokens), len(tokens) + len(padding)))
    tokens.extend(padding)
  return VocabPlan(tokens=tokens, filled=filled, appended=appended, pads=pads,
                   left_out=tuple(left_out), base_size=len(base_tokens))
