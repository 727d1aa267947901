"""A corpus of any size from a little text: distinct documents that pass the duplicate filters.

  sentences = source_sentences(paths, work_dir)       # cleaned, unique sentences of any text
  make_corpus(sentences, names, out_dir, size_bytes, seed=0)
writes out_dir/part-NNNN.txt in google's blank-line format (one paragraph a line, a blank line
between documents) until size_bytes are written. Each document draws 3-40 sentences from the
whole pool with a seeded random.Random (so two documents share a sentence rarely and a run of
them almost never), replaces runs of digits with other runs of the source and company names of
`names` with other ones, and cuts them into 1-4 paragraphs: lengths vary, documents stay distinct
(exact and near duplicates are rare), and the words and characters stay those of the source (a
vocabulary that does not grow with the size asked for, as a large real corpus's grows slowly).
reprint_share of the documents are followed later by a reprint (a news header and a changed
figure: a near duplicate at Jaccard ~0.9), so the near-duplicate pass has clusters to find.
(Not a bench script itself: the leading underscore keeps it out of tests/test_bench_quick.py.)
"""
import heapq
import json
import os
import random
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from bert_fin.text import clean  # pylint: disable=wrong-import-position

HEADERS = ["新华社北京1月5日电 ", "本报讯（记者 张伟）", "【财联社3月8日讯】", "中国证券网讯 "]
FILE_BYTES = 8 << 20  # one output file at most this big (clean_corpus parallelises by file)
_DIGITS = "0123456789"
_DIGIT_RUN = re.compile(r"\d+")


def source_sentences(paths, work_dir, text_format="line", text_field="content"):
  """The unique sentences of `paths` (any text clean_corpus reads), in first-seen order."""
  out = os.path.join(work_dir, "source.jsonl")
  clean.clean_corpus(paths, out, None, clean.CleanConfig(text_format=text_format,
                                                          text_field=text_field))
  seen = {}
  with open(out, encoding="utf-8") as f:
    for line in f:
      for sentence in json.loads(line)["sentences"]:
        seen.setdefault(sentence, None)
  os.remove(out)
  if not seen:
    raise ValueError("no sentence in %s" % " ".join(paths))
  return list(seen)


def company_names(user_dict):
  """The words of a jieba user dictionary (first field of each line), longest first."""
  if not user_dict or not os.path.exists(user_dict):
    return []
  with open(user_dict, encoding="utf-8") as f:
    names = [line.split()[0] for line in f if line.split()]
  return sorted(set(names), key=lambda name: (-len(name), name))


def _perturb(sentence, rng, names, figures):
  """One company name swapped for another (half the time) and each run of digits for one of the
  source's own (`figures`): documents differ while the vocabulary stays the source's."""
  if names and rng.random() < 0.5:
    for name in names:
      if name in sentence:
        sentence = sentence.replace(name, rng.choice(names))
        break
  if not figures:
    return sentence
  return _DIGIT_RUN.sub(lambda match: rng.choice(figures) if rng.random() < 0.5
                        else match.group(0), sentence)


def figures_of(sentences):
  """The distinct runs of digits of the source, in first-seen order."""
  return list(dict.fromkeys(run for sentence in sentences for run in _DIGIT_RUN.findall(sentence)))


def make_document(sentences, rng, names, figures):
  """One document: paragraphs (lists of perturbed sentences)."""
  picked = [_perturb(rng.choice(sentences), rng, names, figures)
            for _ in range(rng.randint(3, 40))]
  cuts = sorted(rng.sample(range(1, len(picked)), min(len(picked) - 1, rng.randint(0, 3))))
  bounds = [0] + cuts + [len(picked)]
  return ["".join(picked[a:b]) for a, b in zip(bounds, bounds[1:])]


def _reprint(paragraphs, rng):
  """A reprint: another outlet's header and one figure changed."""
  first = rng.choice(HEADERS) + paragraphs[0]
  digits = [i for i, char in enumerate(first) if char.isdigit()]
  if digits:
    at = rng.choice(digits)
    first = first[:at] + rng.choice(_DIGITS) + first[at + 1:]
  return [first] + paragraphs[1:]


def make_corpus(sentences, names, out_dir, size_bytes, seed=0, reprint_share=0.03):
  """Writes about size_bytes of documents to out_dir (module docstring); returns
  (files written, documents, reprints among them)."""
  rng = random.Random(seed)
  figures = figures_of(sentences)
  os.makedirs(out_dir, exist_ok=True)
  num_files = max(4, -(-size_bytes // FILE_BYTES))
  per_file = size_bytes // num_files
  documents = reprints = 0
  pending = []  # heap of (document number it is due at, tie, paragraphs) of reprints to write
  paths = []
  for index in range(num_files):
    path = os.path.join(out_dir, "part-%04d.txt" % index)
    written = 0
    with open(path, "w", encoding="utf-8") as f:
      while written < per_file:
        if pending and pending[0][0] <= documents:
          paragraphs = heapq.heappop(pending)[2]
          reprints += 1
        else:
          paragraphs = make_document(sentences, rng, names, figures)
          if rng.random() < reprint_share:
            heapq.heappush(pending, (documents + rng.randint(1, 2000), documents,
                                     _reprint(paragraphs, rng)))
        text = "\n".join(paragraphs) + "\n\n"
        f.write(text)
        written += len(text.encode("utf-8"))
        documents += 1
    paths.append(path)
  return paths, documents, reprints
