"""Entity-level precision / recall / F1 (CoNLL semantics) and token accuracy, pure Python.

An entity counts as found only when its type and both boundaries match a gold entity (conlleval).
Entities are read from a tag sequence by conlleval's chunk rules, for BIO and BIOES alike, so an
invalid sequence is decoded the same way for gold and predicted tags:
  an entity starts at B-X or S-X, or at I-X / E-X that does not continue an entity of type X
  (after O, after another type, or after E-X / S-X that closed one): `O I-X I-X` is one X entity
  of two units, `B-X I-Y` two entities;
  it ends before O, B-, S- or another type, and after E-X or S-X.
Per type: precision = correct / predicted, recall = correct / gold, F1 their harmonic mean (0 when
both are 0, sklearn's zero_division=0). micro: from the totals over every type; macro: the
unweighted mean over the types of the tag list and the gold entities.
"""
import collections

from bert_fin.finetune import label_lists

OUTSIDE = "O"
_FIGURES = ("precision", "recall", "f1")


def _split(tag):
  if tag == OUTSIDE or "-" not in tag:
    return OUTSIDE, None
  prefix, kind = tag.split("-", 1)
  return prefix, kind


def _ends(prev, prev_kind, prefix, kind):
  """conlleval's end_of_chunk: does the entity open at `prev` end before this tag?"""
  if prev == OUTSIDE:
    return False
  return (prev in "ES" or prefix in "BSO" and prev in "BI" or prefix == OUTSIDE
          or prev_kind != kind)


def _starts(prev, prev_kind, prefix, kind):
  """conlleval's start_of_chunk: does an entity start at this tag?"""
  if prefix == OUTSIDE:
    return False
  return prefix in "BS" or prev in "ESO" or prev_kind != kind


def entities(tags):
  """[(type, start, end exclusive)] of a BIO / BIOES tag sequence (module docstring's rules)."""
  found, start, prev, prev_kind = [], None, OUTSIDE, None
  for i, tag in enumerate(list(tags) + [OUTSIDE]):
    prefix, kind = _split(tag)
    if start is not None and _ends(prev, prev_kind, prefix, kind):
      found.append((prev_kind, start, i))
      start = None
    if _starts(prev, prev_kind, prefix, kind):
      start = i
    prev, prev_kind = prefix, kind
  return found


def count(gold_sequences, predicted_sequences):
  """{type: [correct, predicted, gold]} and (correct tokens, tokens) over paired tag sequences."""
  counts = collections.defaultdict(lambda: [0, 0, 0])
  right = total = 0
  for gold, predicted in zip(gold_sequences, predicted_sequences):
    if len(gold) != len(predicted):
      raise ValueError("a gold sequence of %d tags paired with %d predicted" % (
          len(gold), len(predicted)))
    gold_set, predicted_set = set(entities(gold)), set(entities(predicted))
    for kind, _, _ in gold_set:
      counts[kind][2] += 1
    for entity in predicted_set:
      counts[entity[0]][1] += 1
      counts[entity[0]][0] += entity in gold_set
    right += sum(g == p for g, p in zip(gold, predicted))
    total += len(gold)
  return counts, (right, total)


def sentence_counts(gold_sequences, predicted_sequences):
  """int [n, 3] each sentence's entity [correct, predicted - correct, gold - correct] (tp, fp,
  fn): their column sums are count()'s totals, so micro-F1 = 2tp / (2tp + fp + fn)."""
  rows = []
  for gold, predicted in zip(gold_sequences, predicted_sequences):
    correct = predicted_count = gold_count = 0
    for right, guessed, wanted in count([gold], [predicted])[0].values():
      correct, predicted_count, gold_count = (correct + right, predicted_count + guessed,
                                              gold_count + wanted)
    rows.append([correct, predicted_count - correct, gold_count - correct])
  return rows


def _prf(correct, predicted, gold):
  precision = correct / predicted if predicted else 0.0
  recall = correct / gold if gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return precision, recall, f1


def entity_report(gold_sequences, predicted_sequences, types=()):
  """OrderedDict of eval_* figures: eval_micro_{precision,recall,f1}, eval_macro_{...},
  eval_token_accuracy, eval_num_entities (gold), eval_num_predicted_entities, and per type eval_{precision,recall,f1,
  support}_<TYPE> (support: gold entities). types: the tag list's entity types (reported even
  when absent from the data)."""
  counts, (right, total) = count(gold_sequences, predicted_sequences)
  kinds = sorted(set(types) | {k for k, c in counts.items() if c[2] or c[1]})
  totals = [sum(counts[k][i] for k in kinds) for i in range(3)]
  per_type = {k: _prf(*counts[k]) for k in kinds}
  report = collections.OrderedDict()
  for name, value in zip(("precision", "recall", "f1"), _prf(*totals)):
    report["eval_micro_" + name] = value
  for i, name in enumerate(("precision", "recall", "f1")):
    report["eval_macro_" + name] = (sum(per_type[k][i] for k in kinds) / len(kinds)
                                    if kinds else 0.0)
  report["eval_token_accuracy"] = right / total if total else 0.0
  report["eval_num_entities"] = totals[2]
  report["eval_num_predicted_entities"] = totals[1]
  for kind in kinds:
    part = label_lists.key_part(kind)
    for name, value in zip(("precision", "recall", "f1"), per_type[kind]):
      report["eval_%s_%s" % (name, part)] = value
    report["eval_support_" + part] = counts[kind][2]
  return report


def table(report, types):
  """The console table: one row per type, then micro and macro (P, R, F1 in %, support)."""
  width = max([len(t) for t in types] + [5])
  lines = ["%-*s  %6s  %6s  %6s  %7s" % (width, "type", "P", "R", "F1", "support")]
  rows = [(t, ["eval_%s_%s" % (n, label_lists.key_part(t)) for n in _FIGURES + ("support",)])
          for t in types]
  rows += [(a, ["eval_%s_%s" % (a, n) for n in _FIGURES] + ["eval_num_entities"])
           for a in ("micro", "macro")]
  for label, keys in rows:
    lines.append("%-*s  %6.2f  %6.2f  %6.2f  %7d" % (
        (width, label) + tuple(100 * report[k] for k in keys[:3]) + (report[keys[3]],)))
  lines.append("token accuracy %.2f%%" % (100 * report["eval_token_accuracy"]))
  return "\n".join(lines)
