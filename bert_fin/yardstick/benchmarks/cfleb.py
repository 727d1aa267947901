"""BBT-CFLEB / FinCUGE task folders, as the benchmark's download lays them out, -> examples.

A task folder holds train_list.json and eval_list.json (labelled; the benchmark keeps its test
labels private), optionally dev_list.json (then eval_list is test) and problem_list.json
(unlabelled: not read). Each file is one JSON list of rows; the task is the folder's name unless
cfleb_task= says otherwise:

  finfe   [text, label], label 0/1/2 -> negative/neutral/positive: classification (accuracy).
  finnl   [text, "外国 公司"], space-separated topics: multi-label (micro / macro F1).
  finre   [head, tail, relation, text]: the relation of two named entities (micro-F1 over the
          relations other than `unknown`; accuracy). An entity absent from its text is counted.
  finnsp  [id, title, text, "A;B", "1"|"0", "A"]: one example per (text, candidate entity):
          label 1 when the text is negative news about that candidate (F1 over those pairs).
          A candidate absent from its title and text is counted.
  finese  [id, text, event_type, subject]: reading comprehension (question: the event type;
          answer: the subject's first occurrence). A subject that is NaN or not in its text is a
          counted skip (not an unanswerable question: SQuAD v1.1 scoring, as the benchmark).

parse_row(task, path, number, row) -> Parsed; RowError (file, row, field) for a bad row.
"""
from bert_fin.yardstick.benchmarks import rows as rows_lib

TASKS = ("finfe", "finnl", "finre", "finnsp", "finese")
TRAIN_FILE, DEV_FILE, EVAL_FILE = "train_list.json", "dev_list.json", "eval_list.json"
FINFE_LABELS = {0: "negative", 1: "neutral", 2: "positive"}
NO_RELATION = "unknown"  # finre's "no relation": left out of its micro-F1
NEGATIVE, NOT_NEGATIVE = "1", "0"  # finnsp's example labels
ENTITY_SEPARATORS = (";", "；")

Example, Parsed = rows_lib.Example, rows_lib.Parsed


def _finfe(path, number, row):
  text, label = rows_lib.fields(path, number, row, ("text", "label"))
  text = rows_lib.text_field(path, number, text, "text")
  if isinstance(label, str) and label.strip().isdigit():
    label = int(label)
  if isinstance(label, bool) or label not in FINFE_LABELS:
    raise rows_lib.row_error(path, number, "label", "%r is not 0, 1 or 2 (negative, neutral, "
                                                    "positive)" % (label,))
  name = FINFE_LABELS[label]
  return Parsed(name, [Example(text, None, name, ())], None)


def _finnl(path, number, row):
  text, topics = rows_lib.fields(path, number, row, ("text", "labels"))
  text = rows_lib.text_field(path, number, text, "text")
  topics = rows_lib.text_field(path, number, topics, "labels").split()
  if len(set(topics)) != len(topics):
    raise rows_lib.row_error(path, number, "labels", "repeats a topic: %s" % " ".join(topics))
  label = " ".join(sorted(topics))
  return Parsed(label, [Example(text, None, label, ())], None)


def _finre(path, number, row):
  names = ("head", "tail", "relation", "text")
  values = rows_lib.fields(path, number, row, names)
  head, tail, relation, text = (rows_lib.text_field(path, number, value, name)
                                for value, name in zip(values, names))
  return Parsed(relation, [Example(text, None, relation, (head, tail))], None)


def _entities(value):
  for separator in ENTITY_SEPARATORS[1:]:
    value = value.replace(separator, ENTITY_SEPARATORS[0])
  return [name.strip() for name in value.split(ENTITY_SEPARATORS[0]) if name.strip()]


def _finnsp(path, number, row):
  names = ("id", "title", "text", "entities", "negative", "key_entities")
  row_id, title, text, entities, negative, keys = rows_lib.fields(path, number, row, names)
  title = "" if rows_lib.is_missing(title) else rows_lib.text_field(path, number, title, "title",
                                                                    allow_empty=True)
  text = rows_lib.text_field(path, number, text, "text")
  del row_id
  candidates = _entities(rows_lib.text_field(path, number, entities, "entities"))
  negative = str(negative).strip()
  if negative not in (NEGATIVE, NOT_NEGATIVE):
    raise rows_lib.row_error(path, number, "negative", "%r is not \"1\" or \"0\"" % (negative,))
  key_entities = set() if rows_lib.is_missing(keys) else set(
      _entities(rows_lib.text_field(path, number, keys, "key_entities", allow_empty=True)))
  if negative == NEGATIVE and not key_entities:
    raise rows_lib.row_error(path, number, "key_entities", "empty in a negative row (it names "
                                                           "the entities the news is negative "
                                                           "about)")
  stray = sorted(key_entities - set(candidates))
  if stray:
    raise rows_lib.row_error(path, number, "key_entities", "%s not among the candidates %s" % (
        ", ".join(stray), ";".join(candidates)))
  full = text if not title or title in text else title + "。" + text
  examples = [Example(full, None, NEGATIVE if negative == NEGATIVE and name in key_entities
                      else NOT_NEGATIVE, (name,)) for name in dict.fromkeys(candidates)]
  return Parsed(negative, examples, None)


def _finese(path, number, row):
  row_id, text, event_type, subject = rows_lib.fields(path, number, row,
                                                      ("id", "text", "event_type", "subject"))
  del row_id
  text = rows_lib.text_field(path, number, text, "text")
  event_type = rows_lib.text_field(path, number, event_type, "event_type")
  if rows_lib.is_missing(subject):
    return Parsed(event_type, [], "subject NaN")
  subject = rows_lib.text_field(path, number, subject, "subject")
  if subject not in text:
    return Parsed(event_type, [], "subject not in its text")
  return Parsed(event_type, [Example(text, event_type, subject, ())], None)


PARSERS = {"finfe": _finfe, "finnl": _finnl, "finre": _finre, "finnsp": _finnsp,
           "finese": _finese}


def parse_row(task, path, number, row):
  """The Parsed row `number` (1-based) of `task`'s file `path`; RowError when bad."""
  return PARSERS[task](path, number, row)


def entity_missing(example):
  """The entities of `example` not found in its text (exact substring)."""
  return [name for name in example.entities if name not in example.text]
