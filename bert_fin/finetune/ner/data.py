"""Named-entity data: the train / dev / test files of a directory -> tagged sentences, tag list.

Formats (`--task_name`; `auto` picks the one whose train/dev/test files exist):
  chars    {train,dev,test}.txt, the classic Chinese NER layout (MSRA, People's Daily, Weibo,
           Resume): one unit a line, `char<TAB or spaces>TAG`, a blank line between sentences.
           A unit is usually one character; a multi-character unit (a Latin word) is kept as one
           unit with one tag. Test lines may omit the tag (`char` alone); then no test figures.
  cluener  {train,dev,test}.json, CLUENER2020's JSON lines: {"text": str, "label": {type:
           {mention: [[start, end], ...]}}}, `end` inclusive character offsets; "label" optional
           in test; other keys ("id") are kept in test_predictions.json. The text is cut into
           units: a run of ASCII letters / digits is one unit (cut again at every gold entity
           boundary), any other character is a unit of its own; spans become BIO tags per unit.

Tag schemes: BIO (B-X, I-X, O) and BIOES (also E-X, S-X); a file's scheme is BIOES when one of
its tags has the E- or S- prefix. The tag list (`labels.txt` beside the model): --labels, else the
training set's tags sorted (O first, then by type, then by prefix B, I, E, S), else the saved list.

Bad data stops the run before training, as `FILE:LINE: what is wrong (what to do)` (DataError):
a line with another column count than `char TAG`, a tag that is not O / B-X / I-X / E-X / S-X,
a tag outside the tag list (dev, test, or train with --labels), a CLUENER line that is not a JSON
object with a non-empty "text", a span out of range, not matching its mention, or overlapping
another span, a missing tag or label in train / dev, a split with no sentence.
Blank lines: sentence separators (chars; several in a row are allowed) or ignored (cluener);
both are kept as blank lines in the predictions file.
"""
import collections
import json
import os
import re

from bert_fin.finetune import label_lists
from bert_fin.finetune.ner import metrics as ner_metrics

CHARS, CLUENER, AUTO = "chars", "cluener", "auto"
FORMATS = (AUTO, CHARS, CLUENER)
EXTENSIONS = {CHARS: "txt", CLUENER: "json"}
OUTSIDE = "O"
PREFIXES = "BIES"  # the order of a type's tags in the sorted tag list
BIO, BIOES = "BIO", "BIOES"
PREDICTIONS_FILE = {CHARS: "test_predictions.txt", CLUENER: "test_predictions.json"}
DataError = label_lists.DataError
_TAG = re.compile(r"^([BIES])-(\S+)$")
_ASCII_RUN = re.compile(r"[A-Za-z0-9]+")

Sentence = collections.namedtuple("Sentence", ["units", "tags", "line", "offsets"])
Sentence.__doc__ = """units: list of str (a chars line's first column, or a piece of a CLUENER
text); tags: list of str, one a unit, or None (unlabelled test); line: the 1-based line of its
first unit; offsets: CLUENER only, the character offset of each unit in its text (else None)."""

Split = collections.namedtuple("Split", ["split", "path", "data_format", "sentences", "lines",
                                         "scheme"])
Split.__doc__ = """A split's name, file, format, sentences (file order), lines: the file's lines
(chars: without newlines; cluener: the parsed objects, None for a blank line) from which the
predictions file is written, scheme: BIO or BIOES (of its tags; BIO when untagged)."""


def split_path(data_dir, split, data_format):
  return os.path.join(data_dir, "%s.%s" % (split, EXTENSIONS[data_format]))


def resolve_format(data_dir, data_format, splits):
  """The format of --data_dir: data_format, or for `auto` the one whose files of `splits` exist.
  Raises DataError when none or both do."""
  if data_format != AUTO:
    return data_format
  found = [f for f in (CHARS, CLUENER)
           if all(os.path.isfile(split_path(data_dir, s, f)) for s in splits)]
  if len(found) != 1:
    raise DataError("--data_dir %s: %s for --task_name=auto (it needs %s, or %s): name the format "
                    "with --task_name=chars or --task_name=cluener" % (
                        data_dir, "both formats' files" if found else "no NER files",
                        ", ".join("%s.txt" % s for s in splits),
                        ", ".join("%s.json" % s for s in splits)))
  return found[0]


