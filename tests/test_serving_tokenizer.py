# coding=utf-8
"""The serving graph's tokenizer and layout equal bert_fin's: the in-graph WordPiece gives
FullTokenizer's ids on a stress set (CJK incl. extension blocks, full-width forms, accents, control
and zero-width characters, mixed CJK / Latin / digits, words over 200 characters, empty strings,
the final sigma of lower-casing)
and on random Unicode text; [CLS] A [SEP] (B [SEP]) with long texts cut equals run_classifier's
features for head, tail and head_tail, single texts and pairs."""
import random

import numpy as np
import pytest
import tensorflow as tf

from helpers import tokenizer_vocab
from helpers import unicode_texts
from bert_fin import tokenization
from bert_fin.finetune.classify import features
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.classify import tasks
from bert_fin.finetune.squad import offsets
from bert_fin.serving import char_table
from bert_fin.serving import graph_tokenizer
from bert_fin.serving import layout

STRESS = [
    "", " ", "\t\n", "沪深股指上涨", "中国人民银行下跌2019年", "\U00020000\U0002b820\U0002cea1豈",
    "\u8c48\uf900", "㐀䶵", "ＡＢＣ１２３ａｂｃ", "ｉｐｈｏｎｅ上涨", "café über Über ÉCOLE naïve",
    "a\u0301b", "\u0301", "x\u200by\u200dz\ufeff",
    "ctrl\x00\x01\x7f\x0b\x0cend", "\ufffd\u2028\u2029",
    "iPhone12上涨300%，DNA测试ok！", "unaffable bert##ing", "[MASK] [CLS] [UNK]",
    "a" * 201, "中" + "x" * 250 + "中", "b" * 200, "ﬁ ǅ İ ß ẞ ŉ", "，。！？【】《》…—～·",
    # the final sigma: "σας" / "ας" / "ς" / "##ς" are in the vocab; across marks, apostrophes,
    # dropped characters, words, CJK, two texts of a batch
    "ΣΑΣ", "ΑΣ", "Σ", "ΣΣ ΑΣΣ", "ΑΣ.", "ΑΣ'", "Α'Σ", "ΑΣ\u0301", "ΑΣ\u200bΑ", "ΑΣΑ",
    "ΣΑΣ中ΑΣ", "Α ΣΑΣ Σ", "σΣ", "1Σ", "ǅΣ", "ΣΑΣ\u0345", "ΑΣ\u0345Α",
    "100元\u3000200元", "\u00a0nbsp\u202fnarrow", "\U0001F600 emoji 😀", "混合mixed混合123abc",
]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
  return tokenizer_vocab.write_vocab(tmp_path_factory.mktemp("vocab"))


def _fuzz_texts():
  """The fuzz corpus without what UTF-8 input cannot hold (lone surrogates)."""
  return [text for text in unicode_texts.random_texts(600)
          if not any(0xD800 <= ord(c) <= 0xDFFF for c in text)]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_graph_tokenizer_gives_full_tokenizers_ids(vocab_file, do_lower_case):
  vocab = tokenization.load_vocab(vocab_file)
  reference = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
  graph = graph_tokenizer.GraphTokenizer(vocab, do_lower_case)
  texts = STRESS + _fuzz_texts()
  token_ids = tf.function(graph.token_ids)  # as the SavedModel runs it: one graph
  got = token_ids(tf.constant([t.encode("utf-8") for t in texts])).to_list()
  mismatches = [(text, want, ids) for text, ids, want in zip(texts, got, (
      reference.convert_tokens_to_ids(reference.tokenize(t)) for t in texts)) if ids != want]
  assert not mismatches, mismatches[:3]
  unk = vocab[tokenization.UNK_TOKEN]
  assert got[STRESS.index("a" * 201)] == [unk] and got[STRESS.index("b" * 200)] != [unk]
  assert got[0] == []
  assert token_ids(tf.constant(["", "\u200b\x01"])).to_list() == [[], []]  # no character at all
  assert token_ids(tf.constant(["a" * 201])).to_list() == [[unk]]  # no word to match


def test_a_batch_with_no_word_to_match_is_tokenized(vocab_file):
  """Batches where WordPiece has nothing to match (empty texts, only dropped characters, only
  words over 200 characters) give no tokens / [UNK], as FullTokenizer."""
  vocab = tokenization.load_vocab(vocab_file)
  graph = graph_tokenizer.GraphTokenizer(vocab, True)
  token_spans = tf.function(graph.token_spans)
  for texts, want in (([""], [[]]), (["", " \u200b "], [[], []]),
                      (["a" * 201], [[vocab[tokenization.UNK_TOKEN]]])):
    ids, starts, ends = token_spans(tf.constant(texts))
    assert ids.to_list() == want
    assert ends.to_list() == [[201] if row else [] for row in want]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_graph_tokenizer_spans_are_run_squads_character_offsets(vocab_file, do_lower_case):
  """token_spans: the characters each token came from, as offsets.context_tokens gives them
  (what the QA signature cuts answers by), on the stress set and the fuzz texts."""
  reference = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
  graph = graph_tokenizer.GraphTokenizer(tokenization.load_vocab(vocab_file), do_lower_case)
  texts = STRESS + _fuzz_texts()
  ids, starts, ends = tf.function(graph.token_spans)(tf.constant([t.encode("utf-8")
                                                                   for t in texts]))
  mismatches = []
  for text, row in zip(texts, zip(ids.to_list(), starts.to_list(), ends.to_list())):
    want = offsets.context_tokens(text, reference)
    if row != (reference.convert_tokens_to_ids(want.tokens), want.starts, want.ends):
      mismatches.append((text, want, row))
  assert not mismatches, mismatches[:2]
  assert any(end - start > 1 for row_s, row_e in zip(starts.to_list(), ends.to_list())
             for start, end in zip(row_s, row_e))  # pieces of several characters


