"""Writes small SYNTHETIC folders in the layouts of public benchmarks, for the yardstick's readers
(tools/compare_checkpoints.py --task NAME=DIR,format=cfleb|clue) and their tests:

  samples/benchmarks/cfleb/{finfe,finnl,finre,finnsp,finese}/   train_list.json, eval_list.json
  samples/benchmarks/clue/{tnews,afqmc}/                        train.json, dev.json, test.json

  python samples/make_benchmarks.py [--output_dir samples/benchmarks]

Every row is generated here from templates and invented names (no benchmark row is copied):
the row shapes are the benchmarks' public schemas, the words are made up. Deterministic (fixed
seed); each file written atomically. The companies are invented; nothing here is financial
information.
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin import io_utils  # noqa: E402  pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 47
TRAIN_ROWS, EVAL_ROWS = 48, 24
COMPANIES = ["星澜半导体", "瀚海精密", "云栖能源", "北辰物流", "青禾药业", "远帆科技", "金岚地产",
             "泰和银行", "Nova电子", "ABC资本"]
MOODS = {0: ["业绩大幅下滑", "遭监管处罚", "债务违约风险上升"],
         1: ["召开年度股东大会", "公布季度报告", "调整董事会成员"],
         2: ["净利润同比增长", "中标重大项目", "获得新产品批文"]}
TOPICS = {"公司": "{c}发布公告", "行业": "半导体行业景气回升", "大盘": "沪深300指数收涨",
          "外国": "海外市场波动加剧", "经济": "制造业PMI回升", "政策": "监管出台新规",
          "债券": "国债收益率下行", "外汇": "人民币汇率企稳"}
RELATIONS = {"合作": "{h}与{t}签署战略合作协议", "收购": "{h}宣布收购{t}部分股权",
             "竞争": "{h}和{t}在储能市场正面竞争", "unknown": "{h}和{t}同日发布了公告"}
EVENTS = {"高管变动": "{c}董事长辞职，公司称生产经营正常", "违约失联": "{c}未能按期兑付债券本息",
          "业绩下滑": "{c}前三季度净利润同比下降四成"}


def _finfe(rng, _):
  label = rng.choice(sorted(MOODS))
  return ["%s%s，市场关注后续进展。" % (rng.choice(COMPANIES), rng.choice(MOODS[label])), label]


def _finnl(rng, _):
  topics = rng.sample(sorted(TOPICS), rng.choice((2, 2, 3)))
  text = "；".join(TOPICS[t].format(c=rng.choice(COMPANIES)) for t in topics) + "。"
  return [text, " ".join(topics)]


def _finre(rng, _):
  head, tail = rng.sample(COMPANIES, 2)
  relation = rng.choice(sorted(RELATIONS))
  return [head, tail, relation, RELATIONS[relation].format(h=head, t=tail) + "。"]


def _finnsp(rng, number):
  candidates = rng.sample(COMPANIES, rng.choice((1, 2, 3)))
  negative = rng.random() < 0.5
  keys = candidates[:1] if negative else []
  if negative:
    text = "%s%s，%s" % (keys[0], rng.choice(MOODS[0]), "、".join(candidates[1:]) + "未受影响"
                         if len(candidates) > 1 else "投资者担忧")
  else:
    text = "、".join(candidates) + rng.choice(MOODS[2])
  if number % 11 == 0:  # a candidate the text does not name: counted by the reader
    candidates = candidates + ["鸿鹄证券"]
  return [str(number), "快讯%d" % number, text + "。", ";".join(candidates),
          "1" if negative else "0", ";".join(keys)]


def _finese(rng, number):
  event = rng.choice(sorted(EVENTS))
  company = rng.choice(COMPANIES)
  subject = company if number % 13 else "NaN"  # a NaN subject: a counted skip
  return [str(number), EVENTS[event].format(c=company) + "。", event, subject]


CFLEB = {"finfe": _finfe, "finnl": _finnl, "finre": _finre, "finnsp": _finnsp, "finese": _finese}


def _tnews(rng, _):
  codes = {"100": "news_story", "104": "news_finance", "108": "news_edu"}
  code = rng.choice(sorted(codes))
  heads = {"100": "一个关于%s的故事", "104": "%s发布年报", "108": "%s赞助大学奖学金"}
  return {"label": code, "label_desc": codes[code],
          "sentence": heads[code] % rng.choice(COMPANIES), "keywords": ""}


def _afqmc(rng, number):
  company = rng.choice(COMPANIES)
  same = rng.random() < 0.5
  second = ("%s的股价为什么涨了" if same else "%s在哪里开户") % company
  return {"sentence1": "%s最近股价上涨的原因" % company, "sentence2": second,
          "label": "1" if same else "0"} if number % 17 else {
              "sentence1": company, "sentence2": company, "label": "-"}


CLUE = {"tnews": _tnews, "afqmc": _afqmc}


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with io_utils.atomic_output(path) as f:
    f.write(text)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output_dir", default=os.path.join(HERE, "benchmarks"))
  args = parser.parse_args(argv)
  for task, make in sorted(CFLEB.items()):
    rng = random.Random("%d-%s" % (SEED, task))
    for name, count in (("train_list.json", TRAIN_ROWS), ("eval_list.json", EVAL_ROWS)):
      rows = [make(rng, number) for number in range(1, count + 1)]
      _write(os.path.join(args.output_dir, "cfleb", task, name),
             json.dumps(rows, ensure_ascii=False, indent=1) + "\n")
  for task, make in sorted(CLUE.items()):
    rng = random.Random("%d-%s" % (SEED, task))
    for name, count in (("train.json", TRAIN_ROWS), ("dev.json", EVAL_ROWS),
                        ("test.json", EVAL_ROWS // 2)):
      rows = [make(rng, number) for number in range(1, count + 1)]
      if name == "test.json":  # CLUE's test files carry no labels
        rows = [dict(row, label="", label_desc="") if "label_desc" in row else
                {k: v for k, v in row.items() if k != "label"} for row in rows]
      _write(os.path.join(args.output_dir, "clue", task, name),
             "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
  print("wrote %s" % args.output_dir)


if __name__ == "__main__":
  main()