def parse_tag(tag):
  """(prefix, type): ('O', None) for O, ('B', 'PER') for B-PER; None when not a BIO/BIOES tag."""
  if tag == OUTSIDE:
    return OUTSIDE, None
  match = _TAG.match(tag)
  return (match.group(1), match.group(2)) if match else None


def scheme_of(tags):
  """BIOES when a tag has the E- or S- prefix, else BIO."""
  return BIOES if any(t[:2] in ("E-", "S-") for t in tags) else BIO


def tag_order(tag):
  """Sort key of the tag list: O first, then by type, then B, I, E, S."""
  prefix, kind = parse_tag(tag) or (tag, "")
  return (kind is not None, kind or "", PREFIXES.find(prefix))


def tags_for_types(types, scheme=BIO):
  """The sorted tag list of entity types: O, B-t, I-t (E-t, S-t for BIOES) for each type."""
  prefixes = "BI" if scheme == BIO else PREFIXES
  return sorted({OUTSIDE} | {"%s-%s" % (p, t) for t in types for p in prefixes}, key=tag_order)


def labels_from(sentences, data_format):
  """The training set's sorted tag list (cluener: every tag of its types, BIO)."""
  tags = {tag for s in sentences for tag in s.tags or ()}
  if data_format == CLUENER:
    return tags_for_types({parse_tag(t)[1] for t in tags if t != OUTSIDE})
  return sorted(tags | {OUTSIDE}, key=tag_order)


def choose_labels(flag_labels, train_labels, saved_labels, where):
  """The tag list (label_lists.choose_labels' rules), every entry a valid tag. Raises DataError."""
  if not flag_labels and train_labels == [OUTSIDE]:
    raise DataError("the training set has no entity: every tag is %r (check the tag column, or "
                    "pass --labels)" % OUTSIDE)
  labels = label_lists.choose_labels(flag_labels, train_labels, saved_labels, where)
  bad = [label for label in labels if parse_tag(label) is None]
  if bad:
    raise DataError("--labels: %s not a tag (O, B-X, I-X, E-X or S-X)" % ", ".join(bad))
  if OUTSIDE not in labels:
    raise DataError("the tag list %s has no %r tag: add it (--labels=O,...)" % (labels, OUTSIDE))
  return labels


def read_split(data_dir, split, data_format, labels=None):
  """Reads one split (data_format: CHARS or CLUENER). labels: the tag list every tag must belong
  to (None: any valid tag). Returns Split; raises DataError (module docstring)."""
  path = split_path(data_dir, split, data_format)
  if not os.path.isfile(path):
    raise DataError("%s: no such file (--data_dir must hold %s for --task_name=%s)" % (
        path, ", ".join("%s.%s" % (s, EXTENSIONS[data_format]) for s in label_lists.SPLITS),
        data_format))
  label_set = set(labels) if labels is not None else None
  with open(path, encoding="utf-8-sig") as f:  # a byte order mark is not part of the first unit
    try:
      text_lines = [line.rstrip("\r\n") for line in f]
    except UnicodeDecodeError as e:
      raise DataError("%s: not UTF-8 (%s); convert it, e.g. iconv -f GBK -t UTF-8" % (path, e))
  if data_format == CHARS:
    sentences, lines = _char_sentences(path, split, text_lines, label_set), text_lines
  else:
    sentences, lines = _cluener_sentences(path, split, text_lines, label_set)
  if not sentences:
    raise DataError("%s: no sentence (an empty file?)" % path)
  scheme = scheme_of(tag for s in sentences for tag in s.tags or ())
  return Split(split, path, data_format, sentences, lines, scheme)


def _check_tag(where, tag, label_set):
  if parse_tag(tag) is None:
    raise DataError("%s: %r is not a BIO/BIOES tag (O, B-X, I-X, E-X, S-X); fix the tag" % (
        where, tag))
  if label_set is not None and tag not in label_set:
    raise DataError("%s: tag %r is not in the tag list (from --labels or the training set: %s); "
                    "fix the line or add the tag" % (where, tag, ",".join(sorted(
                        label_set, key=tag_order))))


