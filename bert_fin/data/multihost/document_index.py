"""Where each document of create_pretraining_data's input stream is, so that several processes
can each read their own range of it (data/multihost/create_ranks.py).

data/create/sentence_documents.iter_documents numbers the documents of all input files as one stream;
document d of that stream is what every process must see as document d. The files are scanned one
by one (in parallel: scan_file depends on the file only), then stream_plan() joins the scans in
input order into the stream's numbering, and iter_range() reads documents [begin, end) starting at
the right file.

JSON Lines files hold independent documents (a non-blank line each). google's text format is one
stream of lines across consecutive text files: a file whose last line is not blank leaves its last
document open, and when the next text file starts with a non-blank line, that line continues the
same document (google's behaviour, kept by data/create/sentence_documents.py). The plan counts that document once, in
the file where it starts. One case cannot be started mid-stream: a binary file inside an open
document (sentence_documents.py yields it before the open document ends); the plan then has no starts and
iter_range reads the stream from its beginning (exact, slower).
"""
import bisect
import collections
import itertools

from bert_fin.data.create import sentence_documents
from bert_fin.text import corpus_format
from bert_fin.text import raw_documents as text_documents

FileScan = collections.namedtuple("FileScan", [
    "documents", "text", "empty", "head_content", "tail_open", "binary"])
FileScan.__doc__ = """One input file on its own: documents = how many iter_documents yields for it
alone; for google's text format (text=True): empty = no lines at all, head_content = its first line
is not blank (it continues an open document), tail_open = its last line is not blank (its last
document continues into the next text file), binary = a binary file (one skipped document)."""

StreamPlan = collections.namedtuple("StreamPlan", ["paths", "input_format", "starts", "total"])
StreamPlan.__doc__ = """starts[i] = (stream index of the first document that begins in file i,
how many of file i's own scanned documents come before it: 1 when its head continues the previous
file's open document, else 0), or starts None when the stream cannot be entered mid-way (a binary
file inside an open document); total = documents in the stream."""


def _byte_lines(path):
  with open(path, "rb") as raw:
    stream = corpus_format.decompressed(raw, path)
    yield from stream


def _scan_text(path):
  """FileScan of a google-format text file, by sentence_documents.py's rule: a blank line (after strip)
  ends the open document; an undecodable line is content."""
  count, is_open, head = 0, False, None
  for raw in _byte_lines(path):
    try:
      blank = not raw.decode("utf-8").strip()
    except UnicodeDecodeError:
      blank = False
    if head is None:
      head = not blank
    if blank:
      count += is_open
      is_open = False
    else:
      is_open = True
  return FileScan(count + is_open, True, head is None, bool(head), is_open, False)


def scan_file(path, input_format="auto"):
  """FileScan of one input file."""
  if corpus_format.format_of(path, input_format) == corpus_format.JSONL:
    count = sum(1 for _ in sentence_documents.iter_documents([path], "jsonl"))
    return FileScan(count, False, False, False, False, False)
  if not corpus_format.is_gzip(path) and text_documents.is_binary_file(path):
    return FileScan(1, True, False, False, False, True)
  return _scan_text(path)


def stream_plan(paths, input_format, scans):
  """StreamPlan of the files' scans (in input order); its starts are None when a binary text file
  falls inside an open document (see the module docstring)."""
  starts, total, is_open, seekable = [], 0, False, True
  for scan in scans:
    if not scan.text or scan.binary or scan.empty:
      seekable = seekable and not (scan.binary and is_open)
      is_open = is_open and scan.text  # a JSON Lines file ends the text run before it
      starts.append((total, 0))
      total += scan.documents
      continue
    continues = int(is_open and scan.head_content)
    starts.append((total, continues))
    total += scan.documents - continues
    is_open = scan.tail_open
  return StreamPlan(list(paths), input_format, starts if seekable else None, total)


def _locate(plan, index):
  """(file index, local index in that file's own scan) of stream document `index`: the last file
  whose first document is <= index (files beginning no document share the next one's first, so
  the last such file is the one the document begins in)."""
  file_index = bisect.bisect_right([first for first, _ in plan.starts], index) - 1
  first, skipped = plan.starts[file_index]
  return file_index, index - first + skipped


def iter_range(plan, begin, end):
  """Stream documents [begin, end) (sentence_documents.SentenceDocument), read from the file where `begin`
  starts (plan.starts None: read from the stream's beginning, skipping up to begin)."""
  if plan.starts is None:
    stream = sentence_documents.iter_documents(plan.paths, plan.input_format)
    return itertools.islice(stream, begin, end)
  if begin >= end:
    return iter(())
  file_index, local = _locate(plan, begin)
  stream = sentence_documents.iter_documents(plan.paths[file_index:], plan.input_format)
  return itertools.islice(stream, local, local + end - begin)
