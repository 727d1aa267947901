"""tools/adapt_vocab.py and its library (tokenization/unk_census.py, tokenization/adapt.py,
modeling/vocab_rows.py): ids of existing tokens stable, rows of old ids bit-equal, [UNK] rate of
the corpus drops when re-tokenized by google's own FullTokenizer, [unusedN] slots filled first
(the most frequent pieces), the rest appended, the refusals, compare_checkpoints' [UNK] figure."""
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers import random_checkpoints  # noqa: E402
from helpers import REPO  # noqa: E402
from helpers import modeling_toys  # noqa: E402

from bert_fin.cli import adapt_vocab  # noqa: E402
from bert_fin.modeling import checkpoint  # noqa: E402
from bert_fin.modeling import vocab_rows  # noqa: E402
from bert_fin.tokenization import adapt  # noqa: E402
from bert_fin.tokenization import fast  # noqa: E402
from bert_fin.tokenization import google  # noqa: E402
from bert_fin.tokenization import unk_census  # noqa: E402

SPECIAL = ["[PAD]", "[unused1]", "[unused2]", "[unused3]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789"
BASE_VOCAB = (SPECIAL + list(LETTERS) + list("的一是公司元温度涨了，。%") +
              ["##" + c for c in LETTERS])
# Missing from the vocab: 鍪 (x6), ##℃ (x3: inside 25℃, 30℃, 40℃), ‰ (x3: punctuation, its own
# word), 琻 (x2), ￥ (x2: starts ￥100), ℃ (x1: a word of its own before 度), 乂 (x1).
CORPUS = ("鍪公司的温度是25℃，涨了3‰。\n鍪鍪公司￥100元。\n\n一是鍪℃度，涨了1‰\n"
          "鍪琻公司温度30℃，40℃\n\n鍪琻的，￥5元，2‰，乂\n")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
  """{dir, vocab, config, checkpoint, tensors, corpus}: a tiny google-layout model."""
  directory = tmp_path_factory.mktemp("adapt_base")
  vocab = str(directory / "vocab.txt")
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("".join(token + "\n" for token in BASE_VOCAB))
  config = modeling_toys.tiny_config(vocab_size=len(BASE_VOCAB))
  config_path = str(directory / "bert_config.json")
  with open(config_path, "w", encoding="utf-8") as f:
    f.write(config.to_json_string())
  prefix = str(directory / "model" / "bert_model.ckpt")
  tensors = random_checkpoints.write_random_checkpoint(prefix, config)
  # training state, as a checkpoint of a run has it: dropped by adapt_vocab
  with_state = dict(tensors, global_step=np.array(7, np.int64))
  with_state[vocab_rows.WORD_EMBEDDINGS + "/adam_m"] = np.ones_like(tensors[
      vocab_rows.WORD_EMBEDDINGS])
  checkpoint.write_checkpoint(prefix, with_state)
  corpus = str(directory / "corpus.txt")
  with open(corpus, "w", encoding="utf-8") as f:
    f.write(CORPUS)
  return {"dir": directory, "vocab": vocab, "config": config_path, "checkpoint": prefix,
          "tensors": tensors, "corpus": corpus}


def _argv(base, output_dir, *extra, vocab=None, config=None):
  return ["--init_checkpoint=" + base["checkpoint"], "--vocab_file=" + (vocab or base["vocab"]),
          "--bert_config_file=" + (config or base["config"]), "--input_file=" + base["corpus"],
          "--output_dir=" + str(output_dir), "--min_count=2", "--no_progress"] + list(extra)


def _unk_count(vocab_file, text):
  tokenizer = google.FullTokenizer(vocab_file, do_lower_case=True)
  pieces = [p for line in text.splitlines() for p in tokenizer.tokenize(line)]
  return sum(1 for p in pieces if p == "[UNK]"), len(pieces)


def _read_vocab(path):
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f]


@pytest.fixture(scope="module")
def adapted(base, tmp_path_factory):
  output_dir = tmp_path_factory.mktemp("adapted") / "out"
  assert adapt_vocab.main(_argv(base, output_dir)) == 0
  return str(output_dir)


