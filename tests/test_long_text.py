# coding=utf-8
"""run_classifier's --long_text: which tokens a long text keeps (head, tail, head_tail), the windows
of chunks and their pooled logits, the cut-example counts, the pair rules, the yardstick's task
options, and one tiny end-to-end chunks run (one test_results.tsv row an example)."""
import json
import os
import pathlib
import random

from absl import flags
import numpy as np
import pytest

from helpers import tokenizer_vocab
from helpers import modeling_toys as mt
from helpers.finetune_toys import CLASSIFY_FILLER
from helpers.finetune_toys import KEY
from helpers.finetune_toys import write_jsonl
from bert_fin import tokenization
from bert_fin.cli import compare_checkpoints as compare_cli
from bert_fin.finetune import finetuned
from bert_fin.finetune.classify import per_document
from bert_fin.finetune.classify import features
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.classify import orchestration
from bert_fin.finetune.classify import tasks
from bert_fin.records import schema
from bert_fin.training import distributed
from bert_fin.yardstick import task_kinds


def _google_truncate_seq_pair(tokens_a, tokens_b, max_length):
  """google-research/bert's _truncate_seq_pair, restated here as the oracle."""
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


@pytest.mark.parametrize("len_a,len_b,room", [(4, 6, 5), (10, 1, 5), (3, 3, 4), (0, 9, 3),
                                              (7, 7, 20), (50, 49, 10)])
def test_pair_counts_are_googles_truncate_seq_pair(len_a, len_b, room):
  a, b = list(range(len_a)), list(range(len_b))
  _google_truncate_seq_pair(a, b, room)
  assert long_text.pair_counts(len_a, len_b, room) == (len(a), len(b))


def test_head_tail_and_tail_keep_the_right_tokens():
  tokens = list(range(20))
  assert long_text.keep(tokens, 6, long_text.HEAD, 6) == [0, 1, 2, 3, 4, 5]
  assert long_text.keep(tokens, 6, long_text.TAIL, 6) == [14, 15, 16, 17, 18, 19]
  assert long_text.keep(tokens, 6, long_text.HEAD_TAIL, 6, head_tokens=2) == [0, 1, 16, 17, 18, 19]
  assert long_text.keep(tokens, 6, long_text.HEAD_TAIL, 6, head_tokens=0) == [14, 15, 16, 17, 18,
                                                                              19]
  assert long_text.keep(tokens[:5], 6, long_text.TAIL, 6) == [0, 1, 2, 3, 4]  # fits: whole
  assert long_text.keep(tokens, 0, long_text.TAIL, 6) == []
  # a pair's side keeps the share of its own count: 3 of capacity 6 with head 2 -> round(1.0)
  assert long_text.keep(tokens, 3, long_text.HEAD_TAIL, 6, head_tokens=2) == [0, 18, 19]


def test_sun_et_al_default_head_is_128_of_510_scaled():
  assert long_text.head_tokens_at(510) == 128  # max_seq_length 512: 128 head + 382 tail
  assert long_text.head_tokens_at(126) == 32  # max_seq_length 128: round(126 * 128 / 510)
  assert long_text.head_tokens_at(126, head_tokens=10) == 10
  assert long_text.head_count(510, 510, None) == 128
  assert long_text.head_count(100, 510, None) == 25


@pytest.mark.parametrize("length,window,stride,starts", [
    (0, 5, 2, [0]), (5, 5, 2, [0]), (6, 5, 2, [0, 2]), (10, 4, 4, [0, 4, 8]),
    (12, 4, 4, [0, 4, 8]), (13, 4, 4, [0, 4, 8, 12]), (10, 4, 3, [0, 3, 6]), (9, 4, 1,
                                                                            [0, 1, 2, 3, 4, 5])])
def test_window_starts_cover_the_text_with_a_start_every_stride(length, window, stride, starts):
  got = long_text.window_starts(length, window, stride)
  assert got == starts
  covered = set()
  for start in got:
    covered.update(range(start, min(start + window, length)))
  assert covered == set(range(length))  # every token in some window
  assert got[-1] + window >= length and (len(got) == 1 or got[-2] + window < length)


def test_window_starts_refuse_a_zero_window_or_stride():
  with pytest.raises(ValueError, match="window and stride"):
    long_text.window_starts(10, 4, 0)


