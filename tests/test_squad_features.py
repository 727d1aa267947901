# coding=utf-8
"""run_squad's windows against google's run_squad.py on handmade SQuAD v1.1 / v2.0 files (pure
Python, no TensorFlow). Every expected value below was worked out by hand from google's
algorithm (read_squad_examples, convert_examples_to_features, _improve_answer_span,
_check_is_max_context); each test says which of google's rules it pins. Then the Chinese side: on a
CMRC-like file every training answer decodes back to its text through the character offsets, an
answer whose boundary falls inside a token is counted, and the offset tokenization gives the
tokenizer's own tokens on awkward text."""
import random

import pytest

from helpers import squad_files as sf
from helpers import tokenizer_vocab
from bert_fin import tokenization
from bert_fin.finetune.squad import data
from bert_fin.finetune.squad import features
from bert_fin.finetune.squad import offsets
from bert_fin.records import schema as records

SEQ, STRIDE, QUERY = 13, 3, 6


@pytest.fixture(params=["faithful", "fast"])
def tokenizer(request, tmp_path):
  vocab = sf.write_vocab(tmp_path / "vocab.txt", sf.ENGLISH_VOCAB)
  return tokenization.make_tokenizer(vocab, do_lower_case=True, fast=request.param == "fast")


def _encode(tmp_path, tokenizer, paragraphs, training, version="1.1"):
  path = sf.write_json(tmp_path / "squad.json", sf.squad_json(paragraphs, version))
  squad_file = data.read_file(path, version_2=version == "2.0", training=training)
  return squad_file, features.encode(squad_file, tokenizer, SEQ, STRIDE, QUERY, training)


def _google_view(encoded, tokenizer, row):
  """google's InputFeatures fields of one row: tokens, token_to_orig_map, token_is_max_context,
  segment_ids, input_len (the sum of input_mask), start and end positions."""
  arrays, window = encoded.arrays, encoded.windows[row]
  length = int(arrays[records.INPUT_LEN][row])
  tokens = tokenizer.convert_ids_to_tokens(arrays[records.INPUT_IDS][row][:length].tolist())
  assert not arrays[records.INPUT_IDS][row][length:].any()
  to_word, is_max = features.google_maps(window, encoded.paragraphs[window.context_index])
  positions = None
  if features.START_POSITIONS in arrays:
    positions = (int(arrays[features.START_POSITIONS][row]),
                 int(arrays[features.END_POSITIONS][row]))
  return dict(tokens=" ".join(tokens), to_word=to_word, is_max=is_max,
              segments=arrays[records.SEGMENT_IDS][row].tolist(), length=length,
              positions=positions)


def _rows(encoded, question_index):
  return [i for i, w in enumerate(encoded.windows) if w.question_index == question_index]


def _max_dict(offset, flags):
  return {offset + i: flag == "T" for i, flag in enumerate(flags)}


def test_sliding_windows_max_context_and_an_answer_across_a_stride_boundary(tmp_path, tokenizer):
  """google's doc spans (max_tokens_for_doc = 13 - 5 - 3 = 5, next start += min(length,
  doc_stride=3)): (0,5) (3,5) (6,5) (9,3); _check_is_max_context: min(left, right) + 0.01 *
  length, the example of google's docstring ('bought' belongs to the span 'and bought a gallon
  of'); the answer 'bought a gallon' (tokens 7..9) crosses the boundary of the second window:
  only the third holds it whole (positions 7-6+7=8 .. 10); the others get 0, 0 ([CLS])."""
  squad_file, encoded = _encode(tmp_path, tokenizer, sf.ENGLISH_PARAGRAPHS[:1], training=True)
  rows = [_google_view(encoded, tokenizer, r) for r in _rows(encoded, 0)]
  head = "[CLS] what did he buy ? [SEP] "
  assert [r["tokens"] for r in rows] == [
      head + "the man went to the [SEP]", head + "to the store and bought [SEP]",
      head + "and bought a gallon of [SEP]", head + "gallon of milk [SEP]"]
  assert [r["length"] for r in rows] == [13, 13, 13, 11]
  assert rows[3]["segments"] == [0] * 7 + [1] * 4 + [0] * 2
  assert rows[0]["segments"] == [0] * 7 + [1] * 6
  assert [r["to_word"] for r in rows] == [{7 + i: s + i for i in range(n)}
                                          for s, n in ((0, 5), (3, 5), (6, 5), (9, 3))]
  assert [r["is_max"] for r in rows] == [_max_dict(7, "TTTTF"), _max_dict(7, "FTTTF"),
                                         _max_dict(7, "FTTTF"), _max_dict(7, "FTT")]
  assert [r["positions"] for r in rows] == [(0, 0), (0, 0), (8, 10), (0, 0)]
  assert encoded.alignment[:4] == (1, 1, 0, 0)


