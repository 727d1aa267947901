# coding=utf-8
"""Rebuilds samples/long_docs/: a synthetic long-document classification task for run_classifier.

  python samples/make_long_docs.py [--output_dir samples/long_docs]

Each example is a made-up company announcement of 300 to ~1500 characters, labelled pos (good
news) or neg (bad news), whose label is decided by ONE sentence placed in its last third: after
the header (stock code, a title that names the kind of event but not its direction) and a long run
of neutral boilerplate (board statements, meeting formalities, disclosure notes), and followed by
more neutral sentences (none, or up to the rest of the last third) and the closing (特此公告, the
board, the date). Three kinds of event, each with a good and a bad outcome: an earnings forecast
(业绩预增 / 业绩预亏), a major shareholder's trade (增持 / 减持; the 增持 sentence also promises not
to 减持) and a major contract (签订 / 终止). Labels are balanced, and no boilerplate sentence
carries a direction, so a model reading the first 126 tokens (run_classifier's default
--long_text=head at max_seq_length 128) sees nothing of the label, and one reading the last 94
(head_tail's tail) sees it only when few sentences follow it.

Deterministic (fixed seed): companies are the full and short names of samples/user_dict.txt;
every figure, name and date is invented (samples/README.md). JSON Lines {"text", "label"}, each
file written atomically.
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin import io_utils  # noqa: E402  pylint: disable=wrong-import-position
import make_ner  # noqa: E402  pylint: disable=wrong-import-position

SIZES = (("train", 300), ("dev", 100), ("test", 100))
SEED = 39
MIN_CHARS, MAX_CHARS = 300, 1500
LABELS = ("neg", "pos")

TITLES = {
    "forecast": "{company}{year}年{period}业绩预告",
    "holding": "{company}关于持股5%以上股东权益变动的提示性公告",
    "contract": "{company}关于重大合同进展的公告",
}
DECISIVE = {  # the one sentence that carries the label
    ("forecast", "pos"): "经公司财务部门初步测算，预计{year}年{period}实现归属于上市公司股东的净利润"
                         "{low}万元至{high}万元，与上年同期相比增加{rate}%左右，业绩预增。",
    ("forecast", "neg"): "经公司财务部门初步测算，预计{year}年{period}归属于上市公司股东的净利润为"
                         "亏损{low}万元至{high}万元，上年同期为盈利，业绩预亏。",
    ("holding", "pos"): "股东{holder}于{date}通过集中竞价交易方式增持公司股份{shares}万股，占公司"
                        "总股本的{ratio}%，并承诺在增持期间及法定期限内不减持所持有的公司股份。",
    ("holding", "neg"): "股东{holder}于{date}通过集中竞价交易方式减持公司股份{shares}万股，占公司"
                        "总股本的{ratio}%，其后续仍有继续减持公司股份的计划。",
    ("contract", "pos"): "公司已与{client}正式签订采购合同，合同金额约{amount}亿元，预计将对公司本年度"
                         "及以后年度的经营业绩产生积极影响。",
    ("contract", "neg"): "因{client}自身经营出现困难，双方经协商一致决定终止原合同，公司预计将对本年度"
                         "经营业绩产生不利影响。",
}
OPENING = ("{company}董事会及全体董事保证本公告内容不存在任何虚假记载、误导性陈述或者重大遗漏，"
           "并对其内容的真实性、准确性和完整性承担个别及连带责任。")
BOILERPLATE = (
    "公司主要从事{business}的研发、生产和销售，产品广泛应用于{field}等领域。",
    "截至本公告披露日，公司总股本为{capital}万股，控股股东为{holder}。",
    "本公告所载数据为公司财务部门初步核算数据，未经会计师事务所审计，具体数据以公司正式披露的定期报告为准。",
    "公司于{date}召开第{term}届董事会第{meeting}次会议，审议通过了相关议案。",
    "会议应出席董事{directors}名，实际出席董事{directors}名，会议的召集和召开程序符合《公司法》和《公司章程》的规定。",
    "本次事项不构成关联交易，也不构成《上市公司重大资产重组管理办法》规定的重大资产重组。",
    "公司将严格按照有关法律法规的规定和要求，及时履行信息披露义务。",
    "公司指定的信息披露媒体为《中国证券报》《上海证券报》和证券交易所网站，有关信息均以在上述指定媒体刊登的公告为准。",
    "公司独立董事对该事项发表了同意的独立意见，监事会亦发表了审核意见。",
    "报告期内，公司持续推进{project}项目建设，各项工作有序开展。",
    "公司已按相关规定向证券交易所报送了内幕信息知情人名单。",
    "公司注册地址位于{place}，统一社会信用代码为{credit}。",
    "如无特别说明，本公告中的金额单位均为人民币元。",
    "上述事项已经公司{year}年第{meeting}次临时股东大会审议通过。",
    "公司于{date}收到证券交易所的问询函，并已按要求在规定期限内进行了回复。",
    "本公告中部分合计数与各明细数直接相加之和在尾数上如有差异，系四舍五入所致。",
    "公司董事会秘书{person}负责本次信息披露事宜，投资者可通过公司投资者关系邮箱进行咨询。",
    "公司近三年未发生重大诉讼、仲裁事项，生产经营情况正常，内外部经营环境未发生重大变化。",
    "本次会议由董事长{person}主持，公司监事及高级管理人员列席了会议。",
    "公司聘请的律师事务所对本次会议出具了法律意见书，认为会议的表决程序和表决结果合法有效。",
    "{company}成立于{founded}年，于{listed}年在证券交易所上市，证券代码为{code}。",
    "公司将继续关注相关事项的后续进展，并按照规定履行相应的审议程序。",
    "公司{year}年度利润分配方案已实施完毕，具体内容详见公司在指定信息披露媒体披露的相关公告。",
    "根据《证券法》《上市公司信息披露管理办法》等有关规定，现将相关情况公告如下。",
    "公司全体董事、监事和高级管理人员均已按规定签署了书面确认意见。",
    "本次事项的审议和表决程序符合有关法律、行政法规、部门规章和《公司章程》的规定。",
)
TRAILING = (  # short neutral sentences, often near the end
    "敬请广大投资者理性投资，注意投资风险。",
    "具体数据以公司正式披露的定期报告为准。",
    "公司将根据事项进展及时履行信息披露义务。",
    "以上事项请投资者知悉。",
)
CLOSING = "特此公告。\n{company}董事会\n{date}"
BUSINESSES = ("新能源电池", "白酒", "医疗器械", "半导体设备", "家用电器", "光伏组件", "证券信息服务")
FIELDS = ("消费电子、汽车", "医疗、养老", "工业自动化、通信", "电力、储能", "零售、餐饮")
PROJECTS = ("智能制造基地", "研发中心", "数字化转型", "海外生产基地", "产能扩建")
PLACES = ("上海市浦东新区", "深圳市南山区", "贵州省仁怀市", "福建省宁德市", "四川省宜宾市",
          "广东省佛山市", "浙江省杭州市")
HOLDERS = ("某控股集团有限公司", "某投资管理合伙企业（有限合伙）", "某资产管理有限公司",
           "某产业投资基金")
CLIENTS = ("某新能源汽车有限公司", "某电网有限公司", "某医疗集团", "某电子科技有限公司")
SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗"
GIVEN = "伟芳敏静丽强磊军洋杰涛明超平刚华玉萍鹏辉"
PERIODS = ("第一季度", "半年度", "前三季度", "年度")


def _date(rng, year):
  return "%d年%d月%d日" % (year, rng.randint(1, 12), rng.randint(1, 28))


def _fill(template, rng, company, code, year):
  """template with every {field} it names drawn from the fixed lists."""
  low = rng.randint(5, 90) * 100
  values = {
      "company": company, "code": code, "year": year, "period": rng.choice(PERIODS),
      "date": _date(rng, year), "business": rng.choice(BUSINESSES), "field": rng.choice(FIELDS),
      "project": rng.choice(PROJECTS), "place": rng.choice(PLACES),
      "holder": rng.choice(HOLDERS), "client": rng.choice(CLIENTS),
      "person": rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(2)),
      "capital": rng.randint(10, 900) * 1000, "term": rng.randint(2, 9),
      "meeting": rng.randint(1, 20), "directors": rng.randint(7, 11),
      "credit": "91%06d%010d" % (rng.randint(0, 999999), rng.randint(0, 10 ** 10 - 1)),
      "founded": rng.randint(1985, 2012), "listed": rng.randint(2001, 2020),
      "low": low, "high": low + rng.randint(5, 40) * 100, "rate": rng.randint(30, 260),
      "shares": rng.randint(50, 3000), "ratio": "%.2f" % rng.uniform(0.1, 2.0),
      "amount": "%.1f" % rng.uniform(1.0, 30.0),
  }
  return template.format(**values)


def document(rng, label, company, code):
  """(text, event) of one announcement whose `label` only its decisive sentence tells."""
  year = rng.choice((2025, 2026))
  event = rng.choice(sorted(TITLES))
  fill = lambda template: _fill(template, rng, company, code, year)  # noqa: E731
  header = "证券代码：%s　证券简称：%s　公告编号：%d-%03d\n%s\n" % (
      code, company[:4], year, rng.randint(1, 120), fill(TITLES[event]))
  decisive = fill(DECISIVE[event, label])
  closing = "\n" + fill(CLOSING)
  length = int(MIN_CHARS + (MAX_CHARS - MIN_CHARS) * rng.random() ** 2)
  pool = list(BOILERPLATE + TRAILING)
  rng.shuffle(pool)
  # after the decisive sentence: neutral sentences, up to a random share of the last third
  budget = rng.randint(0, max(0, length // 3 - len(decisive) - len(closing)))
  trailing, unused = "", []
  for template in pool:
    sentence = fill(template)
    if len(trailing + sentence) <= budget:
      trailing += sentence
    else:
      unused.append(template)
  body, pool = fill(OPENING), unused
  while len(header + body + decisive + trailing + closing) < length:
    if not pool:
      pool = list(BOILERPLATE)
      rng.shuffle(pool)
    body += fill(pool.pop())
  return header + body + decisive + trailing + closing, event


def write_splits(target, user_dict):
  """Writes target/{train,dev,test}.jsonl; returns {split: [row dict]}."""
  rng = random.Random(SEED)
  orgs = make_ner.companies(user_dict)
  os.makedirs(target, exist_ok=True)
  splits = {}
  for split, size in SIZES:
    labels = [LABELS[i % 2] for i in range(size)]
    rng.shuffle(labels)
    rows = []
    for label in labels:
      company, code = rng.choice(orgs)
      text, _ = document(rng, label, company, code)
      rows.append({"text": text, "label": label})
    with io_utils.atomic_output(os.path.join(target, split + ".jsonl")) as f:
      f.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    lengths = sorted(len(row["text"]) for row in rows)
    print("%s: %d documents, %d to %d characters (median %d)" % (
        split, len(rows), lengths[0], lengths[-1], lengths[len(lengths) // 2]))
    splits[split] = rows
  return splits


def main(argv=None):
  return make_ner.sample_main(argv, "make_long_docs", __doc__, "long_docs",
                              "train/dev/test.jsonl", write_splits)


if __name__ == "__main__":
  sys.exit(main())