def test_ids_stable_slots_first_then_appended(base, adapted):
  old, new = BASE_VOCAB, _read_vocab(os.path.join(adapted, "vocab.txt"))
  changed = [i for i in range(len(old)) if old[i] != new[i]]
  assert changed == [1, 2, 3]  # exactly the [unusedN] slots, every one of them
  # The most frequent pieces (count >= --min_count 2) fill the slots, in slot order; the others
  # are appended, then padding [unusedN] to a multiple of 8 numbered after the base's.
  assert [new[i] for i in changed] == ["鍪", "##℃", "‰"]
  appended = new[len(old):]
  assert appended[:2] == ["琻", "￥"]
  assert appended[2:] == ["[unused%d]" % n for n in range(4, 4 + len(appended) - 2)]
  assert len(new) % 8 == 0
  assert "乂" not in new  # once only: below --min_count
  with open(os.path.join(adapted, "bert_config.json"), encoding="utf-8") as f:
    assert json.load(f)["vocab_size"] == len(new)
  with open(os.path.join(adapted, "unk_pieces.tsv"), encoding="utf-8") as f:
    rows = {line.split("\t")[0]: line.rstrip("\n").split("\t") for line in f}
  assert rows["鍪"][1:] == ["6", "U+936A", "slot 1"]
  assert rows["乂"][3] == "left out: below --min_count"


def test_rows_of_old_ids_bit_equal_new_rows_mean_training_state_dropped(base, adapted):
  grown = checkpoint.model_tensors(adapted)
  reader_names = set(dict(checkpoint.checkpoint_shapes(adapted)))
  assert "global_step" not in reader_names
  assert not any("adam" in name for name in reader_names)
  new = _read_vocab(os.path.join(adapted, "vocab.txt"))
  old_size, kept = len(BASE_VOCAB), [i for i in range(len(BASE_VOCAB)) if i not in (1, 2, 3)]
  ordinary = [i for i, t in enumerate(BASE_VOCAB) if not t.startswith("[")]
  for name, table in base["tensors"].items():
    if name not in vocab_rows.VOCAB_SIZED:
      assert grown[name].tobytes() == table.tobytes(), name
      continue
    assert grown[name].shape[0] == len(new)
    assert grown[name][kept].tobytes() == table[kept].tobytes(), name
    mean = table[ordinary].astype(np.float64).mean(axis=0).astype(np.float32)
    for row in [1, 2, 3] + list(range(old_size, len(new))):
      assert grown[name][row].tobytes() == mean.tobytes(), (name, row)
  # Loadable with the new config: every variable has google's shape for it.
  with open(os.path.join(adapted, "bert_config.json"), encoding="utf-8") as f:
    config = modeling_toys.modeling.BertConfig.from_dict(json.load(f))
  expected = modeling_toys.google_variable_shapes(config)
  assert {n: list(v.shape) for n, v in grown.items()} == expected


def test_unk_rate_drops_when_google_tokenizer_reads_the_new_vocab(base, adapted, capsys):
  del capsys
  before, total_before = _unk_count(base["vocab"], CORPUS)
  after, total_after = _unk_count(os.path.join(adapted, "vocab.txt"), CORPUS)
  assert before == 18 and after == 2  # 乂 and ℃ (once each: below --min_count) stay [UNK]
  with open(os.path.join(adapted, "adapt_report.json"), encoding="utf-8") as f:
    report = json.load(f)
  assert report["unk_pieces_before"] == before and report["pieces_before"] == total_before
  assert report["unk_pieces_after"] == after and report["pieces_after"] == total_after
  assert report["unk_rate_after"] < report["unk_rate_before"]


def test_compare_checkpoints_unk_column_shows_the_drop(base, adapted):
  from bert_fin.yardstick import grid  # pylint: disable=import-outside-toplevel
  from bert_fin.yardstick import checks as yardstick_checks  # pylint: disable=import-outside-toplevel
  data = collections_task_data(CORPUS.splitlines())
  rates = {}
  for name, vocab in (("base", base["vocab"]), ("adapted", os.path.join(adapted, "vocab.txt"))):
    point = grid.Checkpoint(name, None, base["config"], vocab, True)
    rates[name] = yardstick_checks.check_vocab_fits(point, None, data, max_unk_rate=1.0)
  assert rates["adapted"] < rates["base"] / 5


def collections_task_data(texts):
  from bert_fin.yardstick import task_kinds  # pylint: disable=import-outside-toplevel
  return task_kinds.TaskData(texts=[t for t in texts if t], labels=None, test_labels=None,
                             sizes=None)


