"""create_pretraining_data end to end: fast mode (WWM, workers, stats) and faithful mode (CLI)."""
import json
import os
import random
import subprocess
import sys

import pytest

from bert_fin.data.create import fast
from bert_fin.data.create import instances as instances_lib
from bert_fin.data.create import masking
from bert_fin.data.create import options as options_lib
from bert_fin.records import masking_config
from bert_fin.records import schema
from helpers import REPO
from helpers.graph_datasets import run_to_end

os.environ.setdefault("OMP_NUM_THREADS", "1")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "pretraining")
VOCAB = os.path.join(FIXTURES, "vocab.txt")
USER_DICT = os.path.join(FIXTURES, "user_dict.txt")
CORPUS_TXT = os.path.join(FIXTURES, "corpus.txt")
CORPUS_JSONL = os.path.join(FIXTURES, "corpus.jsonl")
USER_WORDS = ["贵州茅台", "沪深300", "无创dna", "宁德时代新能源科技股份有限公司", "iPhone手机",
              "江南style"]


def _options(tmp_path, **overrides):
  base = dict(input_file=CORPUS_JSONL, output_file=str(tmp_path / "out"), vocab_file=VOCAB,
              max_seq_length=48, max_predictions_per_seq=8, dupe_factor=2, progress=False,
              do_whole_word_mask=True, user_dict=USER_DICT, num_workers=1)
  base.update(overrides)
  return options_lib.make_options(**base)


def _read_records(paths, max_seq_length, max_predictions_per_seq):
  import tensorflow.compat.v1 as tf
  spec = schema.tf_parsing_spec(max_seq_length, max_predictions_per_seq)
  out = []
  with tf.Graph().as_default(), tf.Session() as sess:
    for path in paths:
      dataset = tf.data.TFRecordDataset(path).map(
          lambda r: schema.tf_decode_features(tf.io.parse_single_example(r, spec)))
      element = tf.data.make_one_shot_iterator(dataset).get_next()
      out.extend(run_to_end(sess, element))
  return out


def _file_bytes(directory):
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in sorted(os.listdir(directory)) if name.endswith(".tfrecord")}


def test_output_identical_for_1_2_and_4_workers(tmp_path):
  outputs = []
  for workers in (1, 2, 4):
    directory = tmp_path / ("w%d" % workers)
    stats = fast.run(_options(directory, num_workers=workers, num_output_files=4,
                                  block_docs=2, shuffle_window=7))
    assert stats["num_workers"] == workers
    outputs.append(_file_bytes(directory))
  assert len(outputs[0]) == 4 and all(outputs[0].values())
  assert outputs[0] == outputs[1] == outputs[2]
  # a different seed changes the data (the determinism is not a constant output)
  fast.run(_options(tmp_path / "seed", random_seed=1, num_output_files=4, block_docs=2,
                        shuffle_window=7))
  assert _file_bytes(tmp_path / "seed") != outputs[0]


@pytest.mark.parametrize("objective", ["bert", "roberta"])
def test_c_kernel_and_python_path_write_the_same_files_and_stats(tmp_path, objective):
  results = {}
  for kernel in ("c", "python"):
    stats = fast.run(_options(tmp_path / kernel, kernel=kernel, num_workers=2,
                                  num_output_files=2, block_docs=3, write_input_mask=True,
                                  objective=objective))
    assert stats["record_kernel"] == kernel
    for name in ("seconds", "instances_per_second", "record_kernel", "options"):
      stats.pop(name)
    results[kernel] = (_file_bytes(tmp_path / kernel), stats)
  assert results["c"][1]["instances"] > 0
  assert results["c"] == results["python"]


def test_word_cache_overflow_keeps_every_word_of_the_block(tmp_path, monkeypatch):
  """When the bounded word cache is full it is cleared; words cached before must be re-tokenized,
  not looked up (that was a KeyError once a corpus had more distinct words than the cap)."""
  unbounded = fast._Worker(_options(tmp_path))
  want = unbounded.tokenize_documents([["贵州茅台股价上涨今天收盘"], ["贵州茅台发布公告"]])
  monkeypatch.setattr(fast, "_WORD_CACHE_ENTRIES", 5)
  worker = fast._Worker(_options(tmp_path))
  worker.tokenize_documents([["贵州茅台发布公告"]])
  assert worker.tokenize_documents([["贵州茅台股价上涨今天收盘"], ["贵州茅台发布公告"]]) == want


