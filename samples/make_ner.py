"""Rebuilds samples/ner/: a small synthetic financial NER task for run_ner.py (BIO, char per line).

  python samples/make_ner.py [--output_dir samples/ner]

Deterministic (fixed seed): sentences from finance templates (announcements, appointments,
analyst comments, deals) filled with companies (the full and short names of samples/user_dict.txt,
their stock codes as untagged context), invented person names (surname + one or two given-name
characters drawn from fixed lists) and places (a fixed list of Chinese cities and provinces).
Tags: ORG (company), PER (person), LOC (place), BIO; the tags are exact by construction, the
text is synthetic (samples/README.md). One unit a line, `unit<TAB>TAG`, a blank line between
sentences; a unit is one character, except a run of ASCII letters / digits (600519, ETF), which is
one unit, as run_ner's CLUENER reader cuts text. The test split's persons and places include
ones never seen in train (held out), so the task is not pure memorisation.
"""
import argparse
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin import console_log  # noqa: E402  pylint: disable=wrong-import-position
from bert_fin import io_utils  # noqa: E402  pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (("train", 500), ("dev", 150), ("test", 150))
SEED = 26
TEMPLATES = (
    "{PER}出任{ORG}董事长",
    "{ORG}公告称，公司拟在{LOC}投资建设新生产基地",
    "{ORG}（{CODE}）今日股价上涨{NUM}%",
    "{ORG}（{CODE}）午后跌幅扩大至{NUM}%",
    "{PER}表示，{ORG}将继续加大研发投入",
    "据{LOC}证监局消息，{ORG}收到警示函",
    "{ORG}与{ORG}在{LOC}签署战略合作协议",
    "{PER}在{LOC}调研时指出，{ORG}一季度营收增长{NUM}%",
    "分析师{PER}认为{ORG}估值偏低，维持买入评级",
    "{LOC}国资委拟向{ORG}增资{NUM}亿元",
    "{ORG}董事会秘书{PER}因个人原因辞职",
    "{ORG}发行ETF联接基金，由{PER}担任基金经理",
    "{ORG}在{LOC}的IPO申请获受理",
    "北向资金今日净买入{ORG}{NUM}亿元",
    "{PER}、{PER}当选{ORG}独立董事",
    "{ORG}{LOC}分公司负责人{PER}接受采访",
)
SURNAMES = list("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾萧田董潘袁")
GIVEN = list("伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍鹏辉建国志宏晓东海峰")
PLACES = ["上海", "深圳", "北京", "杭州", "合肥", "苏州", "成都", "武汉", "贵州", "广东", "浙江",
          "江苏", "香港", "重庆", "宜宾", "西安", "南京", "天津", "福建", "长沙", "青岛", "厦门"]
HELD_OUT_PLACES = {"厦门", "青岛", "长沙"}  # test only
HELD_OUT_SURNAMES = set("萧田董潘袁")  # test only


def companies(user_dict):
  """[(name, stock code)] of the user dictionary's companies: each `full nt`, `short nz`,
  `code m` triple gives (full, code) and (short, code)."""
  with open(user_dict, encoding="utf-8") as f:
    entries = [line.split() for line in f if len(line.split()) == 3]
  rows = []
  for (full, _, t1), (short, _, t2), (code, _, _) in zip(entries, entries[1:], entries[2:]):
    if t1 == "nt" and t2 == "nz" and re.fullmatch(r"\d{6}", code):
      rows += [(full, code), (short, code)]
  return rows


def person(rng, held_out):
  surnames = [s for s in SURNAMES if held_out or s not in HELD_OUT_SURNAMES]
  return rng.choice(surnames) + "".join(rng.choice(GIVEN) for _ in range(rng.randint(1, 2)))


def sentence(rng, orgs, held_out):
  """[(unit, tag)] of one templated sentence."""
  template = rng.choice(TEMPLATES)
  places = [p for p in PLACES if held_out or p not in HELD_OUT_PLACES]
  code = None
  units = []
  for piece in re.split(r"(\{[A-Z]+\})", template):
    if piece == "{ORG}":
      (text, org_code), kind = rng.choice(orgs), "ORG"
      code = code or org_code
    elif piece == "{PER}":
      text, kind = person(rng, held_out), "PER"
    elif piece == "{LOC}":
      text, kind = rng.choice(places), "LOC"
    elif piece == "{CODE}":
      text, kind = code or "000001", None
    elif piece == "{NUM}":
      text, kind = str(rng.randint(1, 30)), None
    else:
      text, kind = piece, None
    pieces = re.findall(r"[A-Za-z0-9]+|.", text)
    for i, unit in enumerate(pieces):
      units.append((unit, "O" if kind is None else ("B-" if i == 0 else "I-") + kind))
  return units


def write_splits(target, user_dict):
  """Writes target/{train,dev,test}.txt; returns {split: sentences}."""
  rng = random.Random(SEED)
  orgs = companies(user_dict)
  os.makedirs(target, exist_ok=True)
  splits = {}
  for split, size in SIZES:
    sentences = [sentence(rng, orgs, split == "test") for _ in range(size)]
    with io_utils.atomic_output(os.path.join(target, split + ".txt")) as f:
      f.write("\n".join("".join("%s\t%s\n" % unit for unit in s) for s in sentences))
    entities = sum(tag.startswith("B-") for s in sentences for _, tag in s)
    print("%s: %d sentences, %d entities" % (split, len(sentences), entities))
    splits[split] = sentences
  return splits


def sample_main(argv, prog, doc, directory, files, write):
  """The command line of a sample-task script (this one, make_long_docs.py, make_qa.py): --output_dir
  (default samples/<directory>, where `files` go) and --user_dict checked, then
  write(output_dir, user_dict); one line and exit status 2 on a bad path."""
  parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0])
  parser.add_argument("--output_dir", default=os.path.join(HERE, directory),
                      help="where %s go (default: samples/%s)" % (files, directory))
  parser.add_argument("--user_dict", default=os.path.join(HERE, "user_dict.txt"),
                      help="the jieba user dictionary the company names come from")
  console_log.add_argument(parser)
  args = parser.parse_args(argv)
  console_log.configure(args.verbose)
  if not os.path.isfile(args.user_dict):
    print("%s: error: --user_dict %s: no such file" % (prog, args.user_dict), file=sys.stderr)
    return 2
  try:
    io_utils.check_output_dir(args.output_dir, "--output_dir")
  except ValueError as e:
    print("%s: error: %s" % (prog, e), file=sys.stderr)
    return 2
  write(args.output_dir, args.user_dict)
  return 0


def main(argv=None):
  return sample_main(argv, "make_ner", __doc__, "ner", "train/dev/test.txt", write_splits)


if __name__ == "__main__":
  sys.exit(main())
