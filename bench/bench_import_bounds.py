"""Peak memory and time of the transformers import on hostile folders vs a legitimate model.

  python bench/bench_import_bounds.py [--layers 4] [--hidden 256] [--vocab 21128] [--quick]

Builds, in a temp directory, a legitimate random BertForPreTraining folder (model.safetensors,
and the same weights as a zip pytorch_model.bin assembled without torch) and the bombs of
tests/helpers/hostile_folders.py (each claims gigabytes from a small or sparse file, on the
tiny fixture's config.json), then reads each folder in a process of its own and prints its
peak RSS (the kernel's VmHWM: getrusage's ru_maxrss would start from the forking parent's) and
wall time:
  baseline            a reading process that imports the reader and reads nothing
  read .safetensors   hf_folder.read_files (numpy only) of the legitimate folder
  read .bin           the same weights from pytorch_model.bin
  <bomb>              hf_folder.read_files, refused
  layers 10^6 (CLI)   tools/import_hf.py refusing num_hidden_layers 10^6 (before TensorFlow)
  CLI baseline        a process importing what the CLI converts with (TensorFlow, model_fn)
  import ... (CLI)    tools/import_hf.py of the legitimate folders: read, convert, write the
                      google-named checkpoint
The tied decoder weight is stored a second time in the files, as transformers saves it.
Ratios: a bomb's peak RSS / the baseline's (1.00x: nothing allocated for what it claimed); the
legitimate runs' RSS above their baseline / the model's float32 size (decoder copy left out).
~2 min with the defaults (--quick: a 2-layer H=32 model, three bombs, no CLI runs).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))

import numpy as np  # noqa: E402
from safetensors import numpy as safetensors_numpy  # noqa: E402

import _quick  # noqa: E402  (bench/_quick.py)
from bert_fin.interop import hf_names  # noqa: E402
from helpers import hostile_folders as hostile  # noqa: E402

QUICK = dict(layers=2, hidden=32, heads=4, intermediate=37, vocab=100, bombs=3, cli=False)
BOMBS = ["memo index 2^27", "BINBYTES8 2^62", "tuple key 10^6 deep", "shared tuple key 2^40",
         "stride 0", "storage 2^40 elements", "zip bomb data.pkl", "zip member lies 2 GiB",
         "shape 2^40 elements (sparse)", "sparse 1 GB tensor", "header length 2^62",
         "header 10^5 deep", "LFS pointer", "config 10^5 deep"]
# Reads the folder named (none: imports the reader only); prints [result, seconds, peak MB].
READER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from bert_fin.interop import hf_folder
start, result = time.time(), "nothing read"
if len(sys.argv) > 2:
  try:
    result = "read %d tensors" % len(hf_folder.read_files(sys.argv[2]).tensors)
  except ValueError as e:
    result = "refused: " + str(e).replace(sys.argv[2] + "/", "")
with open("/proc/self/status") as f:
  peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
print(json.dumps([result, time.time() - start, peak]))
"""
# Runs a program (argv) and prints its peak RSS: the child's, from wait4's rusage.
CHILD_PEAK = r"""
import json, os, resource, subprocess, sys, time
start = time.time()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
_, status, usage = os.wait4(proc.pid, 0)
err = proc.stderr.read().decode().strip().splitlines()
print(json.dumps([os.waitstatus_to_exitcode(status), err[-1][:90] if err else "",
                  time.time() - start, usage.ru_maxrss / 1024]))
"""


def write_legit(folder, args):
  """A random BertForPreTraining folder: config.json, vocab.txt, model.safetensors; and
  folder + "_bin" with the same weights as a zip pytorch_model.bin. Returns the float32 bytes."""
  config = types.SimpleNamespace(vocab_size=args.vocab, hidden_size=args.hidden,
                                 num_hidden_layers=args.layers, intermediate_size=args.intermediate,
                                 max_position_embeddings=512, type_vocab_size=2)
  shapes = hf_names.expected_shapes(config, hf_names.PRETRAINING)
  rng = np.random.RandomState(0)
  tensors = {name: rng.standard_normal(shape).astype(np.float32) * 0.02
             for name, shape in shapes.items()}
  tensors["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"]
  tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"]  # tied, as saved
  hf_config = {"model_type": "bert", "hidden_act": "gelu", "layer_norm_eps": 1e-12,
               "num_attention_heads": args.heads, "hidden_dropout_prob": 0.1,
               "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
               **{k: v for k, v in vars(config).items()}}
  for directory in (folder, folder + "_bin"):
    os.makedirs(directory)
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
      json.dump(hf_config, f)
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
      f.write("".join("t%d\n" % n for n in range(args.vocab)))
  safetensors_numpy.save_file(tensors, os.path.join(folder, "model.safetensors"))
  records = {str(n): tensors[name].tobytes() for n, name in enumerate(tensors)}
  entries = {name: hostile.tensor(str(n), tensors[name].size, tensors[name].shape,
                                  _strides(tensors[name].shape))
             for n, name in enumerate(tensors)}
  hostile.write_bin(folder + "_bin", hostile.state_dict(entries), records)
  return sum(t.nbytes for name, t in tensors.items() if not name.startswith("cls.predictions.d"))