def _random_mixed_sentence(rng, vocab_cjk):
  parts = []
  for _ in range(rng.randint(1, 12)):
    kind = rng.randint(0, 5)
    if kind == 0:
      parts.append("".join(rng.choice(vocab_cjk) for _ in range(rng.randint(1, 4))))
    elif kind == 1:  # CJK outside the vocab -> [UNK], never a KeyError
      parts.append(chr(rng.randint(0x4E00, 0x9FA5)))
    elif kind == 2:
      parts.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyzDNA") for _ in range(
          rng.randint(1, 9))))
    elif kind == 3:
      parts.append(str(rng.randint(0, 10 ** rng.randint(1, 6))))
    elif kind == 4:
      parts.append(rng.choice(USER_WORDS))
    else:
      parts.append(rng.choice(["，", "。", " ", "%", "##", "-"]))
  return "".join(parts)


def test_mixed_script_wwm_fuzz_never_oov_and_labels_are_input_tokens(tmp_path):
  options = _options(tmp_path, max_seq_length=40, max_predictions_per_seq=10, masked_lm_prob=0.3)
  worker = fast._Worker(options)
  roberta_config = worker.config._replace(objective="roberta", short_seq_prob=0.0)
  vocab_size = len(worker.vocab)
  vocab_cjk = [t for t in worker.vocab if len(t) == 1 and ord(t) > 0x2E80]
  rng = random.Random(2024)
  user_word_seen = 0
  for trial in range(150):
    sentences = [_random_mixed_sentence(rng, vocab_cjk) for _ in range(rng.randint(1, 5))]
    document = worker.tokenize_document(sentences)
    # the pieces are exactly the tokenizer's pieces of each jieba word, all in the vocab
    for sentence in document:
      assert all(0 <= i < vocab_size for i in sentence.ids) and sentence.starts[0]
    if not document:
      continue
    for word in USER_WORDS:  # a user-dict word is one group: its first piece starts, rest don't
      pieces = [worker.vocab[p] for p in worker.tokenizer.tokenize(word)]
      for sentence in document:
        for k in range(len(sentence.ids) - len(pieces) + 1):
          if sentence.ids[k:k + len(pieces)] == pieces and sentence.starts[k] and (
              k + len(pieces) == len(sentence.ids) or sentence.starts[k + len(pieces)]):
            assert not any(sentence.starts[k + 1:k + len(pieces)])
            user_word_seen += 1
    block = [document, worker.tokenize_document(["另一篇文档。"])]
    for inst in instances_lib.create_document_instances(block, 0, worker.config,
                                                        random.Random(trial)):
      assert all(0 <= i < vocab_size for i in inst.input_ids + inst.masked_lm_ids)
      assert len(inst.masked_lm_positions) <= options.max_predictions_per_seq
    # RoBERTa spans are contiguous: restoring the labels must give back the document's exact ids,
    # and every masked word group must be masked whole.
    stream_ids = [i for s in document for i in s.ids]
    stream_starts = [b for s in document for b in s.starts]
    offset = 0
    for inst in instances_lib.create_document_instances([document], 0, roberta_config,
                                                        random.Random(trial)):
      restored = list(inst.input_ids)
      for p, label in zip(inst.masked_lm_positions, inst.masked_lm_ids):
        restored[p] = label
      body = restored[1:-1]
      assert body == stream_ids[offset:offset + len(body)]
      chosen = set(inst.masked_lm_positions)
      for begin, end in masking.groups_from_starts(stream_starts[offset:offset + len(body)], 1):
        inside = [p in chosen for p in range(begin, end)]
        assert all(inside) or not any(inside)
      offset += len(body)
    assert offset == len(stream_ids)
  assert user_word_seen > 20