def test_pool_logits_mean_and_max_per_document():
  logits = np.array([[1.0, 0.0], [3.0, -2.0], [0.5, 0.5], [-1.0, 4.0], [0.0, 2.0]])
  doc_index = [0, 0, 1, 2, 2]
  np.testing.assert_allclose(long_text.pool_logits(logits, doc_index, 3, "mean"),
                             [[2.0, -1.0], [0.5, 0.5], [-0.5, 3.0]])
  np.testing.assert_allclose(long_text.pool_logits(logits, doc_index, 3, "max"),
                             [[3.0, 0.0], [0.5, 0.5], [0.0, 4.0]])
  with pytest.raises(ValueError, match="every one of 4 documents"):
    long_text.pool_logits(logits, doc_index, 4)
  np.testing.assert_allclose(long_text.softmax([[0.0, np.log(3.0)]]), [[0.25, 0.75]])


def test_document_figures_are_per_document_not_per_window():
  pooled = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
  result = per_document.evaluation(pooled, [0, 1, 1], 2)
  assert result["eval_accuracy"] == pytest.approx(2 / 3)
  expected_loss = np.mean([np.log1p(np.exp(-2.0)), np.log1p(np.exp(-1.0)),
                           np.log1p(np.exp(1.0))])
  assert result["eval_loss"] == pytest.approx(expected_loss)
  assert result["confusion_matrix"].tolist() == [[1, 0], [1, 1]]


@pytest.fixture
def tokenizer(tmp_path):
  return tokenization.FullTokenizer(tokenizer_vocab.write_vocab(tmp_path))


def _tokens(tokenizer, encoded, row):
  length = encoded.arrays[schema.INPUT_LEN][row]
  return tokenizer.convert_ids_to_tokens(encoded.arrays[schema.INPUT_IDS][row, :length].tolist())


def test_encode_each_mode_and_count_the_examples_longer_than_fit(tokenizer):
  text = "沪深股指数市场银行基金证券"  # 13 one-character pieces
  examples = [tasks.Example("a", text, None, "up"), tasks.Example("b", "上涨", None, "down")]
  labels = ["down", "up"]
  cases = {long_text.HEAD: list("沪深股指数市"), long_text.TAIL: list("银行基金证券"),
           long_text.HEAD_TAIL: list("沪深基金证券")}  # head_tokens 2: 2 + 4
  for mode, kept in cases.items():
    options = long_text.Options(mode, 2, None, long_text.MEAN)
    encoded = features.encode(examples, labels, tokenizer, 8, options)
    assert _tokens(tokenizer, encoded, 0) == ["[CLS]"] + kept + ["[SEP]"], mode
    assert _tokens(tokenizer, encoded, 1) == ["[CLS]", "上", "涨", "[SEP]"]
    assert encoded.truncated == 1 and encoded.num_examples == 2
    assert encoded.doc_index.tolist() == [0, 1]


def test_encode_chunks_windows_every_stride_with_the_documents_label(tokenizer):
  text = "沪深股指数市场银行基金证券"  # 13 pieces, windows of 6 every 4: starts 0, 4, 8
  examples = [tasks.Example("a", text, None, "up"), tasks.Example("b", "上涨", None, "down"),
              tasks.Example("c", "银行基金证券", None, None)]  # fits exactly: one window
  options = long_text.Options(long_text.CHUNKS, None, 4, long_text.MEAN)
  encoded = features.encode(examples, ["down", "up"], tokenizer, 8, options)
  assert [_tokens(tokenizer, encoded, row)[1:-1] for row in range(3)] == [
      list("沪深股指数市"), list("数市场银行基"), list("行基金证券")]
  assert encoded.doc_index.tolist() == [0, 0, 0, 1, 2]
  assert encoded.arrays[features.LABEL_IDS].tolist() == [1, 1, 1, 0, 0]
  assert encoded.truncated == 1 and encoded.num_examples == 3
  assert per_document.document_labels(encoded).tolist() == [1, 0, 0]
  # the default stride: half of max_seq_length - 2
  default = features.encode(examples[:1], ["down", "up"], tokenizer, 8,
                            long_text.Options(long_text.CHUNKS, None, None, long_text.MEAN))
  assert default.doc_index.tolist() == [0] * len(long_text.window_starts(13, 6, 3))