def test_no_append_fills_the_slots_only(base, tmp_path):
  output_dir = tmp_path / "out"
  assert adapt_vocab.main(_argv(base, output_dir, "--no_append")) == 0
  new = _read_vocab(str(output_dir / "vocab.txt"))
  assert len(new) == len(BASE_VOCAB) and new[1:4] == ["鍪", "##℃", "‰"]
  with open(str(output_dir / "unk_pieces.tsv"), encoding="utf-8") as f:
    text = f.read()
  assert "琻\t2\tU+%04X\tleft out: no [unusedN] slot left (appending is off)" % ord("琻") in text


def test_a_vocab_without_slots_is_refused_only_without_append(base, tmp_path):
  no_slots = [t for t in BASE_VOCAB if not t.startswith("[unused")]
  vocab, config = str(tmp_path / "vocab.txt"), str(tmp_path / "bert_config.json")
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in no_slots))
  model_config = modeling_toys.tiny_config(vocab_size=len(no_slots))
  with open(config, "w", encoding="utf-8") as f:
    f.write(model_config.to_json_string())
  prefix = str(tmp_path / "model.ckpt")
  random_checkpoints.write_random_checkpoint(prefix, model_config)
  argv = _argv(base, tmp_path / "refused", "--append=false", vocab=vocab, config=config)
  argv[0] = "--init_checkpoint=" + prefix
  proc = subprocess.run([sys.executable, "-m", "bert_fin.cli.adapt_vocab"] + argv,
                        capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, PYTHONPATH=REPO))
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines() == [
      "adapt_vocab: error: --vocab_file %s has no [unusedN] slot and appending is off: drop "
      "--no_append (new rows at the end) or use a vocab with [unusedN] slots" % vocab]
  assert not os.path.exists(str(tmp_path / "refused"))
  argv[-1] = "--append=true"
  assert adapt_vocab.main(argv) == 0
  new = _read_vocab(str(tmp_path / "refused" / "vocab.txt"))
  assert new[:len(no_slots)] == no_slots and new[len(no_slots):len(no_slots) + 5] == [
      "鍪", "##℃", "‰", "琻", "￥"]


def test_rows_padded_past_the_vocab_are_slots(base, tmp_path):
  """A vocab_size padded past vocab.txt (as some releases are): the padding rows are filled
  like [unusedN] slots, nothing is appended before they are used up."""
  vocab = str(tmp_path / "vocab.txt")
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in BASE_VOCAB[:-2]))
  output_dir = tmp_path / "out"
  assert adapt_vocab.main(_argv(base, output_dir, vocab=vocab)) == 0
  new = _read_vocab(str(output_dir / "vocab.txt"))
  assert new[:len(BASE_VOCAB) - 2] == [t if i not in (1, 2, 3) else new[i]
                                       for i, t in enumerate(BASE_VOCAB[:-2])]
  assert new[1:4] + new[len(BASE_VOCAB) - 2:len(BASE_VOCAB)] == ["鍪", "##℃", "‰", "琻", "￥"]
  grown = checkpoint.model_tensors(str(output_dir))[vocab_rows.WORD_EMBEDDINGS]
  assert grown.shape[0] == len(new)


def _untrusted_input(base, tmp_path, output_dir, problem):
  """(argv, expected words) of a vocab or config that is a FIFO, repeats a token or nests deep:
  refused in one line before the FIFO could block anything."""
  path = str(tmp_path / ("input.txt" if "vocab" in problem else "input.json"))
  if problem.endswith("fifo"):
    os.mkfifo(path)
    expected = "is a FIFO (named pipe), not a regular file"
  elif problem == "vocab_repeats":
    with open(path, "w", encoding="utf-8") as f:
      f.write("".join(t + "\n" for t in BASE_VOCAB + ["a"]))
    expected = "line %d repeats the token 'a'" % (len(BASE_VOCAB) + 1)
  else:
    with open(path, "w", encoding="utf-8") as f:
      f.write("[" * 100000 + "]" * 100000)
    expected = "nests 100000 levels deep"
  if "vocab" in problem:
    return _argv(base, output_dir, vocab=path), expected
  return _argv(base, output_dir, config=path), expected


@pytest.mark.parametrize("problem", ["vocab_size", "output_exists", "no_input", "bad_checkpoint",
                                     "vocab_fifo", "vocab_repeats", "config_fifo", "config_deep",
                                     "checkpoint_fifo"])