def test_char_table_agrees_with_googles_rules_on_sampled_code_points():
  table = char_table.build(True)
  rng = random.Random(5)
  for cp in [rng.randrange(0x110000) for _ in range(3000)] + [0x3000, 0xF900, 0x2028, 0x200B]:
    if 0xD800 <= cp <= 0xDFFF:
      continue
    char = chr(cp)
    flags = int(table.flags[cp])
    dropped = cp in (0, 0xFFFD) or tokenization.is_control(char)
    assert bool(flags & char_table.DROP) == dropped, hex(cp)
    if not dropped:
      assert bool(flags & char_table.CJK) == tokenization.is_chinese_char(cp), hex(cp)
      assert bool(flags & char_table.PUNCT) == tokenization.is_punctuation(char), hex(cp)
      mapped = "".join(map(chr, table.mapping.get(cp, (cp,)))) if not flags & char_table.SPACE \
          else char
      assert mapped == (char_table.lowered(char) if not flags & char_table.SPACE else char)


@pytest.mark.parametrize("room", [0, 1, 5, 8])
def test_pair_counts_closed_form_is_googles_truncate_seq_pair(room):
  lengths = np.array([(a, b) for a in range(12) for b in range(12)], np.int32)
  kept_a, kept_b = layout.pair_counts(tf.constant(lengths[:, 0]), tf.constant(lengths[:, 1]),
                                      room)
  expected = [long_text.pair_counts(int(a), int(b), room) for a, b in lengths]
  assert list(zip(kept_a.numpy().tolist(), kept_b.numpy().tolist())) == expected


@pytest.mark.parametrize("mode,head_tokens", [("head", None), ("tail", None), ("head_tail", None),
                                              ("head_tail", 3)])
@pytest.mark.parametrize("pairs", [False, True])
def test_layout_equals_run_classifiers_features(vocab_file, mode, head_tokens, pairs):
  tokenizer = tokenization.FullTokenizer(vocab_file)
  rng = random.Random(11)
  words = list("沪深股指数市场银行基金证券中国人民币元年月日上涨下跌") + ["iphone", "2019", "ok"]
  texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 14))) for _ in range(24)]
  examples = [tasks.Example(str(i), texts[i], (texts[-1 - i] or None) if pairs else None, None)
              for i in range(len(texts))]
  options = long_text.Options(mode, head_tokens, None, long_text.MEAN)
  seq = 12
  expected = features.encode(examples, ["x"], tokenizer, seq, options)
  as_ragged = lambda side: tf.ragged.constant(
      [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in side], tf.int64,
      ragged_rank=1, inner_shape=())
  ids_b = as_ragged([e.text_b or "" for e in examples]) if pairs else None
  has_b = tf.constant([bool(e.text_b) for e in examples]) if pairs else None
  assert not pairs or not all(has_b.numpy())  # an empty text_b: read as a single text
  vocab = tokenizer.vocab
  got = layout.lay_out(as_ragged(texts), ids_b, seq, (vocab["[CLS]"], vocab["[SEP]"]), options,
                       has_b)
  np.testing.assert_array_equal(got["input_ids"], expected.arrays["input_ids"])
  np.testing.assert_array_equal(got["segment_ids"], expected.arrays["segment_ids"])
  np.testing.assert_array_equal(got["input_mask"].numpy().sum(axis=1),
                                expected.arrays["input_len"])
  assert int(tf.reduce_sum(tf.cast(got["truncated"], tf.int32))) == expected.truncated > 0


def test_chunks_models_are_refused_in_one_line():
  with pytest.raises(ValueError, match="--long_text=chunks cannot be served"):
    layout.lay_out(tf.ragged.constant([[5]], tf.int64), None, 8, (1, 2),
                   long_text.Options(long_text.CHUNKS, None, None, long_text.MEAN))


def test_the_onnx_clients_restated_rules_equal_long_text():
  from bert_fin.serving import onnx_client  # pylint: disable=import-outside-toplevel
  for a in range(10):
    for b in range(10):
      assert onnx_client.pair_counts(a, b, 7) == long_text.pair_counts(a, b, 7)
  tokens = list(range(40))
  for mode, head_tokens in (("head", None), ("tail", None), ("head_tail", None), ("head_tail", 5)):
    for count in (0, 3, 13, 30, 40):
      record = {"long_text": mode, "head_tokens": head_tokens}
      assert onnx_client.keep(tokens, count, 30, record) == long_text.keep(
          tokens, count, mode, 30, head_tokens), (mode, count)
