# coding=utf-8
"""Entity markers (run_classifier --entity_markers): placement in mixed CJK / Latin text, an
entity not found reported, markers kept whole by the tokenizer, the start positions the
classifier reads, and a tiny model that can only tell two relations apart by the markers."""
import os
import random

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers.finetune_toys import CLASSIFY_FILLER
from helpers.finetune_toys import write_jsonl
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from bert_fin import tokenization
from bert_fin.finetune.classify import entity_markers
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.classify import orchestration
from bert_fin.training import distributed
from bert_fin.yardstick.benchmarks import convert
from bert_fin.yardstick.benchmarks import rows as rows_lib

E1, E1_END = entity_markers.START[0], entity_markers.END[0]
E2, E2_END = entity_markers.START[1], entity_markers.END[1]


def test_markers_in_mixed_cjk_latin_text():
  text, found = entity_markers.mark("公告：ABC资本与Nova电子签约。", ["Nova电子", "ABC资本"])
  assert found == [True, True]
  assert text == "公告：%sABC资本%s与%sNova电子%s签约。" % (E2, E2_END, E1, E1_END)
  assert entity_markers.strip(text) == "公告：ABC资本与Nova电子签约。"


def test_an_overlapping_occurrence_is_passed_over_and_a_missing_entity_reported():
  text, found = entity_markers.mark("泰和银行称，银行业承压", ["泰和银行", "银行"])
  assert text == "%s泰和银行%s称，%s银行%s业承压" % (E1, E1_END, E2, E2_END)
  assert found == [True, True]
  text, found = entity_markers.mark("甲公司公告", ["甲公司", "乙公司"])
  assert found == [True, False] and text == "%s甲公司%s公告" % (E1, E1_END)
  example = rows_lib.Example("甲公司公告", None, "合作", ("甲公司", "乙公司"))
  assert convert.classification_row(example)["text"] == text
  assert convert.classification_row(example, convert.PAIR) == {
      "text": "甲公司；乙公司", "text_b": "甲公司公告", "label": "合作"}


def test_marker_tokenizer_keeps_markers_whole(tmp_path):
  base = tokenization.FullTokenizer(tokenizer_vocab.write_vocab(tmp_path), do_lower_case=True)
  tokenizer = entity_markers.MarkerTokenizer(base)
  text, _ = entity_markers.mark("沪深iphone上涨", ["iphone"])
  (tokens,) = tokenizer.tokenize_batch([text])
  assert tokens == ["沪", "深", E1, "iphone", E1_END, "上", "涨"]
  assert tokenizer.convert_tokens_to_ids([E1])[0] == base.vocab[E1]
  assert tokenizer.start_ids(2) == (base.vocab[E1], base.vocab[E2])
  assert base.tokenize(E1) != [E1]  # why the wrapper exists


def test_a_vocab_without_the_reserved_slots_is_refused(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n上\n", encoding="utf-8")
  with pytest.raises(ValueError, match="no \\[unused1\\]"):
    entity_markers.MarkerTokenizer(tokenization.FullTokenizer(str(path)), str(path))


def test_start_positions_first_occurrence_and_cls_when_absent():
  ids = np.array([[101, 7, 1, 8, 2, 3, 9, 4], [101, 3, 5, 4, 1, 6, 2, 0]], np.int32)
  with tf.Graph().as_default(), tf.Session() as session:
    positions = session.run(entity_markers.start_positions(tf.constant(ids), (1, 3)))
  np.testing.assert_array_equal(positions, [[2, 5], [4, 1]])
  with tf.Graph().as_default(), tf.Session() as session:
    absent = session.run(entity_markers.start_positions(tf.constant(ids[:, :2]), (1,)))
  np.testing.assert_array_equal(absent, [[0], [0]])


def test_rows_missing_a_marker_are_counted():
  ids = np.array([[101, 1, 7, 2, 3, 8, 4, 102], [101, 1, 7, 2, 9, 102, 0, 0],
                  [101, 9, 9, 102, 0, 0, 0, 0]])
  assert entity_markers.rows_missing_a_marker(ids, (1, 3)) == 2
  assert entity_markers.rows_missing_a_marker(ids, (1,)) == 1


def _order_rows(rng, n):
  """The same words in every text; the relation says which one is the head: only the markers
  (or the pair's order) tell the two labels apart."""
  rows = []
  for _ in range(n):
    filler = "".join(rng.choice(CLASSIFY_FILLER) for _ in range(3))
    label = rng.choice(["ab", "ba"])
    head, tail = ("上涨", "下跌") if label == "ab" else ("下跌", "上涨")
    text, _ = entity_markers.mark(filler + "上涨和下跌", [head, tail])
    rows.append({"text": text, "label": label})
  return rows


@pytest.mark.slow  # a 150-update fine-tuning (10-13 s on 2 busy cores)
def test_a_tiny_classifier_reads_the_relation_from_the_markers(tmp_path, capsys):
  rng = random.Random(3)
  data = tmp_path / "data"
  data.mkdir()
  for split, count in (("train", 192), ("dev", 48)):
    write_jsonl(data / ("%s.jsonl" % split), _order_rows(rng, count))
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=1, intermediate_size=64, max_position_embeddings=32)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier", "--task_name=jsonl", "--data_dir=" + str(data),
          "--bert_config_file=" + str(config_file),
          "--vocab_file=" + tokenizer_vocab.write_vocab(tmp_path),
          "--output_dir=" + str(tmp_path / "out"), "--max_seq_length=16",
          "--train_batch_size=16", "--learning_rate=1e-3", "--num_train_steps=150", "--seed=3",
          "--entity_markers=2", "--do_train", "--do_eval", "--intra_op_parallelism_threads=1",
          "--inter_op_parallelism_threads=1"])
  result = orchestration.run(classify_flags.settings_of(values), distributed.init(False))
  assert "dev: 0 of 48 examples lack an entity start marker" in capsys.readouterr().out
  assert result["eval_accuracy"] >= 0.9  # the words are the same in both labels: chance 0.5
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / "out")))
  assert reader.get_variable_to_shape_map()["output_weights"] == [2, 3 * 32]  # [CLS], E1, E2
  assert os.path.isfile(str(tmp_path / "out" / "eval_results.txt"))
