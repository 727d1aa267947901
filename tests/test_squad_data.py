# coding=utf-8
"""Reading SQuAD-schema files (pure Python): the questions as written, and every refusal as one
`FILE: question ID: reason` (or `FILE: data[i]...: reason`) DataError, with bounded input."""
import json
import os

import pytest

from helpers import squad_files as sf
from bert_fin.finetune.squad import data


def _write(tmp_path, value, name="f.json"):
  """value (a str, or JSON written as UTF-8; a lone surrogate as JSON's \\u escape) at name."""
  path = tmp_path / name
  text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
  if not isinstance(value, str) and not text.isascii():
    try:
      text.encode("utf-8")
    except UnicodeEncodeError:
      text = json.dumps(value)
  path.write_text(text, encoding="utf-8")
  return str(path)


def _one(qa, context="公司发布新品"):
  return {"data": [{"paragraphs": [{"context": context, "qas": [qa]}]}]}


def test_questions_share_their_paragraph_and_keep_every_answer(tmp_path):
  path = _write(tmp_path, {"data": [{"paragraphs": [
      {"context": "甲公司发布新品", "qas": [
          {"id": 7, "question": "谁？", "answers": [{"text": "甲公司", "answer_start": 0},
                                                 {"text": "甲公司发布"}]},
          {"id": "b", "question": "发布什么？", "answers": []}]},
      {"context": "无问题的段落", "qas": []}]}]})
  squad = data.read_file(path)
  assert squad.contexts == ["甲公司发布新品"]
  assert [(q.qas_id, q.context_index, q.answers) for q in squad.questions] == [
      ("7", 0, (data.Answer("甲公司", 0), data.Answer("甲公司发布", None))), ("b", 0, ())]
  assert not data.is_labelled(squad) and data.unanswered(squad) == 1


def test_a_bom_and_a_v2_file(tmp_path):
  path = tmp_path / "v2.json"
  path.write_bytes(b"\xef\xbb\xbf" + json.dumps(sf.squad_json(sf.ENGLISH_V2_PARAGRAPHS, "2.0"))
                   .encode("utf-8"))
  squad = data.read_file(str(path), version_2=True, training=True)
  assert [q.is_impossible for q in squad.questions] == [False, True]
  assert data.is_labelled(squad)


@pytest.mark.parametrize("value,training,message", [
    ("[1, 2", False, "not valid JSON: Expecting ',' delimiter (line 1 column 6)"),
    ("[" * 100000 + "]" * 100000, False, "JSON nested too deeply"),
    ({"version": "1.1"}, False, "f.json: no 'data'"),
    ({"data": [{"paragraphs": {}}]}, False, "data[0]: 'paragraphs' must be list, got dict"),
    (_one({"question": "谁？"}), False, "data[0].paragraphs[0].qas[0]: no 'id'"),
    (_one({"id": "q", "question": "谁？", "answers": [{"text": "公司", "answer_start": "0"}]}),
     False, "question q: answers[0]: 'answer_start' must be int, got str"),
    (_one({"id": "q", "question": "谁？", "answers": [{"text": "公司", "answer_start": True}]}),
     False, "'answer_start' must be int, got bool"),
    (_one({"id": "q", "question": "谁？", "answers": [{"text": " ", "answer_start": 0}]}),
     False, "question q: answers[0]: empty answer text"),
    (_one({"id": "q", "question": "谁？", "answers": [{"text": "新品", "answer_start": -1}]}),
     False, "answer_start -1 does not point at the answer text '新品'"),
    (_one({"id": "q", "question": "谁？", "answers": [{"text": "旧品", "answer_start": 4}]}),
     False, "the context there reads '新品'; the text is nowhere in the context"),
    (_one({"id": "q", "question": "谁？", "answers": [{"text": "公司"}]}),
     True, "question q: answers[0]: no 'answer_start'"),
    (_one({"id": "q", "question": "谁？", "answers": []}), True,
     "question q: 0 answers: for training, each question should have exactly 1 answer"),
    (_one({"id": "q", "question": "谁？", "answers": [{"text": "公司", "answer_start": 0}] * 2}),
     True, "question q: 2 answers"),
    ({"data": [{"paragraphs": [{"context": "公司", "qas": [
        {"id": "q", "question": "谁？"}, {"id": "q", "question": "何？"}]}]}]}, False,
     "question q: the id is used twice"),
    ({"data": [{"paragraphs": [{"qas": [{"id": "q", "question": "谁？"}]}]}]}, False,
     "question q: the question has no context"),
    ({"data": []}, False, "f.json: no question"),
    (_one({"id": "", "question": "谁？"}), False,
     "data[0].paragraphs[0].qas[0]: the id is empty (predictions.json is keyed by it"),
    (_one({"id": " ", "question": "谁？"}), False, "qas[0]: the id is empty"),
    (_one({"id": "q\udc80", "question": "谁？"}), False,
     "data[0].paragraphs[0].qas[0].id holds a lone surrogate '\\udc80' at character 1"),
    (_one({"id": "q", "question": "谁\ud800？"}), False,
     "question q: data[0].paragraphs[0].qas[0].question holds a lone surrogate"),
    (_one({"id": "q", "question": "谁？", "answers": [{"text": "公\udfff", "answer_start": 0}]},
          context="公\udfff发布"), False,
     "data[0].paragraphs[0].context holds a lone surrogate '\\udfff' at character 1"),
    (_one({"id": "q", "question": "谁？", "answers": [{"text": "公\udfff", "answer_start": 0}]}),
     False, "question q: answers[0]: data[0].paragraphs[0].qas[0].answers[0].text holds a lone "
     "surrogate"),
])
def test_refusals_name_the_file_and_the_question(tmp_path, value, training, message):
  path = _write(tmp_path, value)
  with pytest.raises(data.DataError) as refused:
    data.read_file(path, training=training)
  text = str(refused.value)
  assert text.startswith(path + ": ") and message in text and "\n" not in text


