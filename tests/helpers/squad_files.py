# coding=utf-8
"""SQuAD-schema files the run_squad tests read: a handmade English SQuAD v1.1 / v2.0 file with its
small vocab (the golden cases of test_squad_features.py), and a CMRC 2018-like Chinese file
(unspaced contexts, full-width punctuation, Latin and digits inside Chinese, answers repeated in
their context) with a vocab built from it."""
import json
import random

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ENGLISH_VOCAB = SPECIAL + [
    "(", ")", "-", ".", "?", "'", ",", "the", "man", "went", "to", "store", "and", "bought", "a",
    "gallon", "of", "milk", "what", "did", "he", "buy", "when", "was", "john", "smith", "born",
    "leader", "1895", "1943", "japan", "japanese", "electronics", "industry", "is", "largest",
    "in", "world", "steve", "s", "pay", "5", "dollars", "now", "##s", "who", "sold"]

STRIDE_CONTEXT = "the man went to the store and bought a gallon of milk"
SMITH_CONTEXT = "The leader was John Smith (1895-1943)."
JAPAN_CONTEXT = "The Japanese electronics industry is the largest in the world."
NBSP_CONTEXT = "pay 5\u00a0dollars now"


def squad_json(paragraphs, version="1.1"):
  """A SQuAD-schema dict of [(context, [(id, question, answer text or None (impossible), nth
  occurrence)])]; answer_start is found in the context."""
  out = []
  for context, questions in paragraphs:
    qas = []
    for qas_id, question, answer, nth in questions:
      qa = {"id": qas_id, "question": question, "answers": []}
      if answer is None:
        qa["is_impossible"] = True
      else:
        start = -1
        for _ in range(nth + 1):
          start = context.index(answer, start + 1)
        qa["answers"] = [{"text": answer, "answer_start": start}]
      qas.append(qa)
    out.append({"context": context, "qas": qas})
  return {"version": version, "data": [{"title": "t", "paragraphs": out}]}


ENGLISH_PARAGRAPHS = [
    (STRIDE_CONTEXT, [("stride", "What did he buy?", "bought a gallon", 0)]),
    (SMITH_CONTEXT, [("smith", "When was John Smith born?", "1895", 0)]),
    (JAPAN_CONTEXT, [("japan", "What country is the top exporter of electronics?", "Japan", 0)]),
    (NBSP_CONTEXT, [("nbsp", "What did he pay?", "5\u00a0dollars", 0)]),
]
ENGLISH_V2_PARAGRAPHS = [
    (STRIDE_CONTEXT, [("stride", "What did he buy?", "bought a gallon", 0),
                      ("impossible", "Who sold the milk?", None, 0)]),
]


def write_json(path, value):
  path.write_text(json.dumps(value, ensure_ascii=False, indent=1), encoding="utf-8")
  return str(path)


def write_vocab(path, tokens):
  path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  return str(path)


# -- Chinese (CMRC 2018 / DRCD style) -------------------------------------------------------------

COMPANIES = ["贵州茅台", "宁德时代", "中国平安", "招商银行", "比亚迪", "隆基绿能", "东方财富"]
LATIN = ["ETF", "A股", "iPhone15", "Q3", "CATL", "H股"]
TEMPLATES = [
    ("{c}（{code}）公告称，公司{year}年前三季度实现营业收入{amount}亿元，同比增长{pct}%。"
     "{c}表示，{latin}业务保持增长。", [("{c}前三季度营业收入是多少？", "{amount}亿元", 0),
                                       ("哪家公司发布了公告？", "{c}", 0),
                                       ("营收同比增长了多少？", "{pct}%", 0)]),
    ("据悉，{c}将于{year}年{month}月{day}日召开股东大会，审议{latin}发行方案；{c}董事会秘书"
     "出席。", [("股东大会在哪天召开？", "{year}年{month}月{day}日", 0),
                ("谁的董事会秘书出席？", "{c}", 1),
                ("审议什么方案？", "{latin}发行方案", 0)]),
]


def cmrc_paragraphs(rng, n):
  """[(context, [(id, question, answer, nth occurrence)])] of n templated financial paragraphs
  (answers: companies, amounts, dates, percentages; some the second occurrence of their text)."""
  out = []
  for i in range(n):
    context_t, questions = rng.choice(TEMPLATES)
    values = dict(c=rng.choice(COMPANIES), code="%06d" % rng.randint(1, 999999),
                  year=rng.randint(2015, 2025), amount="%d.%02d" % (rng.randint(1, 999),
                                                                    rng.randint(0, 99)),
                  pct="%.1f" % rng.uniform(0.1, 60), latin=rng.choice(LATIN),
                  month=rng.randint(1, 12), day=rng.randint(1, 28))
    context = context_t.format(**values)
    out.append((context, [("p%d-q%d" % (i, k), q.format(**values), a.format(**values), nth)
                          for k, (q, a, nth) in enumerate(questions)]))
  return out


def cmrc_vocab_tokens(paragraphs):
  """SPECIAL + every character of the texts (lower-cased) + the Latin words of LATIN and digit
  pieces, so the CMRC file tokenizes without [UNK]."""
  chars = set()
  for context, questions in paragraphs:
    chars.update(context.lower())
    for _, question, _, _ in questions:
      chars.update(question.lower())
  pieces = {"etf", "iphone", "##15", "q", "##3", "catl", "a", "h"} | {
      "##" + d for d in "0123456789"}
  return SPECIAL + sorted((chars | pieces) - set(" \t\n"))


def write_cmrc(tmp_path, n=40, seed=5):
  """(train.json path, dev.json path, vocab path, paragraphs) of a CMRC-like task."""
  rng = random.Random(seed)
  train, dev = cmrc_paragraphs(rng, n), cmrc_paragraphs(rng, max(4, n // 4))
  vocab = write_vocab(tmp_path / "vocab.txt", cmrc_vocab_tokens(train + dev))
  return (write_json(tmp_path / "train.json", squad_json(train)),
          write_json(tmp_path / "dev.json", squad_json(dev)), vocab, train)