def test_pairs_cut_each_side_by_googles_rule_then_the_mode(tokenizer):
  example = tasks.Example("a", "沪深股指数市场", "银行基金证券", "up")  # 7 + 6 pieces, room 5
  head = features.encode([example], ["down", "up"], tokenizer, 8)
  assert _tokens(tokenizer, head, 0) == ["[CLS]", "沪", "深", "股", "[SEP]", "银", "行", "[SEP]"]
  tail = features.encode([example], ["down", "up"], tokenizer, 8,
                         long_text.Options(long_text.TAIL, None, None, long_text.MEAN))
  assert _tokens(tokenizer, tail, 0) == ["[CLS]", "数", "市", "场", "[SEP]", "证", "券", "[SEP]"]
  assert tail.arrays[schema.SEGMENT_IDS][0].tolist() == [0] * 5 + [1] * 3
  with pytest.raises(ValueError, match="chunks windows single texts"):
    features.encode([example], ["down", "up"], tokenizer, 8,
                    long_text.Options(long_text.CHUNKS, None, None, long_text.MEAN))


def test_describe_says_how_many_were_cut_and_how():
  options = long_text.Options(long_text.HEAD, None, None, long_text.MEAN)
  assert long_text.describe("train", 312, 2000, 128, options) == (
      "train: 312 of 2000 examples longer than max_seq_length 128 (cut to their head)")
  line = long_text.describe("dev", 5, 9, 128, options._replace(mode=long_text.HEAD_TAIL))
  assert "first 32 and last 94 tokens" in line
  line = long_text.describe("test", 5, 9, 128, options._replace(mode=long_text.CHUNKS), rows=40)
  assert "windows of 126 tokens every 63: 40 rows" in line


def _flags(*argv):
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier", "--task_name=jsonl", "--data_dir=d", "--bert_config_file=c",
          "--vocab_file=v", "--output_dir=o", "--do_train"] + list(argv))
  return classify_flags.settings_of(values)


def test_long_text_flags_are_checked_against_max_seq_length():
  settings = _flags("--long_text=chunks", "--doc_stride=10", "--max_seq_length=32")
  assert classify_flags.options_of(settings.documents) == long_text.Options(
      "chunks", None, 10, "mean")
  with pytest.raises(ValueError, match=r"--doc_stride must be in \[1, 30\]"):
    _flags("--long_text=chunks", "--doc_stride=31", "--max_seq_length=32")
  with pytest.raises(ValueError, match=r"--head_tokens must be in \[0, 30\]"):
    _flags("--long_text=head_tail", "--head_tokens=40", "--max_seq_length=32")
  with pytest.raises(flags.IllegalFlagValueError):
    _flags("--long_text=middle")


def test_yardstick_task_options_reach_the_cells_and_bad_ones_are_refused():
  args = compare_cli.build_parser().parse_args([
      "--output_dir=x", "--task=a=d", "--task=b=d,long_text=chunks,doc_stride=32",
      "--task=n=d,kind=ner"])
  specs = compare_cli.tasks_from(args)
  assert [spec.options for spec in specs] == [(), (("long_text", "chunks"), ("doc_stride", "32")),
                                              ()]
  data = task_kinds.TaskData([], ["a", "b"], None, {})
  flags_of_b = task_kinds.get("classification").cell_flags(specs[1], data)
  assert flags_of_b[-2:] == ["--long_text=chunks", "--doc_stride=32"]
  for spec, words in (("t=d,long_text=middle", "not one of head"),
                      ("t=d,doc_stride=0", "a whole number >= 1"),
                      ("t=d,kind=ner,long_text=chunks", "not an option of kind ner")):
    bad = compare_cli.build_parser().parse_args(["--output_dir=x", "--task=" + spec])
    with pytest.raises(ValueError, match=words):
      compare_cli.tasks_from(bad)


