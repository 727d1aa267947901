# coding=utf-8
"""run_ner's data side: the two formats and their checks, tag alignment to WordPiece ([UNK],
Latin pieces), window split/join, and entity metrics on hand-checked cases."""
import json

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers import tokenizer_vocab  # noqa: E402
from bert_fin import tokenization  # noqa: E402
from bert_fin.finetune.ner import data as ner_data  # noqa: E402
from bert_fin.finetune.ner import features as ner_features  # noqa: E402
from bert_fin.finetune.ner import metrics as ner_metrics  # noqa: E402
from bert_fin.records import schema  # noqa: E402


def _write(directory, name, text):
  directory.mkdir(exist_ok=True)
  (directory / name).write_text(text, encoding="utf-8")
  return str(directory)


@pytest.fixture
def tokenizer(tmp_path):
  return tokenization.make_tokenizer(tokenizer_vocab.write_vocab(tmp_path))


def test_char_lines_bio_and_bioes_tab_or_space_and_sorted_tags(tmp_path):
  data = _write(tmp_path / "d", "train.txt",
                "\ufeff中\tB-LOC\r\n国 E-LOC\n\n\n银\tO\n行  S-ORG\n")
  split = ner_data.read_split(data, "train", ner_data.CHARS)
  assert [s.units for s in split.sentences] == [["中", "国"], ["银", "行"]]
  assert [s.tags for s in split.sentences] == [["B-LOC", "E-LOC"], ["O", "S-ORG"]]
  assert [s.line for s in split.sentences] == [1, 5]
  assert split.scheme == ner_data.BIOES
  assert ner_data.labels_from(split.sentences, ner_data.CHARS) == [
      "O", "B-LOC", "E-LOC", "S-ORG"]
  assert ner_data.tags_for_types(["PER", "LOC"]) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


