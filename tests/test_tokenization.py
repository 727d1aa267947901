# coding=utf-8
"""google FullTokenizer behaviour (faithful path) and the fast twin's known-difference handling."""
import pytest

from bert_fin.tokenization import fast as fast_tokenization
from bert_fin import tokenization

from helpers import tokenizer_vocab


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
  return tokenizer_vocab.write_vocab(tmp_path_factory.mktemp("vocab"))


# Every behaviour test below runs on the faithful tokenizer and on its fast twin.
TOKENIZER_CLASSES = [tokenization.FullTokenizer, fast_tokenization.FastFullTokenizer]


@pytest.fixture(scope="module", params=TOKENIZER_CLASSES, ids=["faithful", "fast"])
def tokenizer_class(request):
  return request.param


@pytest.fixture(scope="module")
def lower(vocab_file, tokenizer_class):
  return tokenizer_class(vocab_file, do_lower_case=True)


@pytest.fixture(scope="module")
def cased(vocab_file, tokenizer_class):
  return tokenizer_class(vocab_file, do_lower_case=False)


def test_load_vocab_uses_google_chinese_positions(vocab_file):
  vocab = tokenization.load_vocab(vocab_file)
  assert list(vocab)[:1] == ["[PAD]"]
  assert vocab["[unused1]"] == 1 and vocab["[unused99]"] == 99
  assert [vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [100, 101, 102, 103]
  assert list(vocab.values()) == list(range(len(vocab)))


def test_load_vocab_strips_lines_and_splits_only_on_newline(tmp_path):
  path = tmp_path / "v.txt"
  path.write_bytes(b" a \r\nb\rc\n\nd\xff")
  vocab = tokenization.load_vocab(str(path))
  # "\r" inside a line is not a line break (GFile semantics); invalid UTF-8 is dropped.
  assert vocab == {"a": 0, "b\rc": 1, "": 2, "d": 3}


def test_duplicate_and_blank_vocab_lines_keep_google_ids(tmp_path, tokenizer_class):
  path = tmp_path / "v.txt"
  path.write_text("[PAD]\n[UNK]\na\n\n##b\na\n  c  \nab\n", encoding="utf-8")
  tokenizer = tokenizer_class(str(path))
  assert tokenizer.vocab == {"[PAD]": 0, "[UNK]": 1, "a": 5, "": 3, "##b": 4, "c": 6, "ab": 7}
  tokens = tokenizer.tokenize("a ab abb c b")
  assert tokens == ["a", "ab", "ab", "##b", "c", "[UNK]"]
  assert tokenizer.convert_tokens_to_ids(tokens) == [5, 7, 7, 4, 6, 1]
  assert tokenizer.convert_ids_to_tokens([5, 3]) == ["a", ""]


def test_wordpiece_greedy_longest_match(lower):
  assert lower.tokenize("unaffable") == ["un", "##aff", "##able"]
  assert lower.tokenize("iphones") == ["iphone", "##s"]


def test_cjk_chars_are_split_one_per_token(lower):
  assert lower.tokenize("沪深300指数") == ["沪", "深", "300", "指", "数"]
  # Extension B (U+20000) and google's U+2B820..U+2CEAF range are CJK too.
  assert lower.tokenize("a\U00020000b\U0002b820c") == ["a", "\U00020000", "b", "\U0002b820", "c"]


def test_compatibility_ideograph_is_split_then_nfd_mapped(lower, cased):
  assert lower.tokenize("x\uf900y") == ["x", "\u8c48", "y"]  # NFD(U+F900) = U+8C48 in the vocab.
  assert cased.tokenize("x\uf900y") == ["x", "[UNK]", "y"]


def test_lower_case_strips_accents_cased_keeps_them(lower, cased):
  assert lower.tokenize("Über Café") == ["uber", "cafe"]
  assert cased.tokenize("über") == ["über"]
  assert cased.tokenize("B bert") == ["B", "bert"]
  assert cased.tokenize("BERT") == ["[UNK]"]  # the vocab has no upper-case "##" pieces.
  assert lower.tokenize("BERT") == ["bert"]


def test_lower_case_uses_python_final_sigma(lower):
  assert lower.tokenize("ΣΑΣ") == ["σας"]
  assert lower.tokenize("Σ") == ["σ"]


def test_control_and_format_chars_are_removed(lower):
  text = "i\x00p\u200bh\ufeffo\u00adn\x7fe\ufffd"
  assert lower.tokenize(text) == ["iphone"]


def test_whitespace_variants_split_words(lower):
  assert lower.tokenize("ok\tok\nok\rok\u3000ok\u00a0ok\u2028ok") == ["ok"] * 7


def test_punctuation_is_split(lower):
  assert lower.tokenize("ok,ok。ok$ok^ok`ok") == ["ok", ",", "ok", "。", "ok", "$", "ok", "^", "ok",
                                                    "`", "ok"]


def test_full_width_forms_are_not_folded(lower):
  # Full-width -> half-width is corpus cleaning, not google tokenization.
  assert lower.tokenize("Ａ") == ["ａ"]  # lower-cased like any letter, still full-width.
  assert lower.tokenize("１") == ["１"] and lower.tokenize("1") == ["1"]
  assert lower.tokenize("Ａ，") == ["ａ", "，"]


def test_long_words_and_unknown_pieces_become_unk(lower):
  assert lower.tokenize("a" * 200) == ["a"] + ["##a"] * 199
  assert lower.tokenize("a" * 201) == ["[UNK]"]
  assert lower.tokenize("ok a☃b ok") == ["ok", "[UNK]", "ok"]


def test_special_tokens_in_text_are_not_kept_whole(lower):
  assert lower.tokenize("[MASK]") == ["[", "mask", "]"]


def test_bytes_input_is_utf8_decoded(lower):
  assert lower.tokenize("手机".encode("utf-8") + b"\xff") == ["手", "机"]


def test_ids_round_trip_and_unknown_token_error(lower):
  tokens = lower.tokenize("沪深300 iPhone")
  ids = lower.convert_tokens_to_ids(tokens)
  assert ids == [lower.vocab[t] for t in tokens]
  assert lower.convert_ids_to_tokens(ids) == tokens
  assert lower.inv_vocab[100] == "[UNK]"
  with pytest.raises(KeyError, match="not in the vocabulary"):
    lower.convert_tokens_to_ids(["no-such-token"])


def test_tokenize_words_and_batch(lower):
  words = ["沪深300", "iPhone手机", "无创DNA", "，", " ", "\u200b", ""]
  expected = [["沪", "深", "300"], ["iphone", "手", "机"], ["无", "创", "dna"], ["，"], [], [], []]
  assert lower.tokenize_words(words) == expected
  assert lower.tokenize_batch(words) == expected


def test_unicode_helpers():
  assert tokenization.convert_to_unicode(b"a\xe6\x89\x8b\xff") == "a手"
  assert tokenization.printable_text("手") == "手"
  with pytest.raises(ValueError, match="Unsupported string type"):
    tokenization.convert_to_unicode(3)


def test_validate_case_matches_checkpoint():
  tokenization.validate_case_matches_checkpoint(True, "/m/chinese_L-12_H-768_A-12/bert_model.ckpt")
  tokenization.validate_case_matches_checkpoint(False, "/m/my_model/bert_model.ckpt")
  tokenization.validate_case_matches_checkpoint(False, None)
  with pytest.raises(ValueError, match="do_lower_case=False"):
    tokenization.validate_case_matches_checkpoint(
        False, "/m/chinese_L-12_H-768_A-12/bert_model.ckpt")
  with pytest.raises(ValueError, match="cased model"):
    tokenization.validate_case_matches_checkpoint(True, "/m/cased_L-12_H-768_A-12/bert_model.ckpt")


def test_make_tokenizer(vocab_file):
  faithful = tokenization.make_tokenizer(vocab_file, True, fast=False)
  assert isinstance(faithful, tokenization.FullTokenizer)
  fast = tokenization.make_tokenizer(vocab_file, False)
  assert isinstance(fast, fast_tokenization.FastFullTokenizer) and not fast.do_lower_case


# Each input below makes a plain HF BertNormalizer/BertPreTokenizer/WordPiece setup disagree with
# google (checked in the test); the fast tokenizer must agree with google on all of them.
KNOWN_DIFFERENCES = {
    "final sigma (HF lower-cases char by char)": "ΣΑΣ",
    "CJK U+2B820..U+2B91F (HF range starts at U+2B920)": "a\U0002b820b",
    "punctuation newer than HF's Unicode tables": "ok\u2e52ok",
    "100 < word length <= 200": "a" * 150,
    "private-use char (HF clean_text deletes it)": "ok\ue000ok",
    "U+166D: So for google, punctuation for HF (fallback)": "ok\u166dok",
    "U+111C9: Mn for google, punctuation for HF (fallback)": "ok\U000111c9ok",
}


def _plain_hf(vocab, do_lower_case):
  import tokenizers  # pylint: disable=import-outside-toplevel
  from tokenizers import models  # pylint: disable=import-outside-toplevel
  from tokenizers import normalizers  # pylint: disable=import-outside-toplevel
  from tokenizers import pre_tokenizers  # pylint: disable=import-outside-toplevel
  hf = tokenizers.Tokenizer(models.WordPiece(vocab=dict(vocab), unk_token="[UNK]"))
  hf.normalizer = normalizers.BertNormalizer(lowercase=do_lower_case)
  hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  return hf


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_fast_tokenizer_fixes_each_known_hf_difference(vocab_file, do_lower_case):
  google = tokenization.FullTokenizer(vocab_file, do_lower_case)
  fast = fast_tokenization.FastFullTokenizer(vocab_file, do_lower_case)
  plain = _plain_hf(google.vocab, do_lower_case)
  plain_differs = 0
  for name, text in KNOWN_DIFFERENCES.items():
    expected = google.tokenize(text)
    assert fast.tokenize(text) == expected, name
    assert fast.tokenize_batch([text]) == [expected], name
    assert fast.tokenize_words([text, text]) == [expected, expected], name
    plain_differs += plain.encode(text, add_special_tokens=False).tokens != expected
  assert plain_differs >= len(KNOWN_DIFFERENCES) - 1  # final sigma only matters when lower-casing.
  assert fast.fallback_count > 0


def test_fast_tokenizer_handles_lone_surrogates_by_fallback(vocab_file):
  fast = fast_tokenization.FastFullTokenizer(vocab_file)
  google = tokenization.FullTokenizer(vocab_file)
  assert fast.tokenize("ok\ud800ok 手") == google.tokenize("ok\ud800ok 手") == ["[UNK]", "手"]


def test_fast_tokenizer_requires_unk(tmp_path):
  path = tmp_path / "v.txt"
  path.write_text("[PAD]\na\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"has no \[UNK\]"):
    fast_tokenization.FastFullTokenizer(str(path))


def test_char_class_tables_match_a_fresh_probe():
  """Re-derives RESPACE/FALLBACK over all 1.1M code points from the installed tokenizers (~4 s)."""
  import tokenizers  # pylint: disable=import-outside-toplevel
  import unicodedata  # pylint: disable=import-outside-toplevel
  if (tokenizers.__version__, unicodedata.unidata_version) != fast_tokenization.TABLES_PROBED_WITH:
    pytest.skip("tables are re-probed at runtime for this tokenizers/Unicode version")
  respace, fallback = fast_tokenization.probe_char_classes()
  assert respace == fast_tokenization.RESPACE_RANGES
  assert set(fallback) == set(fast_tokenization.FALLBACK_RANGES)


def test_stored_unicode_category_ranges_match_this_python():
  """unicode_tables.py (start-up without a 1.1M code point scan) == a fresh computation."""
  import unicodedata  # pylint: disable=import-outside-toplevel
  from bert_fin.tokenization import unicode_tables  # pylint: disable=import-outside-toplevel
  assert unicodedata.unidata_version == unicode_tables.UNIDATA_VERSION  # Python 3.11 pins it
  drop, marks = fast_tokenization.category_ranges()
  assert unicode_tables.DROP_RANGES == drop
  assert unicode_tables.MARK_RANGES == marks
  assert (0xAD, 0xAD) in drop and (0x300, 0x36F) in marks  # soft hyphen; combining accents