def test_bad_input_is_one_line_exit_2_nothing_written(base, adapted, tmp_path, capsys, problem):
  output_dir = tmp_path / "out"
  argv = _argv(base, output_dir)
  if problem.startswith(("vocab_f", "vocab_r", "config_")):
    argv, expected = _untrusted_input(base, tmp_path, output_dir, problem)
  elif problem == "checkpoint_fifo":  # TensorFlow would block opening a FIFO as the .index
    prefix = str(tmp_path / "fifo_model.ckpt")
    os.mkfifo(prefix + ".index")
    argv[0] = "--init_checkpoint=" + prefix
    expected = "fifo_model.ckpt.index is not a regular file"
  elif problem == "vocab_size":
    long_vocab = str(tmp_path / "long_vocab.txt")
    with open(long_vocab, "w", encoding="utf-8") as f:
      f.write("".join(t + "\n" for t in BASE_VOCAB + ["extra"]))
    argv = _argv(base, output_dir, vocab=long_vocab)
    expected = "has %d tokens" % (len(BASE_VOCAB) + 1)
  elif problem == "output_exists":
    argv = _argv(base, adapted)
    expected = "already holds"
  elif problem == "no_input":
    argv[3] = "--input_file=" + str(tmp_path / "missing*.txt")
    expected = "missing*.txt"
  else:
    argv[0] = "--init_checkpoint=" + str(tmp_path / "nothing" / "model.ckpt")
    expected = "cannot read checkpoint"
  assert adapt_vocab.main(argv) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith("adapt_vocab: error: ") and expected in err[0]
  if problem != "output_exists":
    assert not os.path.exists(str(output_dir))


# --- the library --------------------------------------------------------------------------------

def test_missing_role_pieces_name_what_wordpiece_lacks():
  vocab = {t: i for i, t in enumerate(BASE_VOCAB)}
  assert unk_census.missing_role_pieces("25℃", vocab) == [("℃", "##℃")]
  assert unk_census.missing_role_pieces("℃5", vocab) == [("℃", "℃")]
  assert unk_census.missing_role_pieces("abc", vocab) == []


def test_adding_the_counted_pieces_cures_every_unk_word(base, tmp_path):
  tokenizer = fast.FastFullTokenizer(base["vocab"], do_lower_case=True)
  census = unk_census.count(tokenizer, CORPUS.splitlines())
  assert census.unk_words["25℃"] == 1 and census.role_pieces["##℃"] == 3
  assert census.unknown_chars["℃"] == 4 and census.role_pieces["℃"] == 1
  vocab_plan = adapt.plan(BASE_VOCAB, census.role_pieces, min_count=1)
  path = str(tmp_path / "vocab.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in vocab_plan.tokens))
  assert _unk_count(path, CORPUS)[0] == 0


def test_fast_words_are_google_basic_tokenizer_words(base):
  tokenizer = fast.FastFullTokenizer(base["vocab"], do_lower_case=True)
  basic = google.BasicTokenizer(do_lower_case=True)
  for text in CORPUS.splitlines() + ["Héllo, World! 中文ＡＢＣ 3.5%", "\u200b控制\x00字符 ¥", ""]:
    assert tokenizer.words(text) == basic.tokenize(text), text


def test_plan_limits_and_order():
  counts = {"鍪": 5, "琻": 5, "‰": 9, "乂": 1}
  vocab_plan = adapt.plan(BASE_VOCAB, counts, min_count=2, max_new=2, append=True)
  assert vocab_plan.filled == ((1, "‰"), (2, "琻"))  # ties in code-point order
  assert vocab_plan.appended == () and len(vocab_plan.tokens) == len(BASE_VOCAB)
  assert [item[:2] for item in vocab_plan.left_out] == [("鍪", 5), ("乂", 1)]
  with pytest.raises(adapt.AdaptError, match="no \\[unusedN\\] slot"):
    adapt.plan([t for t in BASE_VOCAB if "unused" not in t], counts, append=False)


def test_grow_unk_init_copies_the_unk_row():
  table = np.arange(12, dtype=np.float32).reshape(4, 3)
  grown = vocab_rows.grow({vocab_rows.WORD_EMBEDDINGS: table}, 6, [1, 4, 5], [2, 3], unk_id=0,
                          init="unk")[vocab_rows.WORD_EMBEDDINGS]
  assert grown[[1, 4, 5]].tolist() == [table[0].tolist()] * 3
  assert grown[[0, 2, 3]].tobytes() == table[[0, 2, 3]].tobytes()