def _strides(shape):
  strides, step = [], 1
  for n in reversed(shape):
    strides.insert(0, step)
    step *= n
  return strides


def read(folder=None):
  argv = [sys.executable, "-c", READER, REPO] + ([folder] if folder else [])
  proc = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
  if proc.returncode:
    raise SystemExit("reading %s failed: %s" % (folder, proc.stderr[-2000:]))
  return json.loads(proc.stdout)


def run_cli(hf_dir, output_dir):
  """(result, seconds, peak MB) of tools/import_hf.py; hf_dir None: a process importing what
  the CLI imports to convert (TensorFlow, the pretraining graph's builder), doing nothing."""
  program = ([os.path.join(REPO, "tools", "import_hf.py"), "--hf_dir", hf_dir, "--output_dir",
              output_dir] if hf_dir else
             ["-c", "import sys; sys.path.insert(0, %r); from bert_fin.training.graph import model_fn; "
              "from bert_fin.modeling import checkpoint" % REPO])
  argv = [sys.executable, "-c", CHILD_PEAK, sys.executable] + program
  proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
  status, err, seconds, peak = json.loads(proc.stdout)
  return ("exit %d%s" % (status, ": " + err.replace(hf_dir + "/", "") if status else ""),
          seconds, peak)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--layers", type=int, default=4)
  parser.add_argument("--hidden", type=int, default=256)
  parser.add_argument("--heads", type=int, default=4)
  parser.add_argument("--intermediate", type=int, default=1024)
  parser.add_argument("--vocab", type=int, default=21128)
  parser.add_argument("--bombs", type=int, default=len(BOMBS), help="how many of BOMBS")
  parser.add_argument("--cli", type=lambda v: v.lower() in ("1", "true", "yes"), default=True,
                      help="also run tools/import_hf.py (imports TensorFlow)")
  args = _quick.parse_args(parser, argv, QUICK)
  with tempfile.TemporaryDirectory() as work:
    model_bytes = write_legit(os.path.join(work, "legit"), args)
    baseline = read()
    print("model: %d layers, H=%d, vocab %d: %.1f MB of float32 weights" % (
        args.layers, args.hidden, args.vocab, model_bytes / 1e6))
    print("%-32s %-62s %7s %9s" % ("case", "result", "seconds", "peak MB"))
    print("%-32s %-62s %7.2f %9.1f" % ("baseline (reader imported)", baseline[0], baseline[1],
                                       baseline[2]))
    for name, folder in (("read .safetensors", "legit"), ("read .bin", "legit_bin")):
      result, seconds, peak = read(os.path.join(work, folder))
      print("%-32s %-62s %7.2f %9.1f  %.2fx the float32 model above the baseline" % (
          name, result, seconds, peak, (peak - baseline[2]) * 2 ** 20 / model_bytes))
    cases = {case.name: case for case in hostile.CASES}
    for n, name in enumerate(BOMBS[:args.bombs]):
      result, seconds, peak = read(hostile.make(work, cases[name], n))
      print("%-32s %-62s %7.2f %9.1f  x%.2f the baseline" % (name, result[:62], seconds, peak,
                                                             peak / baseline[2]))
    if args.cli:
      folder = hostile.make(work, cases["layers 10^6"], len(BOMBS))
      result, seconds, peak = run_cli(folder, os.path.join(work, "out_layers"))
      print("%-32s %-62s %7.2f %9.1f  x%.2f the baseline (no TensorFlow)" % (
          "layers 10^6 (CLI)", result[:62], seconds, peak, peak / baseline[2]))
      _, seconds, cli_base = run_cli(None, None)
      print("%-32s %-62s %7.2f %9.1f" % ("CLI baseline", "TensorFlow and the converter imported",
                                         seconds, cli_base))
      for name, folder in (("import .safetensors (CLI)", "legit"),
                           ("import .bin (CLI)", "legit_bin")):
        result, seconds, peak = run_cli(os.path.join(work, folder),
                                        os.path.join(work, "out_" + folder))
        print("%-32s %-62s %7.2f %9.1f  %.2fx the float32 model above the CLI baseline" % (
            name, result, seconds, peak, (peak - cli_base) * 2 ** 20 / model_bytes))
  return 0


if __name__ == "__main__":
  sys.exit(main())