def test_records_parse_with_training_spec_and_input_len_is_right(tmp_path):
  options = _options(tmp_path, num_output_files=2, objective="bert")
  stats = fast.run(options)
  paths = [str(tmp_path / ("out-%05d-of-00002.tfrecord" % i)) for i in range(2)]
  examples = _read_records(paths, options.max_seq_length, options.max_predictions_per_seq)
  assert len(examples) == stats["instances"] > 0
  cls_id, sep_id = 7, 8  # fixture vocab: [PAD] [unused1-5] [UNK] [CLS] [SEP] [MASK]
  lengths = {}
  for ex in examples:
    n = int(ex["input_len"])
    ids = ex["input_ids"]
    assert ids[0] == cls_id and ids[n - 1] == sep_id and not ids[n:].any()
    assert not ex["segment_ids"][n:].any()
    k = int(ex["masked_lm_weights"].sum())
    assert list(ex["masked_lm_weights"]) == [1.0] * k + [0.0] * (options.max_predictions_per_seq - k)
    assert all(0 < p < n for p in ex["masked_lm_positions"][:k])
    assert not ex["masked_lm_ids"][k:].any()
    lengths[n] = lengths.get(n, 0) + 1
  assert {int(n): c for n, c in stats["length_histogram"].items()} == lengths
  assert stats["tokens"] == sum(n * c for n, c in lengths.items())
  assert stats["masked_tokens"] == sum(int(ex["masked_lm_weights"].sum()) for ex in examples)
  on_disk = json.load(open(str(tmp_path / "out.stats.json"), encoding="utf-8"))
  assert on_disk["instances"] == stats["instances"]


def test_stats_account_for_every_document(tmp_path):
  corpus = tmp_path / "in.jsonl"
  good = open(CORPUS_JSONL, "rb").read()
  corpus.write_bytes(good + b'{"id": "broken", "sentences": [\n'  # bad_json
                     + b'{"id": "x", "sentences": ["\xff\xfe bad bytes"]}\n'  # undecodable
                     + b'{"id": "e", "sentences": ["   "]}\n'  # no_sentences
                     + b'{"id": "c", "sentences": ["\\u0001\\u0002"]}\n')  # empty after tokenization
  stats = fast.run(_options(tmp_path, input_file=str(corpus), num_workers=2, block_docs=3))
  assert stats["documents_skipped"] == {"bad_json": 1, "undecodable": 1, "no_sentences": 1,
                                        "empty_after_tokenization": 1}
  assert stats["documents_used"] == good.count(b"\n")
  assert stats["documents_read"] == stats["documents_used"] + 4
  assert sum(stats["length_histogram"].values()) == stats["instances"]
  assert (stats["segmenter"], stats["segmenter_fallback"], stats["segmenter_protected_words"]) == (
      "rjieba", None, 0)


def test_dupes_are_masked_differently_and_roberta_has_no_nsp(tmp_path):
  stats = fast.run(_options(tmp_path, objective="roberta", dupe_factor=3, shuffle_window=1,
                                block_docs=100))
  assert stats["next_sentence_random"] == 0
  examples = _read_records([str(tmp_path / "out")], 48, 8)
  assert all(not ex["segment_ids"].any() for ex in examples)
  per_dupe = len(examples) // 3
  first, second = examples[:per_dupe], examples[per_dupe:2 * per_dupe]
  assert any(list(a["masked_lm_positions"]) != list(b["masked_lm_positions"])
             for a, b in zip(first, second))


