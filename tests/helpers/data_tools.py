"""The data tools' test inputs and how their outputs are compared, shared by the tests that run
them on one process, on several ranks of one host and on several (fake) hosts."""
import glob
import json
import os
import random
import signal
import time

from helpers import PRETRAINING_FIXTURES

VOLATILE_STATS = ("seconds", "instances_per_second")


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