def _char_sentences(path, split, text_lines, label_set):
  sentences, units, tags, first, tagged = [], [], [], None, None
  for number, line in enumerate(text_lines + [""], 1):
    columns = line.split()
    if not columns:
      if units:
        sentences.append(Sentence(units, tags if tagged else None, first, None))
      units, tags, first = [], [], None
      continue
    where = "%s:%d" % (path, number)
    allowed = (1, 2) if split == "test" else (2,)
    if len(columns) not in allowed:
      raise DataError("%s: %d column(s), expected `char TAG` (%s): one character and its tag, "
                      "separated by a tab or spaces%s" % (
                          where, len(columns), line.strip()[:40],
                          "; test lines may omit the tag" if split == "test" else ""))
    if tagged is None:
      tagged = len(columns) == 2
    elif tagged != (len(columns) == 2):
      raise DataError("%s: %s, the file's first line %s: every line needs the same columns" % (
          where, "a tag" if len(columns) == 2 else "no tag",
          "has one" if tagged else "has none"))
    first = first or number
    units.append(columns[0])
    if tagged:
      _check_tag(where, columns[1], label_set)
      tags.append(columns[1])
  return sentences


def cluener_units(text, boundaries=()):
  """(units, offsets) of a CLUENER text: ASCII letter/digit runs cut at `boundaries` (character
  offsets where an entity starts or ends), every other character alone."""
  cuts = set(boundaries)
  units, offsets, position = [], [], 0
  for match in _ASCII_RUN.finditer(text):
    for i in range(position, match.start()):
      units.append(text[i])
      offsets.append(i)
    start = match.start()
    for i in range(match.start() + 1, match.end() + 1):
      if i == match.end() or i in cuts:
        units.append(text[start:i])
        offsets.append(start)
        start = i
    position = match.end()
  for i in range(position, len(text)):
    units.append(text[i])
    offsets.append(i)
  return units, offsets


def _cluener_spans(where, text, label):
  """[(start, end exclusive, type)] of a CLUENER "label" object, checked against the text."""
  if not isinstance(label, dict):
    raise DataError("%s: \"label\" must be an object {type: {mention: [[start, end], ...]}}, "
                    "got %s" % (where, type(label).__name__))
  spans = []
  for kind, mentions in label.items():
    if not isinstance(mentions, dict) or not kind.strip() or any(c.isspace() for c in kind):
      raise DataError("%s: label %r must be a type without spaces mapping mentions to spans" % (
          where, kind))
    for mention, positions in mentions.items():
      if not isinstance(positions, list):
        raise DataError("%s: %s %r: spans must be a list of [start, end]" % (where, kind, mention))
      for span in positions:
        if (not isinstance(span, list) or len(span) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in span)):
          raise DataError("%s: %s %r: span %r is not [start, end]" % (where, kind, mention, span))
        start, end = span
        if not 0 <= start <= end < len(text):
          raise DataError("%s: %s %r: span [%d, %d] is outside the text (%d characters; end is "
                          "inclusive)" % (where, kind, mention, start, end, len(text)))
        if text[start:end + 1] != mention:
          raise DataError("%s: %s %r: span [%d, %d] is %r in the text, not the mention (fix the "
                          "offsets: [start, end] inclusive, 0-based characters)" % (
                              where, kind, mention, start, end, text[start:end + 1]))
        spans.append((start, end + 1, kind))
  spans.sort()
  for (s1, e1, k1), (s2, e2, k2) in zip(spans, spans[1:]):
    if s2 < e1:
      raise DataError("%s: %s %r and %s %r overlap: nested or overlapping entities cannot be "
                      "tagged with BIO; keep one" % (where, k1, text[s1:e1], k2, text[s2:e2]))
  return spans


def spans_to_tags(offsets, length, spans):
  """BIO tags of the units starting at `offsets` (a text of `length` characters) for spans
  [(start, end exclusive, type)] whose boundaries are unit boundaries."""
  tags = [OUTSIDE] * len(offsets)
  index = {offset: i for i, offset in enumerate(offsets)}
  ends = offsets[1:] + [length]
  for start, end, kind in spans:
    i = index[start]
    tags[i] = "B-" + kind
    i += 1
    while i < len(offsets) and ends[i] <= end:
      tags[i] = "I-" + kind
      i += 1
  return tags


