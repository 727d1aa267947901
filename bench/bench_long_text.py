"""Time and peak memory of one long text in run_classifier's encoding: bounded vs whole.

  python bench/bench_long_text.py [--sizes 100000,1000000,5000000] [--quick]

A synthetic Chinese document (CJK characters, full-width punctuation, Latin and digit words) of
each size is encoded, each in a process of its own (peak RSS: the kernel's VmHWM), as
run_classifier does at --max_seq_length 128 with the fast tokenizer:
  whole       the baseline, the text tokenized whole then cut to its head (before
              tokenization/bounded.py: what every mode paid);
  head        --long_text=head (bounded: the blocks its first tokens need);
  head_tail   --long_text=head_tail (blocks from both ends);
  chunks      --long_text=chunks (every token, as int32 ids, a block at a time).
Ratios printed: each mode's seconds and peak RSS above an importing-only process / the whole
baseline's at the same size; and for chunks, seconds per 10^6 characters / that at the
smallest size (1.0: linear in the text's length). ~1 min with the defaults.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))

import _quick  # noqa: E402  (bench/_quick.py)
from helpers import tokenizer_vocab  # noqa: E402

QUICK = dict(sizes="10000,40000")
MODES = ("whole", "head", "head_tail", "chunks")
# argv: repo, vocab, mode ("none": import only), size; prints [seconds, peak MB, rows].
ENCODER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from bert_fin import tokenization
from bert_fin.finetune.classify import features, long_text, tasks
tokenizer = tokenization.make_tokenizer(sys.argv[2], do_lower_case=True)
unit = "沪深股市上涨，iphone 2019年 中国人民银行发布数据。"
mode, size = sys.argv[3], int(sys.argv[4])
text = unit * (size // len(unit) + 1)
start, rows = time.time(), 0
if mode == "whole":
  rows = len(tokenizer.tokenize_batch([text])[0][:long_text.capacity(128)]) and 1
elif mode != "none":
  encoded = features.encode([tasks.Example("e", text, None, "a")], ["a", "b"], tokenizer, 128,
                            long_text.Options(mode, None, None, long_text.MEAN))
  rows = len(encoded.doc_index)
with open("/proc/self/status") as f:
  peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
print(json.dumps([time.time() - start, peak, rows]))
"""


def measure(vocab, mode, size):
  proc = subprocess.run([sys.executable, "-c", ENCODER, REPO, vocab, mode, str(size)],
                        capture_output=True, text=True, timeout=1800,
                        env=dict(os.environ, OMP_NUM_THREADS="1"))
  if proc.returncode:
    raise SystemExit("%s at %d characters failed: %s" % (mode, size, proc.stderr[-2000:]))
  return json.loads(proc.stdout)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", default="100000,1000000,5000000",
                      help="text lengths in characters, comma-separated")
  args = _quick.parse_args(parser, argv, QUICK)
  sizes = [int(size) for size in args.sizes.split(",")]
  with tempfile.TemporaryDirectory() as tmp:
    vocab = tokenizer_vocab.write_vocab(__import__("pathlib").Path(tmp))
    _, base_mb, _ = measure(vocab, "none", sizes[0])
    print("importing only: %.0f MB" % base_mb)
    per_mchar = None
    for size in sizes:
      figures = {mode: measure(vocab, mode, size) for mode in MODES}
      whole_s, whole_mb, _ = figures["whole"]
      print("%9d characters: whole %.2f s %.0f MB" % (size, whole_s, whole_mb))
      for mode in MODES[1:]:
        seconds, peak, rows = figures[mode]
        print("  %-9s %7.2f s (x%.3f of whole)  %6.0f MB (x%.3f of whole above importing)  "
              "%d rows" % (mode, seconds, seconds / whole_s, peak,
                           max(peak - base_mb, 0.0) / max(whole_mb - base_mb, 1.0), rows))
      chunks_rate = figures["chunks"][0] / size * 1e6
      per_mchar = per_mchar or chunks_rate
      print("  chunks: %.2f s per 10^6 characters (x%.2f of the smallest size's)" % (
          chunks_rate, chunks_rate / per_mchar))


if __name__ == "__main__":
  main()