def test_improve_answer_span_and_both_windows_holding_the_answer(tmp_path, tokenizer):
  """read_squad_examples maps answer_start to the whitespace word '(1895-1943).'; its tokens
  are ( 1895 - 1943 ) . and _improve_answer_span narrows them to '1895' (token 6). Spans of 4
  tokens (13 - 6 - 3): (0,4) (3,4) (6,4) (9,2); token 6 is in the second and the third window,
  and each gets positions (11 and 8); equal max-context scores keep the earlier span (strict >):
  tokens 3 and 6 belong to the first of their two spans."""
  _, encoded = _encode(tmp_path, tokenizer, sf.ENGLISH_PARAGRAPHS[1:2], training=True)
  rows = [_google_view(encoded, tokenizer, r) for r in _rows(encoded, 0)]
  head = "[CLS] when was john smith born ? [SEP] "
  assert [r["tokens"] for r in rows] == [
      head + "the leader was john [SEP]", head + "john smith ( 1895 [SEP]",
      head + "1895 - 1943 ) [SEP]", head + ") . [SEP]"]
  assert [r["to_word"] for r in rows] == [{8: 0, 9: 1, 10: 2, 11: 3}, {8: 3, 9: 4, 10: 5, 11: 5},
                                          {8: 5, 9: 5, 10: 5, 11: 5}, {8: 5, 9: 5}]
  assert [r["is_max"] for r in rows] == [_max_dict(8, "TTTT"), _max_dict(8, "FTTT"),
                                         _max_dict(8, "FTTT"), _max_dict(8, "FT")]
  assert [r["positions"] for r in rows] == [(0, 0), (11, 11), (8, 8), (0, 0)]
  assert encoded.alignment[:4] == (1, 1, 0, 0)


def test_query_truncated_and_an_answer_inside_a_wordpiece_trains_on_the_word(tmp_path, tokenizer):
  """The question's 9 tokens are cut to --max_query_length 6 (google keeps the first ones,
  [UNK] included). 'Japan' is a character sub-span of 'Japanese', one WordPiece token here:
  _improve_answer_span finds no 'japan' token and keeps the word's token (google's documented
  behaviour); the answer is counted as not on token boundaries."""
  _, encoded = _encode(tmp_path, tokenizer, sf.ENGLISH_PARAGRAPHS[2:3], training=True)
  rows = [_google_view(encoded, tokenizer, r) for r in _rows(encoded, 0)]
  assert rows[0]["tokens"] == "[CLS] what [UNK] is the [UNK] [UNK] [SEP] the japanese electronics industry [SEP]"
  assert [r["positions"] for r in rows] == [(9, 9), (0, 0), (0, 0), (0, 0)]
  alignment = encoded.alignment
  assert alignment[:4] == (1, 0, 1, 0)
  assert alignment.examples == [("japan", "Japan", "Japanese")]


def test_an_answer_google_cannot_find_in_its_words_is_skipped_and_counted(tmp_path, tokenizer):
  """read_squad_examples' 'Could not find answer': the word '5\\xa0dollars' (U+00A0 is no
  whitespace to google's reader) does not contain the answer's whitespace-normalised '5
  dollars', so google drops the question: no window, counted as skipped."""
  squad_file, encoded = _encode(tmp_path, tokenizer, sf.ENGLISH_PARAGRAPHS, training=True)
  assert [w.question_index for w in encoded.windows].count(3) == 0
  assert encoded.alignment[:4] == (4, 2, 1, 1)
  assert ("nbsp", "5\u00a0dollars", None) in encoded.alignment.examples
  # predicting reads every question: the skipped one has its windows
  _, predicted = _encode(tmp_path, tokenizer, sf.ENGLISH_PARAGRAPHS, training=False)
  assert [w.question_index for w in predicted.windows].count(3) == 1
  assert features.START_POSITIONS not in predicted.arrays
  assert len(squad_file.questions) == 4


def test_v2_impossible_questions_train_on_cls_in_every_window(tmp_path, tokenizer):
  """SQuAD v2.0: an is_impossible question gets start = end = 0 in every window (google: 'if
  is_training and example.is_impossible'); the answerable one keeps its v1.1 positions."""
  _, encoded = _encode(tmp_path, tokenizer, sf.ENGLISH_V2_PARAGRAPHS, training=True,
                       version="2.0")
  assert [_google_view(encoded, tokenizer, r)["positions"] for r in _rows(encoded, 0)] == [
      (0, 0), (0, 0), (8, 10), (0, 0)]
  impossible = [_google_view(encoded, tokenizer, r) for r in _rows(encoded, 1)]
  assert [r["positions"] for r in impossible] == [(0, 0)] * 4
  assert impossible[0]["tokens"].startswith("[CLS] who sold the milk ? [SEP] the man")
  assert encoded.alignment[:4] == (1, 1, 0, 0)


def test_doc_spans_and_max_context_winners():
  """google's loop for a short and an exactly fitting context, and the max-context winners."""
  assert features.doc_spans(3, 5, 2) == [(0, 3)]
  assert features.doc_spans(5, 5, 2) == [(0, 5)]
  assert features.doc_spans(6, 5, 2) == [(0, 5), (2, 4)]
  assert features.doc_spans(0, 5, 2) == []
  # token 3: min(3, 1) + 0.05 in the first span beats min(1, 2) + 0.04 in the second
  assert features.max_context_spans([(0, 5), (2, 4)], 6).tolist() == [0, 0, 0, 0, 1, 1]