@pytest.mark.parametrize("split,text,message", [
    ("train", "中\tB-LOC\n国\n", "train.txt:2: 1 column(s), expected `char TAG`"),
    ("train", "中\tB-LOC\textra\n", "train.txt:1: 3 column(s)"),
    ("train", "中\tM-LOC\n", "train.txt:1: 'M-LOC' is not a BIO/BIOES tag"),
    ("dev", "中\tB-PER\n", "dev.txt:1: tag 'B-PER' is not in the tag list"),
    ("test", "中\tO\n国\n", "test.txt:2: no tag, the file's first line has one"),
    ("train", "\n\n", "train.txt: no sentence"),
])
def test_char_lines_bad_input_names_file_and_line(tmp_path, split, text, message):
  data = _write(tmp_path / "d", split + ".txt", text)
  with pytest.raises(ner_data.DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
    ner_data.read_split(data, split, ner_data.CHARS, labels=["O", "B-LOC", "I-LOC"])


def test_cluener_spans_become_bio_units_with_latin_runs_cut_at_boundaries(tmp_path):
  row = {"id": 3, "text": "阿里巴巴ABC与IBMx在杭州",
         "label": {"company": {"阿里巴巴": [[0, 3]], "IBM": [[8, 10]]}, "address": {"杭州": [[13, 14]]}}}
  data = _write(tmp_path / "d", "train.json", json.dumps(row, ensure_ascii=False) + "\n\n")
  split = ner_data.read_split(data, "train", ner_data.CLUENER)
  (sentence,) = split.sentences
  assert sentence.units == ["阿", "里", "巴", "巴", "ABC", "与", "IBM", "x", "在", "杭", "州"]
  assert sentence.offsets == [0, 1, 2, 3, 4, 7, 8, 11, 12, 13, 14]
  assert sentence.tags == ["B-company", "I-company", "I-company", "I-company", "O", "O",
                           "B-company", "O", "O", "B-address", "I-address"]
  assert split.lines == [row, None]  # the blank line is kept for the predictions file
  assert ner_data.labels_from(split.sentences, ner_data.CLUENER) == [
      "O", "B-address", "I-address", "B-company", "I-company"]


@pytest.mark.parametrize("label,message", [
    ({"company": {"阿里": [[0, 2]]}}, r"train.json:1: company '阿里': span \[0, 2\] is '阿里巴'"),
    ({"company": {"阿里": [[5, 9]]}}, "outside the text"),
    ({"company": {"阿里巴巴": [[0, 3]]}, "name": {"巴巴": [[2, 3]]}}, "overlap"),
    ({"company": {"阿里": [0, 1]}}, "is not \\[start, end\\]"),
])
def test_cluener_span_checks(tmp_path, label, message):
  line = json.dumps({"text": "阿里巴巴", "label": label}, ensure_ascii=False)
  data = _write(tmp_path / "d", "train.json", line + "\n")
  with pytest.raises(ner_data.DataError, match=message):
    ner_data.read_split(data, "train", ner_data.CLUENER)


def test_cluener_empty_sentence_and_missing_label_refused(tmp_path):
  data = _write(tmp_path / "d", "dev.json", '{"text": "上涨", "label": {}}\n{"text": " "}\n')
  with pytest.raises(ner_data.DataError, match=r"dev.json:2: empty sentence"):
    ner_data.read_split(data, "dev", ner_data.CLUENER)
  _write(tmp_path / "d", "dev.json", '{"text": "上涨"}\n')
  with pytest.raises(ner_data.DataError, match=r"dev.json:1: no \"label\""):
    ner_data.read_split(data, "dev", ner_data.CLUENER)


def test_auto_format_needs_exactly_one_format(tmp_path):
  data = _write(tmp_path / "d", "train.txt", "中\tO\n")
  assert ner_data.resolve_format(data, "auto", ["train"]) == ner_data.CHARS
  _write(tmp_path / "d", "train.json", "{}\n")
  with pytest.raises(ner_data.DataError, match="both formats"):
    ner_data.resolve_format(data, "auto", ["train"])


def test_alignment_unk_keeps_its_tag_and_latin_word_labels_its_first_piece(tokenizer):
  # 龘 is not in the vocab, " " tokenizes to nothing: both one [UNK] with their tags;
  # "unaffable" -> un ##aff ##able: the tag on "un", weight 0 on the other two.
  sentence = ner_data.Sentence(["龘", "unaffable", " ", "股"], ["B-X", "I-X", "I-X", "O"], 1,
                               None)
  encoded = ner_features.encode([sentence], ["O", "B-X", "I-X"], tokenizer, 16)
  ids = encoded.arrays[schema.INPUT_IDS][0]
  length = encoded.arrays[schema.INPUT_LEN][0]
  assert tokenizer.convert_ids_to_tokens(ids[:length].tolist()) == [
      "[CLS]", "[UNK]", "un", "##aff", "##able", "[UNK]", "股", "[SEP]"]
  assert encoded.arrays[ner_features.LABEL_MASK][0, :length].tolist() == [
      0, 1, 1, 0, 0, 1, 1, 0]
  assert encoded.arrays[ner_features.LABEL_IDS][0, :length].tolist() == [
      0, 1, 2, 0, 0, 2, 0, 0]
  assert encoded.windows[0].positions == [1, 2, 5, 6]


def test_windows_cover_every_unit_overlap_and_join_equals_unsplit(tokenizer):
  rng = np.random.RandomState(0)
  chars = list("沪深股指数市场银行基金证券中国人民币")
  units = [chars[i] for i in rng.randint(len(chars), size=45)]
  units[7] = "unaffable"  # a 3-piece unit across windows
  sentences = [ner_data.Sentence(units, None, 1, None),
               ner_data.Sentence(units[:5], None, 60, None)]
  whole = ner_features.encode(sentences, ["O"], tokenizer, 64)
  split = ner_features.encode(sentences, ["O"], tokenizer, 12)  # 10 pieces a window
  assert len(whole.windows) == 2 and len(split.windows) > 5
  for row, window in enumerate(split.windows):
    assert split.arrays[schema.INPUT_LEN][row] <= 12
  first, second = split.windows[0], split.windows[1]
  assert second.first_unit < first.first_unit + len(first.positions)  # they overlap

  def per_piece(encoded):  # a prediction that depends on the piece only: equal if joined right
    return encoded.arrays[schema.INPUT_IDS] * 7 + 1

  assert ner_features.join(split, per_piece(split)) == ner_features.join(whole, per_piece(whole))
  ids = tokenizer.convert_tokens_to_ids([tokenizer.tokenize(u)[0] for u in units])
  assert ner_features.join(split, per_piece(split))[0] == [i * 7 + 1 for i in ids]


def test_window_plan_reads_each_unit_where_it_has_most_context():
  windows = ner_features.plan_windows([1] * 10, 4)
  assert windows == [(0, 4), (2, 6), (4, 8), (6, 10)]
  assert ner_features.choose_windows(windows, [1] * 10) == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
  assert ner_features.plan_windows([1, 9, 1], 4) == [(0, 1), (1, 2), (2, 3)]  # 9 -> 4


def test_entity_metrics_hand_checked_boundaries_and_types():
  gold = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG"],
          ["O", "B-PER", "I-PER", "I-PER"]]
  predicted = [["B-PER", "I-PER", "O", "B-LOC", "O", "O", "B-PER"],  # LOC right boundary wrong,
               ["O", "B-PER", "I-PER", "I-PER"]]                    # ORG predicted as PER
  report = ner_metrics.entity_report(gold, predicted, ["LOC", "ORG", "PER"])
  # PER: predicted 3, correct 2, gold 2; LOC: 1 predicted 0 correct 1 gold; ORG: 0/0/1.
  assert report["eval_precision_PER"] == pytest.approx(2 / 3)
  assert report["eval_recall_PER"] == 1.0
  assert report["eval_f1_PER"] == pytest.approx(0.8)
  assert report["eval_f1_LOC"] == 0.0 and report["eval_support_LOC"] == 1
  assert report["eval_precision_ORG"] == 0.0 and report["eval_support_ORG"] == 1
  assert report["eval_micro_precision"] == pytest.approx(2 / 4)
  assert report["eval_micro_recall"] == pytest.approx(2 / 4)
  assert report["eval_micro_f1"] == pytest.approx(0.5)
  assert report["eval_macro_f1"] == pytest.approx(0.8 / 3)
  assert report["eval_token_accuracy"] == pytest.approx(9 / 11)
  assert "micro" in ner_metrics.table(report, ["LOC", "ORG", "PER"])