def _cluener_sentences(path, split, text_lines, label_set):
  sentences, objects = [], []
  for number, line in enumerate(text_lines, 1):
    if not line.strip():
      objects.append(None)
      continue
    where = "%s:%d" % (path, number)
    try:
      row = json.loads(line)
    except ValueError as e:
      raise DataError("%s: not valid JSON (%s): each line must be one JSON object" % (where, e))
    if not isinstance(row, dict) or not isinstance(row.get("text"), str):
      raise DataError("%s: expected a JSON object with a \"text\" string (CLUENER)" % where)
    text = row["text"]
    if not text.strip():
      raise DataError("%s: empty sentence (\"text\" is blank); delete the line" % where)
    label = row.get("label")
    if label is None and split != "test":
      raise DataError("%s: no \"label\" (every %s line needs one; {} for no entity)" % (
          where, split))
    spans = None if label is None else _cluener_spans(where, text, label)
    boundaries = [b for s in spans or () for b in s[:2]]
    units, offsets = cluener_units(text, boundaries)
    tags = None
    if spans is not None:
      tags = spans_to_tags(offsets, len(text), spans)
      for tag in tags:
        _check_tag(where, tag, label_set)
    objects.append(row)
    sentences.append(Sentence(units, tags, number, offsets))
  return sentences, objects


def describe(data):
  """One log line: a split's file, format, scheme, sentence and unit counts."""
  units = sum(len(s.units) for s in data.sentences)
  return "%s: %d sentences, %d units (%s, %s)" % (data.path, len(data.sentences), units,
                                                  data.data_format, data.scheme)


def predicted_label(sentence, text, tags):
  """CLUENER's "label" object {type: {mention: [[start, end inclusive], ...]}} of predicted unit
  tags (decoded by ner_metrics.entities)."""
  label = {}
  ends = sentence.offsets[1:] + [len(text)]
  for kind, first, end in ner_metrics.entities(tags):
    start, stop = sentence.offsets[first], ends[end - 1]
    label.setdefault(kind, {}).setdefault(text[start:stop], []).append([start, stop - 1])
  return label


def read_predictions(path, data_format, labels):
  """The predicted unit tags of each sentence of run_ner's predictions file at `path`
  (prediction_lines' format: chars, the input line + a tab + the predicted tag; cluener, the
  input object with the predicted "label"), each tag checked against labels. Returns
  [[tag, ...], ...]; raises DataError (a file that is not such predictions)."""
  with open(path, encoding="utf-8") as f:
    text_lines = [line.rstrip("\r\n") for line in f]
  if data_format == CHARS:  # the unit and the last column: a `char TAG` file of the predictions
    text_lines = [line.split()[0] + "\t" + line.split()[-1] if line.strip() else line
                  for line in text_lines]
    sentences = _char_sentences(path, "test", text_lines, set(labels))
  else:
    sentences, _ = _cluener_sentences(path, "test", text_lines, set(labels))
  return [sentence.tags for sentence in sentences]


def prediction_lines(data, predicted):
  """The predictions file's lines (without newlines), one an input line: chars: the input line,
  a tab, the predicted tag (blank lines stay blank); cluener: the input object with "label" the
  predicted entities (blank lines stay blank). predicted: per sentence, the unit tags."""
  if len(predicted) != len(data.sentences):
    raise ValueError("%d predicted sentences for %d" % (len(predicted), len(data.sentences)))
  if data.data_format == CHARS:
    tags = {}
    for sentence, sentence_tags in zip(data.sentences, predicted):
      tags.update(zip(range(sentence.line, sentence.line + len(sentence.units)), sentence_tags))
    return [line + "\t" + tags[number] if number in tags else line
            for number, line in enumerate(data.lines, 1)]
  sentences = iter(zip(data.sentences, predicted))
  lines = []
  for row in data.lines:
    if row is None:
      lines.append("")
      continue
    sentence, sentence_tags = next(sentences)
    out = dict(row, label=predicted_label(sentence, row["text"], sentence_tags))
    lines.append(json.dumps(out, ensure_ascii=False))
  return lines