def _long_rows(rng, n, length=24):
  """n documents of `length` filler characters whose label word (KEY) sits in the last fifth."""
  rows = []
  for i in range(n):
    label = sorted(KEY)[i % 2]
    text = [rng.choice(CLASSIFY_FILLER) for _ in range(length)]
    at = rng.randint(length * 4 // 5, length - 2)
    rows.append({"text": "".join(text[:at]) + KEY[label] + "".join(text[at:]), "label": label})
  rng.shuffle(rows)
  return rows


@pytest.fixture
def long_toy(tmp_path):
  rng = random.Random(11)
  data = tmp_path / "data"
  data.mkdir()
  write_jsonl(data / "train.jsonl", _long_rows(rng, 96))
  write_jsonl(data / "dev.jsonl", _long_rows(rng, 24))
  test_rows = _long_rows(rng, 13)
  test_rows.append({"text": "上涨"})  # short and unlabelled: one window, one row
  write_jsonl(data / "test.jsonl", test_rows)
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=1, intermediate_size=64, max_position_embeddings=32)
  (tmp_path / "bert_config.json").write_text(config.to_json_string())
  return dict(data=str(data), config_file=str(tmp_path / "bert_config.json"),
              vocab=tokenizer_vocab.write_vocab(tmp_path), test_rows=test_rows,
              out=str(tmp_path / "out"))


def _run(toy, *argv):
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier", "--task_name=jsonl", "--data_dir=" + toy["data"],
          "--bert_config_file=" + toy["config_file"], "--vocab_file=" + toy["vocab"],
          "--output_dir=" + toy["out"], "--max_seq_length=16", "--train_batch_size=16",
          "--eval_batch_size=8", "--predict_batch_size=8", "--learning_rate=2e-3",
          "--num_train_steps=120", "--warmup_proportion=0.1", "--seed=5",
          "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"] + list(argv))
  settings = classify_flags.settings_of(values)
  return orchestration.run(settings, distributed.init(False))


def test_chunks_end_to_end_one_row_an_example_and_predict_reads_the_saved_mode(long_toy, capsys):
  result = _run(long_toy, "--do_train", "--do_eval", "--do_predict", "--long_text=chunks",
                "--doc_stride=7")
  out = capsys.readouterr().out
  assert "train: 96 of 96 examples longer than max_seq_length 16 (cut into windows of 14 " \
         "tokens every 7" in out
  # 24 + 2 pieces, windows of 14 every 7: starts 0, 7, 14: 3 windows a document
  assert result["eval_windows"] == 24 * 3 and result["eval_examples"] == 24
  assert result["eval_examples_longer"] == 24 and result["eval_long_text"] == "chunks"
  assert result["eval_accuracy"] >= 0.75  # the head alone (14 of 26 pieces) never sees the label
  assert sum(result["eval_confusion_matrix"][0]) + sum(result["eval_confusion_matrix"][1]) == 24
  saved = json.load(open(os.path.join(long_toy["out"], finetuned.CONFIG_FILE)))
  assert saved["long_text"] == "chunks" and saved["doc_stride"] == 7
  rows = np.loadtxt(os.path.join(long_toy["out"], tasks.TEST_RESULTS_FILE), ndmin=2)
  assert rows.shape == (len(long_toy["test_rows"]), 2)  # one row an example, not a window
  np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-5)
  first = rows.copy()
  os.remove(os.path.join(long_toy["out"], tasks.TEST_RESULTS_FILE))
  _run(long_toy, "--do_predict")  # no --long_text: the saved chunks and stride
  out = capsys.readouterr().out
  assert "long texts read as the model in" in out and "--long_text=chunks" in out
  np.testing.assert_allclose(np.loadtxt(os.path.join(long_toy["out"], tasks.TEST_RESULTS_FILE),
                                        ndmin=2), first, atol=1e-6)
  with pytest.raises(ValueError, match="--head_tokens applies to --long_text=head_tail"):
    _run(long_toy, "--do_predict", "--head_tokens=3")


def test_chunks_refuse_a_pair_naming_its_file_and_example(long_toy):
  write_jsonl(pathlib.Path(long_toy["data"]) / "dev.jsonl",
              [{"text": "上涨", "label": "up"}, {"text": "上涨", "text_b": "银行", "label": "up"}])
  with pytest.raises(tasks.DataError, match=r"dev\.jsonl: example dev-2 is a pair"):
    orchestration.preflight(_settings_for(long_toy, "--do_train", "--do_eval",
                                          "--long_text=chunks"), distributed.init(False))
  assert not os.path.exists(long_toy["out"])  # refused before anything is written


def _settings_for(toy, *argv):
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier", "--task_name=jsonl", "--data_dir=" + toy["data"],
          "--bert_config_file=" + toy["config_file"], "--vocab_file=" + toy["vocab"],
          "--output_dir=" + toy["out"], "--max_seq_length=16", "--labels=down,up"] + list(argv))
  return classify_flags.settings_of(values)