def test_the_corrected_file_reads_where_the_surrogate_or_empty_id_was_refused(tmp_path):
  bad = _write(tmp_path, _one({"id": "", "question": "谁？",
                               "answers": [{"text": "公\udc80", "answer_start": 0}]}))
  with pytest.raises(data.DataError, match="the id is empty"):
    data.read_file(bad)
  good = _write(tmp_path, _one({"id": "q1", "question": "谁？",
                                "answers": [{"text": "公司", "answer_start": 0}]}), "g.json")
  assert [q.qas_id for q in data.read_file(good, training=True).questions] == ["q1"]


def test_a_context_longer_than_the_ceiling_is_refused_before_tokenizing(tmp_path):
  path = _write(tmp_path, _one({"id": "q", "question": "谁？"}, context="公司" * 30))
  with pytest.raises(data.DataError) as refused:
    data.read_file(path, max_context_chars=59)
  assert str(refused.value) == (
      "%s: data[0].paragraphs[0].context has 60 characters, more than --max_context_chars=59 (a "
      "context is tokenized whole and cut into windows: split it into paragraphs, or raise the "
      "flag)" % path)
  assert len(data.read_file(path, max_context_chars=60).contexts[0]) == 60
  assert data.DEFAULT_MAX_CONTEXT_CHARS >= 25 * 3700  # SQuAD's longest context, with room


def test_output_files_are_written_as_a_set(tmp_path):
  from bert_fin import io_utils
  first, second = str(tmp_path / "predictions.json"), str(tmp_path / "nbest.json")
  with pytest.raises(UnicodeEncodeError):
    io_utils.write_files_as_set({first: "{}", second: "\udc80"})
  assert sorted(os.listdir(tmp_path)) == []
  io_utils.write_files_as_set({first: "{\"q\": \"公司\"}\n", second: "[]\n"})
  assert json.load(open(first, encoding="utf-8")) == {"q": "公司"}
  assert sorted(os.listdir(tmp_path)) == ["nbest.json", "predictions.json"]


def test_input_is_bounded_and_unreadable_files_are_refused(tmp_path, monkeypatch):
  path = _write(tmp_path, sf.squad_json(sf.ENGLISH_PARAGRAPHS[:1]))
  monkeypatch.setattr(data, "MAX_FILE_BYTES", 100)
  with pytest.raises(data.DataError, match=r"bytes, more than the 100 .*: split it"):
    data.read_file(path)
  with pytest.raises(data.DataError, match="cannot read"):
    data.read_file(str(tmp_path / "missing.json"))
  latin = tmp_path / "latin.json"
  latin.write_bytes(b'{"data": "\xe9"}')
  with pytest.raises(data.DataError, match=r"not UTF-8 text \(byte 10\)"):
    data.read_file(str(latin))
