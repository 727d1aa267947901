"""The data tools under `mpirun -np 2` on one host write exactly what one process (-np 1) writes:
create_pretraining_data (static and dynamic masking, google-format documents continued across
files), clean_corpus, pack_records and tfrecord2idx; a rank killed mid-run leaves only whole part
files and no output, and the same command run again finishes the job with the same bytes."""
import glob
import json
import os
import subprocess

import pytest

from bert_fin.data.multihost import parts
from bert_fin.launch import mpirun_command, python_command
from helpers import PRETRAINING_FIXTURES as FIXTURES
from helpers import REPO, TESTS
from helpers import data_tools
from helpers.data_tools import create_args, file_tree, write_text_inputs
from helpers.ranks import rank_pid

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpirun jobs of 1 and 2 ranks: make test-slow



def _run(np_, script, *args, check=True):
  command = mpirun_command(np_, python_command(os.path.join(REPO, script), *args))
  proc = subprocess.run(command, capture_output=True, text=True, timeout=600,
                        env=dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3"))
  if check:
    assert proc.returncode == 0, "%s failed:\n%s\n%s" % (script, proc.stdout[-3000:],
                                                         proc.stderr[-5000:])
  return proc


@pytest.fixture(scope="module")
def text_inputs(tmp_path_factory):
  return write_text_inputs(tmp_path_factory.mktemp("inputs"))


@pytest.mark.parametrize("masking", ["static", "dynamic"])
def test_create_pretraining_data_2_ranks_write_what_1_writes(tmp_path, text_inputs, masking):
  extra = ["--masking=%s" % masking, "--dupe_factor=3"]
  for np_ in (1, 2):
    _run(np_, "create_pretraining_data.py",
         *create_args(text_inputs, tmp_path / str(np_) / "train", *extra))
  one, two = file_tree(str(tmp_path / "1")), file_tree(str(tmp_path / "2"))
  assert sorted(one) == ["train-0000%d-of-00003.tfrecord" % i for i in range(3)] + [
      "train.stats.json"]
  assert one == two  # records and stats; the parts directory is gone
  stats = json.loads(one["train.stats.json"])
  assert stats["instances"] > 20 and stats["documents_read"] == stats["documents_used"] + sum(
      stats["documents_skipped"].values())


def test_a_bad_input_stops_every_rank_with_one_line(tmp_path):
  proc = _run(2, "create_pretraining_data.py",
              *create_args(str(tmp_path / "missing-*.txt"), tmp_path / "out" / "train"),
              check=False)
  assert proc.returncode == 2
  errors = [line for line in proc.stderr.splitlines() if "error:" in line]
  assert len(errors) == 1 and "matches no file" in errors[0], proc.stderr[-2000:]
  assert not os.path.exists(tmp_path / "out")


def test_a_killed_rank_leaves_whole_parts_and_a_rerun_finishes(tmp_path):
  corpus = tmp_path / "corpus.jsonl"
  data_tools.write_kill_test_corpus(corpus)
  args = data_tools.kill_test_args(str(corpus), tmp_path / "two" / "train")
  _run(1, "create_pretraining_data.py", *data_tools.kill_test_args(str(corpus),
                                                                    tmp_path / "one" / "train"))
  command = mpirun_command(2, python_command(os.path.join(REPO, "create_pretraining_data.py"),
                                             *args))
  proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
  second_half = data_tools.kill_rank_1_once_it_made_a_part(
      proc, tmp_path / "two", lambda: rank_pid(1, str(tmp_path / "two")))
  proc.communicate(timeout=120)  # the job ends: no rank waits for the dead one
  assert second_half and len(second_half) < 8, "rank 1 finished before the kill: %s" % second_half
  assert proc.returncode != 0
  left = os.listdir(tmp_path / "two")
  assert not [name for name in left if not name.startswith(".bert_fin-tmp-")], left
  for path in glob.glob(str(tmp_path / "two" / ".bert_fin-tmp-parts-*" / "*.part")):
    assert parts.is_whole(path)  # under a part's name only whole parts
  rerun = _run(2, "create_pretraining_data.py", *args)
  assert "already made by an earlier run, kept" in rerun.stderr
  assert file_tree(str(tmp_path / "one")) == file_tree(str(tmp_path / "two"))
  assert sorted(os.listdir(tmp_path / "two")) == sorted(file_tree(str(tmp_path / "one")))


def test_clean_corpus_2_ranks_write_what_1_writes(tmp_path):
  inputs = [os.path.join(TESTS, "fixtures", "corpus"), os.path.join(FIXTURES, "corpus.txt"),
            os.path.join(FIXTURES, "corpus.jsonl")]
  for np_ in (1, 2):
    out = tmp_path / str(np_)
    _run(np_, "tools/clean_corpus.py", "--no_progress", "--boilerplate_min_docs=2",
         "--text_format=line", "--seen_manifest=%s" % (out / "seen.bin"),
         "--output=%s" % (out / "clean.jsonl"), *inputs)
  one, two = file_tree(str(tmp_path / "1")), file_tree(str(tmp_path / "2"))
  assert sorted(one) == ["clean.jsonl", "clean.jsonl.stats.json", "seen.bin"] and one == two
  assert json.loads(one["clean.jsonl.stats.json"])["documents_out"] > 5


def _signature_file(directory):
  """The content of directory/seen.bin.minhash: signatures, ids, outputs relative to directory."""
  from bert_fin.text.dedup import seen_manifest  # pylint: disable=import-outside-toplevel
  from bert_fin.text.dedup import seen_signatures  # pylint: disable=import-outside-toplevel
  signatures = seen_signatures.SeenSignatures(
      seen_manifest.SeenManifest(str(directory / "seen.bin")), 128)
  return ([chunk.tolist() for chunk in signatures.signature_chunks()],
          signatures.ids(range(len(signatures))),
          [os.path.relpath(block.output, str(directory)) for block in signatures.blocks])


def test_clean_corpus_near_dup_2_ranks_write_what_1_writes(tmp_path):
  """Reprints spread over two files (one a rank): the same output, report, manifest and
  signatures for -np 1 and -np 2, over two batches (the second compared with the first)."""
  docs = ["".join(block.split()) for block in open(os.path.join(FIXTURES, "corpus.txt"),
                                                   encoding="utf-8").read().split("\n\n")]
  (tmp_path / "a.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
  (tmp_path / "b.txt").write_text("\n".join("新华社北京1月5日电" + d for d in docs[::2]) + "\n",
                                  encoding="utf-8")
  (tmp_path / "c.txt").write_text("\n".join(d + "（责任编辑：王五）" for d in docs[1::2]) + "\n",
                                  encoding="utf-8")
  for np_ in (1, 2):
    out = tmp_path / str(np_)
    for batch, inputs in (("one", ["a.txt", "b.txt"]), ("two", ["c.txt"])):
      _run(np_, "tools/clean_corpus.py", "--no_progress", "--text_format=line",
           "--near_dup_threshold=0.7", "--seen_manifest=%s" % (out / "seen.bin"),
           "--near_dup_report=%s" % (out / (batch + ".report")),
           "--output=%s" % (out / (batch + ".jsonl")), *[str(tmp_path / i) for i in inputs])
  one, two = file_tree(str(tmp_path / "1")), file_tree(str(tmp_path / "2"))
  # the signature file names each batch's output by its absolute path: compared by content
  assert _signature_file(tmp_path / "1") == _signature_file(tmp_path / "2")
  assert one.pop("seen.bin.minhash") and two.pop("seen.bin.minhash")
  assert one == two and sorted(one) == sorted(
      ["seen.bin"] + ["%s%s" % (batch, suffix) for batch in ("one", "two")
                      for suffix in (".jsonl", ".jsonl.stats.json", ".report")])
  removed = [json.loads(one[batch + ".jsonl.stats.json"])["filtered"].get("near_duplicate", 0)
             for batch in ("one", "two")]
  assert removed == [len(docs[::2]), len(docs[1::2])], removed  # every reprint, no original


def test_pack_records_and_tfrecord2idx_2_ranks_write_what_1_writes(tmp_path, text_inputs):
  _run(1, "create_pretraining_data.py",
       *create_args(text_inputs, tmp_path / "records" / "train", "--dupe_factor=5"))
  for np_ in (1, 2):
    out = tmp_path / str(np_)
    _run(np_, "tools/pack_records.py", "--input_file=%s" % (tmp_path / "records" / "train-*"),
         "--output_file=%s" % (out / "packed"), "--num_output_files=2", "--window_size=7")
    _run(np_, "tools/tfrecord2idx.py", str(out))
  one, two = file_tree(str(tmp_path / "1")), file_tree(str(tmp_path / "2"))
  assert len([name for name in one if name.endswith(".tfrecord.idx")]) == 2
  assert json.loads(one["packed.stats.json"])["windows"] > 2
  assert one == two