def test_cli_faithful_mode_with_text_input_and_input_mask(tmp_path):
  out = tmp_path / "g.tfrecord"
  cmd = [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
         "--input_file=" + CORPUS_TXT, "--output_file=" + str(out), "--vocab_file=" + VOCAB,
         "--faithful", "--write_input_mask", "--do_whole_word_mask", "--dupe_factor=2",
         "--max_seq_length=32", "--max_predictions_per_seq=5", "--noprogress"]
  result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
  assert result.returncode == 0, result.stderr
  stats = json.load(open(str(out) + ".stats.json", encoding="utf-8"))
  assert stats["mode"] == "faithful" and stats["documents_used"] == 6 and stats["instances"] > 0
  # a second run (e.g. after a kill) rewrites byte-identical files
  first = out.read_bytes()
  assert subprocess.run(cmd, capture_output=True, timeout=120, cwd=REPO).returncode == 0
  assert out.read_bytes() == first
  bad = subprocess.run(cmd[:2] + ["--input_file=/nonexistent/*.txt"] + cmd[3:],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
  assert bad.returncode != 0 and "matches no file" in bad.stderr


@pytest.mark.parametrize("overrides,message", [
    ({"input_file": None, "vocab_file": None},
     r"^missing required flag\(s\): --input_file, --vocab_file$"),
    ({"objective": "xlnet"}, r"^--objective must be one of \('bert', 'roberta'\)$"),
    ({"shuffle_window": 0}, r"^--shuffle_window must be >= 1, got 0$"),
    ({"block_docs": 0}, r"^--block_docs must be >= 1, got 0$"),
    ({"masked_lm_prob": 1.0}, r"^--masked_lm_prob must be in \(0, 1\), got 1$")])
def test_options_built_in_code_are_checked_by_their_fields(overrides, message):
  """make_options (bench, tests, library callers) bypasses absl: validate_options applies what
  the fields declare (required, choices, bounds), with the flags' one-line messages."""
  given = dict({"input_file": "c.txt", "output_file": "o.tfrecord", "vocab_file": "v.txt"},
               **overrides)
  options_lib.validate_options(options_lib.make_options(
      input_file="c.txt", output_file="o.tfrecord", vocab_file="v.txt"))
  with pytest.raises(ValueError, match=message):
    options_lib.validate_options(options_lib.make_options(**given))


def test_flags_are_generated_from_options_with_googles_names_and_defaults():
  """create_pretraining_data.py defines one flag per Options field; google's flags keep google's
  names and defaults (google-research/bert create_pretraining_data.py), every flag has help."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  import create_pretraining_data as cli  # pylint: disable=import-outside-toplevel
  from bert_fin.data.create import options as options_lib  # pylint: disable=import-outside-toplevel
  googles = {"input_file": None, "output_file": None, "vocab_file": None, "do_lower_case": True,
             "do_whole_word_mask": False, "max_seq_length": 128, "max_predictions_per_seq": 20,
             "random_seed": 12345, "dupe_factor": 10, "masked_lm_prob": 0.15,
             "short_seq_prob": 0.1}
  fv = flags.FlagValues()
  cli.define_flags(fv)
  assert sorted(fv) == sorted(options_lib.NAMES)
  assert {name: fv[name].default for name in googles} == googles
  assert all(len(fv[name].help) > 10 for name in options_lib.NAMES)
  fv(["prog", "--max_seq_length=64", "--objective=roberta", "--nodo_lower_case",
      "--masked_lm_prob=0.2", "--user_dict=d.txt"])
  options = cli.options_from_flags(fv)
  assert options == options_lib.make_options(max_seq_length=64, objective="roberta",
                                             do_lower_case=False, masked_lm_prob=0.2,
                                             user_dict="d.txt")
  with pytest.raises(flags.IllegalFlagValueError):
    fv(["prog", "--kernel=fortran"])
  with pytest.raises(TypeError, match="unknown options"):
    options_lib.make_options(max_seq_len=64)


def _read_dynamic_records(paths):
  import tensorflow as tf
  spec = None
  out = []
  for path in paths:
    for raw in tf.data.TFRecordDataset(path):
      layout = schema.layout_of_example(raw.numpy(), allow_dynamic=True)
      spec = spec or schema.tf_feature_spec(schema.layout_specs(layout))
      out.append({k: v.numpy().tolist() for k, v in tf.io.parse_single_example(raw, spec).items()})
  return out


def test_dynamic_masking_records_are_unmasked_with_the_static_word_groups(tmp_path):
  """--masking=dynamic: each sequence once (dupe_factor 1 unless given), unmasked, with
  word_starts that give the groups static masking draws from: a user-dictionary word is one
  group, [CLS]/[SEP] are never masked. C and Python kernels write the same bytes; 1 or 2 workers
  too."""
  outputs = {}
  for kernel, workers in (("c", 1), ("python", 1), ("c", 2)):
    directory = tmp_path / ("%s%d" % (kernel, workers))
    stats = fast.run(options_lib.make_options(
        input_file=CORPUS_JSONL, output_file=str(directory / "out"), vocab_file=VOCAB,
        max_seq_length=48, progress=False, do_whole_word_mask=True, user_dict=USER_DICT,
        num_workers=workers, masking="dynamic", kernel=kernel, num_output_files=2, block_docs=2))
    outputs[(kernel, workers)] = _file_bytes(directory)
  assert outputs[("c", 1)] == outputs[("python", 1)] == outputs[("c", 2)]
  assert stats["options"]["dupe_factor"] == 1 and stats["masked_tokens"] == 0
  worker = fast._Worker(_options(tmp_path))
  assert stats["dynamic_masking"] == masking_config.config_to_json(
      masking.masking_config(worker.vocab, 0.15, 20))  # google's defaults: what training needs
  rows = _read_dynamic_records(sorted(str(tmp_path / "c1" / name) for name in outputs[("c", 1)]))
  assert len(rows) == stats["instances"] and "masked_lm_positions" not in rows[0]
  cls_id, sep_id, mask_id = (worker.vocab[t] for t in ("[CLS]", "[SEP]", "[MASK]"))
  user_words = [[worker.vocab[p] for p in worker.tokenizer.tokenize(w)] for w in USER_WORDS]
  whole = 0
  for row in rows:
    n = row["input_len"][0]
    ids, starts = row["input_ids"][:n], row["word_starts"][:n]
    assert mask_id not in ids and set(row["input_ids"][n:] + row["word_starts"][n:]) <= {0}
    assert [i for i, s in enumerate(starts) if s == schema.NEVER_MASKED] == [
        i for i, t in enumerate(ids) if t in (cls_id, sep_id)]
    for k, start in enumerate(starts):  # the token after [CLS]/[SEP] always begins a word
      if k and starts[k - 1] == schema.NEVER_MASKED and start != schema.NEVER_MASKED:
        assert start == schema.WORD_BEGINS
    for pieces in user_words:
      for k in range(1, n - len(pieces)):
        if ids[k:k + len(pieces)] == pieces and starts[k] == schema.WORD_BEGINS:
          assert starts[k + 1:k + len(pieces)] == [schema.WORD_CONTINUES] * (len(pieces) - 1)
          whole += 1
  assert whole >= 3
  # an explicit --dupe_factor writes that many pairings
  stats = fast.run(_options(tmp_path / "dupe3", masking="dynamic", dupe_factor=3))
  assert stats["options"]["dupe_factor"] == 3 and stats["instances"] > len(rows)


@pytest.mark.parametrize("conflict, message", [
    (dict(faithful=True), "--faithful"), (dict(write_input_mask=True), "--write_input_mask")])
def test_dynamic_masking_refuses_what_it_cannot_honour(tmp_path, conflict, message):
  with pytest.raises(ValueError, match=message):
    fast.run(_options(tmp_path, masking="dynamic", **conflict))
  assert not os.path.exists(tmp_path / "out")


def test_cli_masking_dynamic_defaults_dupe_factor_to_1_unless_given():
  from absl import flags  # pylint: disable=import-outside-toplevel
  import create_pretraining_data as cli  # pylint: disable=import-outside-toplevel
  fv = flags.FlagValues()
  cli.define_flags(fv)
  fv(["prog", "--masking=dynamic"])
  assert cli.options_from_flags(fv).dupe_factor == 1
  fv = flags.FlagValues()
  cli.define_flags(fv)
  fv(["prog", "--masking=dynamic", "--dupe_factor=4"])
  assert cli.options_from_flags(fv).dupe_factor == 4
  fv = flags.FlagValues()
  cli.define_flags(fv)
  fv(["prog"])
  assert cli.options_from_flags(fv).dupe_factor == 10  # google's default, static masking
