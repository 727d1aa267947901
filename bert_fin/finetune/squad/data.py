"""SQuAD-schema JSON files (SQuAD v1.1 / v2.0, CMRC 2018, DRCD) -> checked questions (pure Python).

The schema google's run_squad.py reads:
  {"data": [{"title": ..., "paragraphs": [{"context": str, "qas": [
      {"id": str, "question": str, "answers": [{"text": str, "answer_start": int}, ...],
       "is_impossible": bool (v2.0; absent: false)}]}]}]}
CMRC 2018 and DRCD ship in this schema: contexts without spaces, answers by character offset.

read_file(path, version_2, training) reads one file whole and checks every question before
anything is trained or written; the first problem raises DataError (a ValueError):
`FILE: question ID: reason` (or `FILE: data[i].paragraphs[j]...: reason` where there is no id):
not JSON, not this schema, a paragraph without context, an empty question, a repeated id, an
answer whose answer_start does not point at its text (the message says where the text does occur),
an is_impossible question without --version_2_with_negative, and for training google's rule that
every answerable question has exactly one answer; an id that is empty; a string holding a lone
UTF-16 surrogate (`\\udXXX`: valid JSON, but no Unicode text, so no output could hold it: the
message gives its JSON path). Untrusted input is bounded: files over MAX_FILE_BYTES are refused
before reading, a context longer than --max_context_chars (DEFAULT_MAX_CONTEXT_CHARS) is refused
before it is tokenized, nesting deeper than Python's JSON reader allows is a DataError, not a
crash.
"""
import collections
import json
import os
import re

from bert_fin.finetune import label_lists

MAX_FILE_BYTES = 1 << 30  # SQuAD v2.0's training file is 42 MB, CMRC 2018's 8 MB
# SQuAD's longest context is ~3,700 characters, CMRC 2018's and DRCD's ~2,000: 25x room; a context
# of this size is tokenized in ~2 s and ~0.3 GB (docs/measurements.md).
DEFAULT_MAX_CONTEXT_CHARS = 100000
V2_FLAG = "--version_2_with_negative"
_SURROGATE = re.compile("[\ud800-\udfff]")

DataError = label_lists.DataError

Answer = collections.namedtuple("Answer", ["text", "start"])
Answer.__doc__ = """text: str; start: its character offset in the context (None when a prediction
file's answer gives none: only training needs it)."""

Question = collections.namedtuple("Question", [
    "qas_id", "question", "context_index", "answers", "is_impossible"])
Question.__doc__ = """qas_id: str; question: str; context_index: its paragraph in
SquadFile.contexts; answers: tuple of Answer (training: one, or none when impossible);
is_impossible: bool (v2.0)."""

SquadFile = collections.namedtuple("SquadFile", ["path", "contexts", "questions"])
SquadFile.__doc__ = """path: the file read; contexts: [str], one a paragraph with questions;
questions: [Question] in file order."""


def is_labelled(squad_file):
  """Whether every question has answers or is impossible: its predictions can be scored."""
  return all(q.answers or q.is_impossible for q in squad_file.questions)


def unanswered(squad_file):
  """Number of questions with neither answers nor is_impossible."""
  return sum(1 for q in squad_file.questions if not (q.answers or q.is_impossible))


def _load(path):
  """The parsed JSON of path; DataError for a missing, oversized, non-UTF-8 or malformed file."""
  try:
    size = os.path.getsize(path)
  except OSError as e:
    raise DataError("%s: cannot read (%s)" % (path, e.strerror or e))
  if size > MAX_FILE_BYTES:
    raise DataError("%s: %d bytes, more than the %d a SQuAD-schema file may have here: split it"
                    % (path, size, MAX_FILE_BYTES))
  try:
    with open(path, encoding="utf-8-sig") as f:
      text = f.read()
  except UnicodeDecodeError as e:
    raise DataError("%s: not UTF-8 text (byte %d)" % (path, e.start))
  except OSError as e:
    raise DataError("%s: cannot read (%s)" % (path, e.strerror or e))
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise DataError("%s: not valid JSON: %s (line %d column %d)" % (path, e.msg, e.lineno,
                                                                   e.colno))
  except RecursionError:
    raise DataError("%s: JSON nested too deeply to be a SQuAD-schema file" % path)


def _field(obj, key, types, where, required=True):
  """obj[key] checked to be one of `types`; None when absent and not required."""
  if not isinstance(obj, dict):
    raise DataError("%s: expected a JSON object, got %s" % (where, type(obj).__name__))
  if key not in obj or obj[key] is None:
    if required:
      raise DataError("%s: no %r" % (where, key))
    return None
  value = obj[key]
  if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
    raise DataError("%s: %r must be %s, got %s" % (
        where, key, " or ".join(t.__name__ for t in types), type(value).__name__))
  return value


def _text(obj, key, where, path, required=True):
  """obj[key], a str (_field) holding no lone surrogate; `path` is its JSON path for the
  message."""
  value = _field(obj, key, (str,), where, required)
  _check_unicode(value, where, path)
  return value


def _check_unicode(value, where, path):
  """DataError when the str `value` (at JSON path `path`) holds a lone UTF-16 surrogate."""
  bad = _SURROGATE.search(value) if isinstance(value, str) else None
  if bad is not None:
    raise DataError("%s: %s holds a lone surrogate %r at character %d (valid JSON, but not "
                    "Unicode text: no prediction file could hold it; fix the file's \\u "
                    "escapes or its encoding)" % (where, path, bad.group(), bad.start()))


