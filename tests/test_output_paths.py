"""Issue #24 item 4: an output path that cannot be written is one line naming the flag, exit
status 2, before any work, in every tool and script; item 10: a disk that fills up mid-run is one
line too, and leaves no output. The tests run as root, where os.access says yes almost everywhere,
so the unwritable places are ones root cannot write either: /proc and /sys (no regular files can be
made there), a file where a directory is expected, a directory where a file is expected."""
import os
import resource
import subprocess
import sys

import pytest

from bert_fin import io_utils
from bert_fin.cli import build_vocab as vocab_cli
from bert_fin.cli import clean_corpus as clean_cli
from bert_fin.cli import export_hf as export_cli
from bert_fin.cli import import_hf as import_cli
from bert_fin.cli import pack_records as pack_cli
from bert_fin.cli import shard_corpus as shard_cli
from bert_fin.cli import tfrecord2idx as index_cli
from bert_fin.data.create import sentence_documents
from bert_fin.data.create import fast
from bert_fin.data.create import options as options_lib
from bert_fin.data.packing import pack_files
from bert_fin.interop import hf_folder
from bert_fin.text import clean
from bert_fin.text import shard
from bert_fin.tokenization import vocab as vocab_lib
from helpers import REPO
from helpers.data_tools import ANNOUNCEMENTS, one_error_line, run_program, write_text_corpus

VOCAB = os.path.join(REPO, "tests", "fixtures", "pretraining", "vocab.txt")
CORPUS = os.path.join(REPO, "tests", "fixtures", "pretraining", "corpus.jsonl")
HF_FOLDER = os.path.join(REPO, "tests", "fixtures", "hf_tiny", "encoder")

# (name, path template): {file} is an existing file, {dir} an existing directory
UNWRITABLE_FILES = [("proc", "/proc/bert_fin_no_such_dir/out"), ("sys", "/sys/bert_fin_out"),
                    ("under_a_file", "{file}/out"), ("a_directory", "{dir}")]
UNWRITABLE_DIRS = [("proc", "/proc/bert_fin_no_such_dir/out"), ("sys", "/sys/bert_fin_out"),
                   ("under_a_file", "{file}/out"), ("a_file", "{file}")]


def _no_work(*args, **kwargs):
  raise AssertionError("work started before the output path was checked")


# tool, main, argv (with {out}), the first work the tool does (must not run), kind of output
TOOLS = [
    ("clean_corpus", clean_cli.main, ["--output", "{out}", CORPUS], (clean, "clean_corpus")),
    ("clean_corpus", clean_cli.main, ["--output", "{tmp}/ok.jsonl", "--stats", "{out}", CORPUS],
     (clean, "clean_corpus")),
    ("clean_corpus", clean_cli.main, ["--output", "{tmp}/ok.jsonl", "--seen_manifest", "{out}",
                                      CORPUS], (clean, "clean_corpus")),
    ("shard_corpus", shard_cli.main, ["--num_shards", "8", "--output_prefix", "{out}", CORPUS],
     (shard, "shard_corpus")),
    ("build_vocab", vocab_cli.main, ["--output", "{out}", CORPUS], (vocab_lib, "check_inputs")),
    ("pack_records", pack_cli.main, ["--input_file", "{file}", "--output_file", "{out}"],
     (pack_files, "files_layout")),
    ("tfrecord2idx", index_cli.main, ["{file}", "{out}"], (index_cli, "index_many")),
]
DIR_TOOLS = [
    ("tfrecord2idx", index_cli.main, ["--index_dir", "{out}", "{file}"], (index_cli, "index_many")),
    ("bert-fin-export-hf", export_cli.main, ["--bert_config_file", "{tmp}/none.json",
                                             "--init_checkpoint", "{tmp}/none.ckpt",
                                             "--vocab_file", VOCAB, "--output_dir", "{out}"],
     None),
    ("bert-fin-import-hf", import_cli.main, ["--hf_dir", HF_FOLDER, "--output_dir", "{out}"],
     (hf_folder, "read_folder")),
]


def _places(tmp_path):
  (tmp_path / "a_file").write_text("x")
  (tmp_path / "a_dir").mkdir()
  return dict(file=str(tmp_path / "a_file"), dir=str(tmp_path / "a_dir"), tmp=str(tmp_path))


def _check_refused(capsys, status, prog, out):
  err = capsys.readouterr().err.strip()
  assert status == 2, err
  assert len(err.splitlines()) == 1 and err.startswith(prog + ": error: "), err
  assert out in err


def _run(tmp_path, monkeypatch, capsys, tool, template):
  prog, main, argv, work = tool
  places = _places(tmp_path)
  out = template.format(**places)
  if work:
    monkeypatch.setattr(*work, _no_work)
  status = main([a.format(out=out, **places) for a in argv])
  _check_refused(capsys, status, prog, out)
  assert sorted(os.listdir(tmp_path)) == ["a_dir", "a_file"]  # nothing made, no probe left


