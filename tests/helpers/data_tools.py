"""The data tools' test inputs, how the tools are run and their outputs and refusals checked, shared
by the tests that run them on one process, on several ranks of one host and on several (fake) hosts,
and by their fault tests (small generated news text, JSON Lines, `prog: error:` lines)."""
import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

from helpers import PRETRAINING_FIXTURES, REPO

VOLATILE_STATS = ("seconds", "instances_per_second")

# Generated financial news sentences, each different: 200 quarterly results, 60 announcements, and
# 6 newsflash records that hold their text under "content", not "sentences".
EARNINGS_REPORTS = ["招商银行（600036）公布第%d季度业绩，净利润同比增长%d.5%%，不良贷款率保持稳定。"
                    % (i % 4 + 1, i) for i in range(200)]
ANNOUNCEMENTS = ["宁德时代发布第%d份公告，公司经营情况良好，订单充足。" % i for i in range(60)]
NEWSFLASH = [{"title": "快讯%d" % i, "content": ANNOUNCEMENTS[i], "publish_time": "2025-06-01"}
             for i in range(6)]


def write_text_corpus(path, documents):
  """Writes documents (lists of sentences) at the pathlib path in google's text format: one
  sentence a line, a blank line after each document."""
  path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n\n", encoding="utf-8")


def write_jsonl(path, records):
  """Writes records (JSON-able objects) at the pathlib path, one UTF-8 JSON line each."""
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                  encoding="utf-8")


def read_jsonl(path):
  """The objects of a JSON Lines file, in order."""
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def run_program(script, argv, **kwargs):
  """REPO/script with argv in a subprocess (cwd REPO, this checkout's bert_fin, TensorFlow's C++
  log off), text output captured; kwargs go to subprocess.run. The CompletedProcess."""
  return subprocess.run([sys.executable, os.path.join(REPO, script)] + argv, capture_output=True,
                        text=True, timeout=300, cwd=REPO,
                        env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"), **kwargs)


def one_error_line(stderr, prog):
  """Asserts that stderr holds no traceback and exactly one line mentioning an error, and that it
  reads `prog: error: ...`; returns that line."""
  lines = [line for line in stderr.splitlines() if "error" in line.lower()]
  assert "Traceback" not in stderr, stderr
  assert len(lines) == 1 and lines[0].startswith(prog + ": error: "), stderr
  return lines[0]


def file_tree(directory):
  """{relative path: bytes} of every file under directory (stats JSON less its timings
  VOLATILE_STATS and with the directory's own name made neutral)."""
  out = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        data = f.read()
      if name.endswith(".json"):
        stats = json.loads(data.decode("utf-8").replace(directory, "DIR"))
        data = json.dumps({k: v for k, v in stats.items() if k not in VOLATILE_STATS},
                          sort_keys=True)
      out[os.path.relpath(path, directory)] = data
  return out


def write_text_inputs(directory):
  """The fixture corpus as 3 google-format text files in directory that end without a blank line
  (each file's last document continues into the next); returns the --input_file value naming
  them plus the fixture's JSON Lines corpus."""
  with open(os.path.join(PRETRAINING_FIXTURES, "corpus.txt"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  for i, chunk in enumerate((lines[:7], lines[7:15], lines[15:])):
    with open(os.path.join(str(directory), "part-%d.txt" % i), "w", encoding="utf-8") as f:
      f.write("\n".join(chunk) + "\n")
  return ",".join([os.path.join(str(directory), "part-*.txt"),
                   os.path.join(PRETRAINING_FIXTURES, "corpus.jsonl")])


def create_args(inputs, output, *extra):
  """create_pretraining_data flags for the fixture vocab and user dictionary: tiny sequences,
  3 output files, one worker, blocks of one document, then extra."""
  return ["--input_file=%s" % inputs, "--output_file=%s" % output,
          "--vocab_file=%s" % os.path.join(PRETRAINING_FIXTURES, "vocab.txt"),
          "--do_whole_word_mask",
          "--user_dict=%s" % os.path.join(PRETRAINING_FIXTURES, "user_dict.txt"),
          "--max_seq_length=48", "--max_predictions_per_seq=8", "--num_output_files=3",
          "--num_workers=1", "--block_docs=1", "--shuffle_window=5", "--noprogress"] + list(extra)


def tiny_options(tmp_path, input_file, **overrides):
  """create_pretraining_data options (bert_fin.data.create.options) for the fixture vocab: sequences of
  32, 5 predictions, one dupe, one worker, no progress bar, output in tmp_path/records/train."""
  from bert_fin.data.create import options as options_lib  # pylint: disable=import-outside-toplevel
  base = dict(input_file=str(input_file), output_file=str(tmp_path / "records" / "train"),
              vocab_file=os.path.join(PRETRAINING_FIXTURES, "vocab.txt"), max_seq_length=32,
              max_predictions_per_seq=5, dupe_factor=1, progress=False, num_workers=1)
  base.update(overrides)
  return options_lib.make_options(**base)


# The killed-rank tests: 240 documents / 3 a block = 80 blocks in KILL_TEST_SEGMENTS segments of 5,
# so at -np 2 rank 1 makes segments 8..15; dupe_factor 20 and the Python kernel make that slow
# enough to kill it midway.
KILL_TEST_SEGMENTS = 16


def write_kill_test_corpus(path):
  """240 JSON Lines documents of 8 fixture sentences each (seeded) at path."""
  rng = random.Random(0)
  with open(os.path.join(PRETRAINING_FIXTURES, "corpus.txt"), encoding="utf-8") as f:
    sentences = [line for line in f.read().splitlines() if line]
  with open(str(path), "w", encoding="utf-8") as f:
    for i in range(240):
      f.write(json.dumps({"id": i, "sentences": rng.sample(sentences, 8)}, ensure_ascii=False)
              + "\n")


def kill_test_args(corpus, output):
  return create_args(corpus, output, "--dupe_factor=20", "--kernel=python", "--block_docs=3")


def kill_rank_1_once_it_made_a_part(proc, output_dir, rank_1_pid, timeout=300):
  """Polls output_dir's parts while proc (mpirun -np 2 of create_pretraining_data) runs; once
  rank 1 has written one of its parts (the second half), SIGKILLs rank_1_pid(). Returns the
  segments of rank 1 whole at the kill ([] when rank 1 or the job ended, or time ran out, first)."""
  deadline = time.time() + timeout
  while time.time() < deadline and proc.poll() is None:
    made = glob.glob(os.path.join(str(output_dir), ".bert_fin-tmp-parts-*", "segment-*.part"))
    second_half = sorted(n for n in (int(os.path.basename(p)[8:14]) for p in made)
                         if n >= KILL_TEST_SEGMENTS // 2)
    if second_half:
      pid = rank_1_pid()
      if pid is None:  # rank 1 already gone: nothing was killed
        return []
      os.kill(pid, signal.SIGKILL)
      return second_half
    time.sleep(0.01)
  return []