def test_invalid_sequences_decode_as_conlleval():
  assert ner_metrics.entities(["O", "I-X", "I-X", "O"]) == [("X", 1, 3)]
  assert ner_metrics.entities(["B-X", "I-Y", "I-Y"]) == [("X", 0, 1), ("Y", 1, 3)]
  assert ner_metrics.entities(["B-X", "B-X", "I-X"]) == [("X", 0, 1), ("X", 1, 3)]
  assert ner_metrics.entities(["B-X", "I-X", "E-X", "I-X", "S-Y", "E-Y"]) == [
      ("X", 0, 3), ("X", 3, 4), ("Y", 4, 5), ("Y", 5, 6)]
  # the same entities in BIO and BIOES score alike
  bioes = ner_metrics.entity_report([["B-X", "E-X", "S-Y"]], [["B-X", "E-X", "O"]])
  bio = ner_metrics.entity_report([["B-X", "I-X", "B-Y"]], [["B-X", "I-X", "O"]])
  assert bioes["eval_micro_f1"] == bio["eval_micro_f1"] == pytest.approx(2 / 3)


def test_round_trips_gold_tags_give_back_the_input(tmp_path):
  rows = [{"id": 0, "text": "IBM与阿里巴巴在杭州，阿里巴巴涨5%",
           "label": {"company": {"IBM": [[0, 2]], "阿里巴巴": [[4, 7], [12, 15]]},
                     "address": {"杭州": [[9, 10]]}}},
          {"id": 1, "text": "无实体", "label": {}}]
  text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows[:1]) + "\n\n" + json.dumps(
      rows[1], ensure_ascii=False) + "\n"
  data = _write(tmp_path / "c", "test.json", text)
  split = ner_data.read_split(data, "test", ner_data.CLUENER)
  lines = ner_data.prediction_lines(split, [s.tags for s in split.sentences])
  assert [json.loads(line) if line else None for line in lines] == [rows[0], None, rows[1]]
  chars = "中\tB-LOC\n国\tI-LOC\n\nipo O\n \n涨\tO\n"
  data = _write(tmp_path / "t", "test.txt", chars)
  split = ner_data.read_split(data, "test", ner_data.CHARS)
  lines = ner_data.prediction_lines(split, [s.tags for s in split.sentences])
  assert lines == ["中\tB-LOC\tB-LOC", "国\tI-LOC\tI-LOC", "", "ipo O\tO", " ", "涨\tO\tO"]


def test_a_training_set_without_entities_is_refused():
  with pytest.raises(ner_data.DataError, match="no entity"):
    ner_data.choose_labels(None, ["O"], None, "--output_dir x")
