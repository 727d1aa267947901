"""Rebuilds samples/qa/: a small synthetic Chinese reading-comprehension task for run_squad.py
(CMRC 2018 style: SQuAD's JSON schema, answers by character offset).

  python samples/make_qa.py [--output_dir samples/qa]

Deterministic (fixed seed). Each paragraph is three financial-news sentences drawn from eight
templates (results, buybacks, shareholder meetings, analyst views, appointments, northbound
flows, profit forecasts, partnerships), in random order, each about a different company of
samples/user_dict.txt (short names), with invented figures, dates and person names; two
questions a paragraph ask for one slot of one of its sentences: a company, an amount (12.34亿元),
a date (2024年3月15日), a percentage or a person. Several companies, amounts and dates stand in
every paragraph, so a question is answered by reading the sentence it is about, and the answers
sit anywhere in the paragraph. answer_start is the slot's own offset (exact by construction).
Persons of the test split use surnames never seen in train. The text is synthetic and far more
regular than news (samples/README.md).
"""
import json
import os
import random
import re
import sys

import make_ner  # samples/make_ner.py: the company list and the command line  # noqa: E402
from bert_fin import io_utils  # noqa: E402  pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (("train", 240), ("dev", 50), ("test", 50))  # paragraphs; two questions each
SEED = 39
# (sentence, [(question, the slot it asks for)]); {ORG}/{ORG2} companies, {AMT}/{AMT2} amounts in
# 亿元, {PCT} a percentage, {DATE} a date, {PER} a person, {Y} a year, {N} a number of months.
TEMPLATES = (
    ("{ORG}公告称，{Y}年前三季度公司实现营业收入{AMT}，同比增长{PCT}。",
     [("{ORG}前三季度营业收入是多少？", "AMT"), ("{ORG}营业收入同比增长多少？", "PCT"),
      ("哪家公司前三季度营业收入同比增长{PCT}？", "ORG")]),
    ("{ORG}拟以不超过{AMT}回购公司股份，回购期限为{N}个月。",
     [("哪家公司拟回购股份？", "ORG"), ("{ORG}回购金额上限是多少？", "AMT")]),
    ("{ORG}将于{DATE}召开{Y}年第一次临时股东大会。",
     [("{ORG}何时召开临时股东大会？", "DATE"), ("哪家公司将于{DATE}召开临时股东大会？", "ORG")]),
    ("分析师{PER}认为，{ORG}的估值已回到历史中枢附近。",
     [("哪位分析师认为{ORG}的估值回到历史中枢？", "PER"), ("分析师{PER}评价的是哪家公司？", "ORG")]),
    ("{ORG}董事会同意聘任{PER}为公司总经理，任期自{DATE}起。",
     [("{ORG}聘任谁为总经理？", "PER"), ("{PER}的任期从哪天开始？", "DATE")]),
    ("北向资金{DATE}净买入{ORG}{AMT}。",
     [("北向资金净买入{ORG}多少？", "AMT"), ("北向资金{DATE}净买入了哪家公司？", "ORG")]),
    ("{ORG}预计{Y}年上半年净利润为{AMT}至{AMT2}。",
     [("{ORG}预计上半年净利润最少是多少？", "AMT"), ("{ORG}预计上半年净利润最多是多少？", "AMT2")]),
    ("{ORG}与{ORG2}签署战略合作协议，合作金额约{AMT}。",
     [("{ORG}与哪家公司签署了战略合作协议？", "ORG2"), ("{ORG}与{ORG2}的合作金额约为多少？", "AMT")]),
)
SENTENCES_PER_PARAGRAPH, QUESTIONS_PER_PARAGRAPH = 3, 2
SURNAMES = list("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾")
HELD_OUT_SURNAMES = list("萧田董潘袁")  # test only
GIVEN = list("伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍鹏辉建国志宏晓东海峰")


def companies(user_dict):
  """The short company names of the dictionary (make_ner.companies lists each company's full
  name, then its short name)."""
  return [name for name, _ in make_ner.companies(user_dict)[1::2]]


def _values(rng, names, test):
  """One sentence's slot values."""
  surnames = HELD_OUT_SURNAMES if test else SURNAMES
  low = rng.randint(1, 300) + rng.randint(0, 99) / 100
  year = rng.randint(2018, 2025)
  return {"ORG": names[0], "ORG2": names[1], "Y": str(year),
          "AMT": "%.2f亿元" % low, "AMT2": "%.2f亿元" % (low + rng.randint(1, 50)),
          "PCT": "%.1f%%" % rng.uniform(0.5, 80), "N": str(rng.choice((3, 6, 12))),
          "DATE": "%d年%d月%d日" % (year, rng.randint(1, 12), rng.randint(1, 28)),
          "PER": rng.choice(surnames) + "".join(rng.choice(GIVEN)
                                                for _ in range(rng.randint(1, 2)))}


def _fill(template, values, offset):
  """(text, {slot: its character offset in the paragraph}) of a filled sentence template."""
  text, where = "", {}
  for piece in re.split(r"(\{[A-Z0-9]+\})", template):
    if piece.startswith("{"):
      where.setdefault(piece[1:-1], offset + len(text))
      text += values[piece[1:-1]]
    else:
      text += piece
  return text, where


def paragraph(rng, names, index, test):
  """One SQuAD paragraph: {"context", "qas"}."""
  chosen = rng.sample(range(len(TEMPLATES)), SENTENCES_PER_PARAGRAPH)
  picked = rng.sample(names, SENTENCES_PER_PARAGRAPH + 1)
  context, filled = "", []
  for k, template_index in enumerate(chosen):
    values = _values(rng, [picked[k], picked[-1]], test)
    text, where = _fill(TEMPLATES[template_index][0], values, len(context))
    context += text
    filled.append((template_index, values, where))
  qas = []
  for n, (template_index, values, where) in enumerate(rng.sample(filled,
                                                                 QUESTIONS_PER_PARAGRAPH)):
    question, slot = rng.choice(TEMPLATES[template_index][1])
    answer = values[slot]
    assert context[where[slot]:where[slot] + len(answer)] == answer
    qas.append({"id": "%s-%d" % (index, n), "question": question.format(**values),
                "answers": [{"text": answer, "answer_start": where[slot]}]})
  return {"context": context, "qas": qas}


def write_splits(target, user_dict):
  """Writes target/{train,dev,test}.json; returns {split: SQuAD dict}."""
  rng = random.Random(SEED)
  names = companies(user_dict)
  os.makedirs(target, exist_ok=True)
  splits = {}
  for split, size in SIZES:
    paragraphs = [paragraph(rng, names, "%s%d" % (split, i), split == "test")
                  for i in range(size)]
    squad = {"version": "1.1", "data": [{"title": "samples/qa " + split,
                                         "paragraphs": paragraphs}]}
    with io_utils.atomic_output(os.path.join(target, split + ".json")) as f:
      f.write(json.dumps(squad, ensure_ascii=False, indent=1) + "\n")
    print("%s: %d paragraphs, %d questions" % (split, len(paragraphs),
                                               sum(len(p["qas"]) for p in paragraphs)))
    splits[split] = squad
  return splits


def main(argv=None):
  return make_ner.sample_main(argv, "make_qa", __doc__, "qa", "train/dev/test.json",
                              write_splits)


if __name__ == "__main__":
  sys.exit(main())