def _answer(raw, context, where, need_start, path):
  """One checked Answer of a question (path: its JSON path)."""
  text = _text(raw, "text", where, path + ".text")
  start = _field(raw, "answer_start", (int,), where, required=need_start)
  if not text.strip():
    raise DataError("%s: empty answer text" % where)
  if start is not None and (start < 0 or context[start:start + len(text)] != text):
    found = context.find(text)
    raise DataError("%s: answer_start %d does not point at the answer text %r (the context "
                    "there reads %r; %s)" % (
                        where, start, text, context[max(start, 0):max(start, 0) + len(text)],
                        "the text occurs at offset %d" % found if found >= 0 else
                        "the text is nowhere in the context"))
  return Answer(text, start)


def _question(raw, context, context_index, path, position, version_2, training, v2_fix):
  """One checked Question; position: where it is in the file (data[i].paragraphs[j].qas[k]);
  v2_fix: what the message tells a v2.0 file read as v1.1 to use."""
  qas_id = _field(raw, "id", (str, int), "%s: %s" % (path, position))
  _check_unicode(qas_id, path, position + ".id")
  if not str(qas_id).strip():
    raise DataError("%s: %s: the id is empty (predictions.json is keyed by it: give every "
                    "question a unique non-empty id)" % (path, position))
  where = "%s: question %s" % (path, qas_id)
  question = _text(raw, "question", where, position + ".question")
  if not question.strip():
    raise DataError("%s: empty question" % where)
  if not context.strip():
    raise DataError("%s: the question has no context (its paragraph's context is empty or "
                    "missing)" % where)
  is_impossible = _field(raw, "is_impossible", (bool,), where, required=False) or False
  if is_impossible and not version_2:
    raise DataError("%s: is_impossible is true: a SQuAD v2.0 file needs %s" % (where, v2_fix))
  raw_answers = _field(raw, "answers", (list,), where, required=training and not is_impossible)
  answers = () if is_impossible else tuple(
      _answer(a, context, "%s: answers[%d]" % (where, i), training,
              "%s.answers[%d]" % (position, i))
      for i, a in enumerate(raw_answers or ()))
  if training and not is_impossible and len(answers) != 1:
    raise DataError("%s: %d answers: for training, each question should have exactly 1 answer "
                    "(google's rule; v2.0: or is_impossible true)" % (where, len(answers)))
  return Question(str(qas_id), question, context_index, answers, is_impossible)


def _context(paragraph, where_p, position, path, max_context_chars):
  """A paragraph's checked context ("" when absent): no lone surrogate, at most
  max_context_chars characters."""
  context = _field(paragraph, "context", (str,), where_p, required=False) or ""
  _check_unicode(context, path, position + ".context")
  if len(context) > max_context_chars:
    raise DataError("%s: %s.context has %d characters, more than --max_context_chars=%d (a "
                    "context is tokenized whole and cut into windows: split it into "
                    "paragraphs, or raise the flag)" % (path, position, len(context),
                                                        max_context_chars))
  return context


def read_file(path, version_2=False, training=False,
              max_context_chars=DEFAULT_MAX_CONTEXT_CHARS, v2_fix=V2_FLAG):
  """The checked SquadFile of a SQuAD-schema JSON file (module docstring); DataError when bad.

  version_2: --version_2_with_negative (is_impossible questions allowed); training: the file
  trains (every answerable question has exactly one answer with its answer_start);
  max_context_chars: the longest context accepted (--max_context_chars); v2_fix: the option an
  is_impossible question read without version_2 is told to use (run_squad's flag by default)."""
  root = _load(path)
  entries = _field(root, "data", (list,), path)
  contexts, questions, seen = [], [], set()
  for i, entry in enumerate(entries):
    where = "%s: data[%d]" % (path, i)
    for j, paragraph in enumerate(_field(entry, "paragraphs", (list,), where)):
      where_p = "%s.paragraphs[%d]" % (where, j)
      qas = _field(paragraph, "qas", (list,), where_p)
      context = _context(paragraph, where_p, "data[%d].paragraphs[%d]" % (i, j), path,
                         max_context_chars)
      if not qas:
        continue
      contexts.append(context)
      for k, raw in enumerate(qas):
        question = _question(raw, context, len(contexts) - 1, path,
                             "data[%d].paragraphs[%d].qas[%d]" % (i, j, k), version_2, training,
                             v2_fix)
        if question.qas_id in seen:
          raise DataError("%s: question %s: the id is used twice (predictions.json is keyed by "
                          "it)" % (path, question.qas_id))
        seen.add(question.qas_id)
        questions.append(question)
  if not questions:
    raise DataError("%s: no question" % path)
  return SquadFile(path, contexts, questions)


Inputs = collections.namedtuple("Inputs", ["train", "predict"])
Inputs.__doc__ = """train, predict: the SquadFile of --train_file / --predict_file, or None when
the run does not read it."""


def read_inputs(settings):
  """The files a run reads, checked (read_file), before TensorFlow is imported; --do_eval with a
  --predict_file that has unanswered questions is a DataError too. settings: flags.Settings."""
  version_2 = settings.task.version_2_with_negative
  longest = settings.data.max_context_chars
  train = predict = None
  if settings.mode.do_train:
    train = read_file(settings.data.train_file, version_2, training=True,
                      max_context_chars=longest)
  if settings.mode.do_predict or settings.mode.do_eval:
    predict = read_file(settings.data.predict_file, version_2, max_context_chars=longest)
    missing = unanswered(predict)
    if settings.mode.do_eval and missing:
      raise DataError("%s: --do_eval scores the predictions against the answers, but %d of %d "
                      "questions have none (add them, or predict only with --do_predict)" % (
                          predict.path, missing, len(predict.questions)))
  return Inputs(train, predict)