def _cases(tools, places):
  """(tool, place) pairs and ids; a prefix (--output_prefix: PREFIX-00000-of-00008.jsonl) may
  name a directory, so that case is not one for it."""
  cases = [(tool, place, "%s%s-%s" % (tool[0], tool[2][0], name)) for tool in tools
           for name, place in places
           if not (name == "a_directory" and "--output_prefix" in tool[2])]
  return dict(argvalues=[c[:2] for c in cases], ids=[c[2] for c in cases])


@pytest.mark.parametrize("tool,place", **_cases(TOOLS, UNWRITABLE_FILES))
def test_every_tool_refuses_an_unwritable_output_file_first(tmp_path, monkeypatch, capsys, tool,
                                                           place):
  _run(tmp_path, monkeypatch, capsys, tool, place)


@pytest.mark.parametrize("tool,place", **_cases(DIR_TOOLS, UNWRITABLE_DIRS))
def test_every_tool_refuses_an_unwritable_output_dir_first(tmp_path, monkeypatch, capsys, tool,
                                                          place):
  _run(tmp_path, monkeypatch, capsys, tool, place)


@pytest.mark.parametrize("place", [t for _, t in UNWRITABLE_FILES],
                         ids=[n for n, _ in UNWRITABLE_FILES])
def test_create_pretraining_data_refuses_before_reading(tmp_path, monkeypatch, place):
  places = _places(tmp_path)
  monkeypatch.setattr(sentence_documents, "iter_documents", _no_work)
  out = place.format(**places)
  for shards in (1, 4) if place != "{dir}" else (1,):  # PREFIX-0000i-of-00004 beside a dir is fine
    options = options_lib.make_options(input_file=CORPUS, output_file=out, vocab_file=VOCAB,
                                       num_output_files=shards, progress=False)
    with pytest.raises(ValueError, match="--output_file %s" % out):
      fast.run(options)


@pytest.mark.parametrize("script,argv", [
    ("create_pretraining_data.py", ["--input_file=" + CORPUS, "--vocab_file=" + VOCAB,
                                    "--output_file=/sys/bert_fin_out"]),
    ("run_classifier.py", ["--task_name=jsonl", "--data_dir=samples/sentiment", "--do_train",
                           "--bert_config_file=/nonexistent.json", "--vocab_file=" + VOCAB,
                           "--output_dir=/sys/bert_fin_out"]),
    ("run_ner.py", ["--data_dir=samples/ner", "--do_train", "--bert_config_file=/nonexistent.json",
                    "--vocab_file=" + VOCAB, "--output_dir=/sys/bert_fin_out"]),
    ("extract_features.py", ["--input_file=" + VOCAB, "--output_file=/sys/bert_fin_out",
                             "--init_checkpoint=/nonexistent", "--vocab_file=" + VOCAB,
                             "--bert_config_file=/nonexistent.json"]),
])
def test_the_scripts_exit_2_with_one_line(script, argv):
  result = subprocess.run([sys.executable, os.path.join(REPO, script)] + argv, cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
  assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
  assert len(errors) == 1 and "/sys/bert_fin_out is not writable" in errors[0], result.stderr


def test_the_check_creates_nothing_and_names_what_is_wrong(tmp_path):
  places = _places(tmp_path)
  io_utils.check_output_dir(str(tmp_path / "new" / "deeper"), "--output_dir")
  io_utils.check_output_files([str(tmp_path / "new" / "file.txt")], "--output")
  assert sorted(os.listdir(tmp_path)) == ["a_dir", "a_file"]
  with pytest.raises(ValueError, match="a_file is a file, not a directory"):
    io_utils.check_output_dir(places["file"] + "/x/y", "--output_dir")
  with pytest.raises(ValueError, match="--output .*a_dir is a directory; give a file path"):
    io_utils.check_output_files([places["dir"]], "--output")
  io_utils.check_output_files(["gs://bucket/x"], "--output")  # remote: left to its filesystem


# ---- issue 24 item 10: a full disk ---------------------------------------------------------------
def _limit_file_size():
  resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))  # bytes; Python ignores SIGXFSZ


@pytest.mark.parametrize("script,argv", [
    ("tools/clean_corpus.py", ["--no_progress", "--output", "{out}/clean.jsonl", "{corpus}"]),
    ("create_pretraining_data.py", ["--input_file={corpus}", "--output_file={out}/train",
                                    "--vocab_file=" + VOCAB, "--noprogress", "--dupe_factor=20",
                                    "--max_seq_length=32", "--max_predictions_per_seq=5"]),
])
def test_a_full_disk_is_one_line_and_leaves_no_output(tmp_path, script, argv):
  corpus = tmp_path / "news.txt"
  write_text_corpus(corpus, [[ANNOUNCEMENTS[i % 60] + ANNOUNCEMENTS[(i + 7) % 60] for _ in range(3)]
                        for i in range(400)])
  out = tmp_path / "out"
  argv = [a.format(out=out, corpus=corpus) for a in argv]
  result = run_program(script, argv, preexec_fn=_limit_file_size)
  assert result.returncode == 2, result.stderr[-2000:]
  line = one_error_line(result.stderr, os.path.basename(script)[:-3])
  assert "File too large" in line and "free space or write elsewhere" in line
  assert not out.exists() or os.listdir(out) == []  # nothing half-written, no temp dir
