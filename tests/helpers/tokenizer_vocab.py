"""Test helper: writes a small BERT vocab laid out like google's Chinese vocab.

[PAD]=0, [unused1..99]=1..99, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, then punctuation,
digits, letters, some CJK (incl. a compatibility and an extension-B ideograph), "##" pieces and
multi-char words. Shared by test_tokenization.py and test_tokenization_fuzz.py.
"""
import string

SPECIAL = (["[PAD]"] + ["[unused%d]" % i for i in range(1, 100)] +
           ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])
CJK_CHARS = list("沪深股指数市场银行基金证券中国人民币元年月日上涨下跌手机无创的了是在有我")
CJK_CHARS += ["\u8c48", "\U00020000", "\U0002b820", "\U0002cea1"]  # U+F900 NFDs to U+8C48.
WORDS = ["300", "iphone", "dna", "un", "##aff", "##able", "bert", "##ing", "##s", "the", "ipo",
         "etf", "cpu", "##phone", "##na", "2019", "##00", "ok", "cafe", "über", "uber", "σας",
         "ας", "##ς", "ς", "σ", "İ", "i̇", "ǅ", "mask", "##ask"]
PUNCT = list(string.punctuation) + list("，。！？、；：“”‘’（）《》【】…—～·")
ALNUM = list(string.ascii_lowercase + string.ascii_uppercase + string.digits)
PIECES = ["##" + c for c in string.ascii_lowercase + string.digits + "".join(CJK_CHARS[:6])]
FULL_WIDTH = [chr(0xFF10 + i) for i in range(10)] + [chr(0xFF41 + i) for i in range(26)]


def vocab_tokens():
  """Returns the token list (index = id); no duplicates."""
  seen, tokens = set(), []
  for token in SPECIAL + PUNCT + ALNUM + CJK_CHARS + FULL_WIDTH + WORDS + PIECES:
    if token not in seen:
      seen.add(token)
      tokens.append(token)
  return tokens


def write_vocab(directory):
  """Writes vocab.txt into `directory` (a pathlib.Path); returns its path as str."""
  path = directory / "vocab.txt"
  path.write_text("\n".join(vocab_tokens()) + "\n", encoding="utf-8")
  return str(path)