# -- Chinese: character offsets -----------------------------------------------------------------


def test_every_chinese_training_answer_decodes_back_to_its_text(tmp_path):
  """CMRC-like contexts (no spaces, full-width punctuation, 'A股', 'iPhone15', '12.34亿元',
  answers given as the second occurrence of their text): every answer's gold tokens cover
  exactly its characters, so context[starts[first]:ends[last]] is the answer; the window that
  holds it points at the same tokens."""
  train, _, vocab, _ = sf.write_cmrc(tmp_path, n=60)
  tokenizer = tokenization.make_tokenizer(vocab, do_lower_case=True)
  squad_file = data.read_file(train, training=True)
  encoded = features.encode(squad_file, tokenizer, 64, 16, 16, training=True)
  assert encoded.alignment.answers == len(squad_file.questions) == 180
  assert encoded.alignment.exact == 180  # 100% recovered, none enclosing or skipped
  recovered = 0
  for row, window in enumerate(encoded.windows):
    start = int(encoded.arrays[features.START_POSITIONS][row])
    if start == 0:
      continue
    end = int(encoded.arrays[features.END_POSITIONS][row])
    question = squad_file.questions[window.question_index]
    para = encoded.paragraphs[window.context_index]
    first = window.doc_start + start - window.query_length - 2
    last = window.doc_start + end - window.query_length - 2
    assert offsets.span_text(para.context, para.tokens, first, last) == question.answers[0].text
    assert para.tokens.starts[first] == question.answers[0].start  # the right occurrence
    recovered += 1
  assert recovered >= 180  # every question has a window that holds its answer


def test_an_answer_boundary_inside_a_token_is_counted_with_its_enclosing_tokens(tmp_path):
  """'iPhone' inside 'iPhone15' whose vocab lacks '##15': the word is one [UNK], the answer
  trains on it and is counted as enclosing, and an answer over whitespace only is skipped."""
  vocab = sf.write_vocab(tmp_path / "vocab.txt", sf.SPECIAL + list("公司发布新品，") + ["iphone"])
  tokenizer = tokenization.make_tokenizer(vocab, do_lower_case=True)
  context = "公司发布iPhone15新品，"
  path = sf.write_json(tmp_path / "t.json", sf.squad_json(
      [(context, [("a", "发布什么？", "iPhone", 0), ("b", "公司？", "公司", 0)])]))
  encoded = features.encode(data.read_file(path, training=True), tokenizer, 32, 8, 8, True)
  assert encoded.alignment[:4] == (2, 1, 1, 0)
  assert encoded.alignment.examples == [("a", "iPhone", "iPhone15")]


AWKWARD = ["贵州茅台2023年营收增长18%，净利润达到747亿元。", "ΟΔΟΣ σας İstanbul über café Ǆ",
           "a\u2028b\x00c\u00a0d\u202fe\tf\r\ng", "ＡＢＣ１２３ 沪深300指数ETF基金", "\uf900\U00020000x",
           "un-aff-able!!? ((x)) 'q' “中文”……", "e\u0301\u0301 \ufb01ne"]


@pytest.mark.parametrize("do_lower_case", [True, False])
@pytest.mark.parametrize("fast", [True, False])
def test_offset_tokens_are_the_tokenizers_own_with_their_source_characters(tmp_path,
                                                                          do_lower_case, fast):
  """context_tokens replays BasicTokenizer (control characters dropped, Python and Unicode
  whitespace, CJK one by one, lower-casing with Greek final sigma and dotted I, accent stripping,
  punctuation) and WordPiece: the tokens equal tokenizer.tokenize(text), each span holds the
  characters the token came from."""
  tokenizer = tokenization.make_tokenizer(tokenizer_vocab.write_vocab(tmp_path),
                                         do_lower_case=do_lower_case, fast=fast)
  rng = random.Random(1)
  alphabet = list("abcAB 沪深股.,，。İΣσςé\u0301\u00a0\x00\u2028xyzöß\ufb01")
  texts = AWKWARD + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
                     for _ in range(300)]
  for text in texts:
    tokens = offsets.context_tokens(text, tokenizer)
    assert tokens.tokens == tokenizer.tokenize(text), repr(text)
    assert all(0 <= s < e <= len(text) for s, e in zip(tokens.starts, tokens.ends))
    assert tokens.starts == sorted(tokens.starts) and tokens.ends == sorted(tokens.ends)
  text = "沪深300指数ETF基金"
  tokens = offsets.context_tokens(text, tokenizer)
  pieces = [(token, text[s:e]) for token, s, e in zip(*tokens)]
  if do_lower_case:
    assert pieces == [("沪", "沪"), ("深", "深"), ("300", "300"), ("指", "指"), ("数", "数"),
                      ("etf", "ETF"), ("基", "基"), ("金", "金")]
  else:  # the vocab has no cased ##T: the word is one [UNK] holding all of it
    assert pieces[5] == ("[UNK]", "ETF")
