"""The transformers import as a hardened parser (bert_fin/guard/untrusted.py and its readers):
every hostile or broken folder of helpers/hostile_folders.py (pickle, zip and safetensors bombs,
code that must never run, deep nesting, FIFOs, symlinks, bad configs, vocabs, LFS pointers, HTML
pages, truncated downloads) is refused in one line naming the file, within seconds, by a reader
process under a 1 GiB address-space limit that never imports TensorFlow, and legitimate layouts
(a hub cache snapshot, links inside the folder, tokenizer.json, legacy .bin) still read; the real
tools/import_hf.py exits 2 with one line on eight of them (the 10^6-deep tuple key that segfaulted
CPython's unpickler among them) under the same limit, never importing TensorFlow; the ceilings; the pickle machine reads what pickle writes; staged imports of
killed processes are removed; vocab files that are FIFOs, empty or huge are refused."""
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy

import helpers
from helpers import hostile_folders as hostile
from bert_fin import io_utils
from bert_fin.cli import import_hf as cli
from bert_fin.interop import hf_config
from bert_fin.interop import init_checkpoint as init_lib
from bert_fin.interop import pickle_machine
from bert_fin.interop import safetensors_file
from bert_fin.guard import untrusted
from bert_fin.tokenization import google
from bert_fin.tokenization import vocab as vocab_lib

READER_LIMIT = 1 << 30  # address space of the reading process (python + numpy: ~0.3 GiB)
SECONDS_PER_FOLDER = 5.0  # the refusals take < 0.1 s; room for busy cores
# Reads each folder given with hf_folder.read_files (no TensorFlow) under an address-space limit
# and prints one JSON line per folder: [folder, result, seconds, peak RSS in MB]. The peak is the
# kernel's VmHWM of this process (getrusage's ru_maxrss would start from the forking parent's).
READER = r"""
import json, resource, sys, time
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.path.insert(0, sys.argv[2])
from bert_fin.interop import hf_folder
def peak_mb():
  with open("/proc/self/status") as f:
    return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
for folder in sys.argv[3:]:
  start = time.time()
  try:
    result = "OK %d tensors" % len(hf_folder.read_files(folder).tensors)
  except ValueError as e:
    result = "refused " + str(e)
  print(json.dumps([folder, result, time.time() - start, peak_mb()]), flush=True)
print(json.dumps(["tensorflow imported", "tensorflow" in sys.modules, 0, 0]))
"""


def read_in_subprocess(folders, cwd, limit=READER_LIMIT, timeout=300):
  """[(folder, result, seconds, peak RSS MB)] of READER run over folders; the last line says
  whether TensorFlow was imported."""
  proc = subprocess.run([sys.executable, "-c", READER, str(limit), helpers.REPO] + folders,
                        capture_output=True, text=True, timeout=timeout, cwd=cwd,
                        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return [json.loads(line) for line in proc.stdout.splitlines()]


def test_every_hostile_folder_is_one_line_in_seconds_under_a_memory_limit(tmp_path):
  cases = hostile.CASES + [hostile.HUB_CACHE]
  folders = [hostile.make(tmp_path / "folders", case, n) for n, case in enumerate(cases)]
  results = read_in_subprocess(folders, str(tmp_path))
  assert results[-1][:2] == ["tensorflow imported", False]
  assert len(results) == len(cases) + 1
  wrong = []
  for case, folder, (read, result, seconds, _) in zip(cases, folders, results):
    assert read == folder
    if case.words == hostile.OK:
      good = result.startswith("OK ")
    else:  # one line, naming a file of the folder, saying what is wrong
      good = (result.startswith("refused " + folder + os.sep) and case.words in result
              and "\n" not in result)
    if not good or seconds > SECONDS_PER_FOLDER:
      wrong.append("%s (%.1f s): %s" % (case.name, seconds, result[:300]))
  assert wrong == []
  assert max(rss for _, _, _, rss in results[:-1]) < 200  # MB: the 1 GiB claims never allocated
  assert not os.path.exists(str(tmp_path / hostile.RAN_MARKER))  # no pickle code ran


# tools/import_hf.py under an address-space limit; stderr ends with whether TensorFlow came in.
CLI = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (%d, %d)); "
       "sys.argv = sys.argv[1:]\ntry: runpy.run_path(sys.argv[0], run_name='__main__')\n"
       "finally: print('tensorflow' in sys.modules, file=sys.stderr)" % (READER_LIMIT,
                                                                        READER_LIMIT))
CLI_CASES = ["tuple key 10^6 deep", "memo index 2^27", "LFS pointer", "layers 10^6",
             "tokenizer_config FIFO", "zip encrypted", "header 10^5 deep", "REDUCE os.system"]


@pytest.mark.parametrize("name", CLI_CASES)
def test_the_real_cli_says_one_line_exit_2_and_writes_nothing(tmp_path, name):
  """tools/import_hf.py itself, under the reader's 1 GiB limit (a refusal never imports
  TensorFlow): the 10^6-deep tuple key that crashed CPython's unpickler (exit 139, nothing
  printed) and others exit 2 with one line naming the file, in seconds, leaving nothing."""
  case = next(c for c in hostile.CASES if c.name == name)
  folder = hostile.make(tmp_path / "in", case)
  started = time.time()
  proc = subprocess.run(
      [sys.executable, "-c", CLI, os.path.join(helpers.REPO, "tools", "import_hf.py"),
       "--hf_dir", folder, "--output_dir", str(tmp_path / "out")],
      capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
      env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
  error, tensorflow = proc.stderr.splitlines()
  assert proc.returncode == 2 and tensorflow == "False", proc.stderr[-2000:]
  assert error.startswith("bert-fin-import-hf: error: " + folder + os.sep), error
  assert case.words in error
  assert time.time() - started < 30  # a python start on busy cores, and the refusal
  assert sorted(os.listdir(str(tmp_path))) == ["in"]  # no output, no temp dir, no code ran


@pytest.mark.parametrize("name", ["LFS pointer", "tokenizer_config FIFO", "layers 10^6"])
def test_init_checkpoint_folders_are_refused_the_same_way(tmp_path, monkeypatch, name):
  """--init_checkpoint=<folder> (run_pretraining, run_classifier, run_ner, compare_checkpoints)
  reads through the same code: one line naming the flag and the file, nothing staged."""
  case = next(c for c in hostile.CASES if c.name == name)
  folder = hostile.make(tmp_path / "in", case)
  (tmp_path / "tmp").mkdir()
  monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
  monkeypatch.setattr(init_lib.tempfile, "tempdir", None)
  with pytest.raises(ValueError) as refused:
    init_lib.resolve(folder, str(tmp_path / "out" / init_lib.IMPORT_DIR))
  message = str(refused.value)
  assert message.startswith("--init_checkpoint %s: %s%s" % (folder, folder, os.sep)), message
  assert case.words in message and "\n" not in message
  assert os.listdir(str(tmp_path / "tmp")) == [] and not os.path.exists(str(tmp_path / "out"))


def test_the_ceilings_are_flags_and_raising_them_imports(tmp_path, capsys):
  folder = hostile.BASE
  assert cli.main(["--hf_dir", folder, "--output_dir", str(tmp_path / "a"),
                   "--max_layers", "1"]) == 2
  assert ("num_hidden_layers 2 is more than the ceiling of 1 layers (a larger model: import it "
          "with tools/import_hf.py --max_parameters=N / --max_layers=N)") in capsys.readouterr().err
  fields = hf_config.google_fields(json.loads(open(os.path.join(folder, "config.json")).read()),
                                   "config.json")
  parameters = hf_config.parameter_count(fields)
  assert cli.main(["--hf_dir", folder, "--output_dir", str(tmp_path / "b"),
                   "--max_parameters", str(parameters - 1)]) == 2
  assert "its sizes make %d parameters" % parameters in capsys.readouterr().err
  assert cli.main(["--hf_dir", folder, "--output_dir", str(tmp_path / "c"),
                   "--max_parameters", str(parameters), "--max_layers", "2"]) == 0
  assert sorted(os.listdir(str(tmp_path))) == ["c"]


def test_parameter_count_is_the_pretraining_graphs():
  from bert_fin.modeling import config as config_lib  # pylint: disable=import-outside-toplevel
  from bert_fin.training.graph import model_fn  # pylint: disable=import-outside-toplevel
  fields = dict(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1, max_position_embeddings=64, type_vocab_size=2,
                initializer_range=0.02)
  shapes = model_fn.pretraining_variable_shapes(config_lib.BertConfig(**fields))
  assert hf_config.parameter_count(fields) == sum(int(np.prod(s)) for s in shapes.values())
  assert len(shapes) <= hf_config.expected_tensors(fields)


def test_the_config_tables_agree_with_modeling_and_the_exporter():
  """hf_config.py keeps TensorFlow out of the reading process: its copies of modeling's and the
  exporter's tables must stay theirs."""
  from bert_fin.export import hf as export_hf  # pylint: disable=import-outside-toplevel
  from bert_fin.modeling import config as config_lib  # pylint: disable=import-outside-toplevel
  from bert_fin.modeling import layers  # pylint: disable=import-outside-toplevel
  inverse = {hf: google_name for google_name, hf in export_hf.HIDDEN_ACT.items()}
  assert hf_config.HIDDEN_ACT == dict(inverse, gelu_pytorch_tanh="gelu", gelu_fast="gelu")
  assert hf_config.LAYER_NORM_EPSILON == layers.LAYER_NORM_EPSILON
  assert hf_config.GOOGLE_FIELDS == config_lib._FIELDS  # pylint: disable=protected-access
  assert hf_config.SIZE_FIELDS == config_lib._SIZES  # pylint: disable=protected-access


def test_json_depth_skips_strings_and_is_linear_on_hostile_bytes():
  assert untrusted.json_depth(b'{"a": "[[[{{", "b": [[1, {"c": "\\"]]]"}]]}') == 4
  assert untrusted.json_depth(b'"unterminated [[[') == 0
  started = time.time()  # every quote escaped: a naive string pattern is quadratic here
  assert untrusted.json_depth(b'"' + b'\\"' * (4 << 20) + b"[" * 1000) == 0
  assert untrusted.json_depth(b"[" * (8 << 20)) == 8 << 20
  assert time.time() - started < 10


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_the_pickle_machine_reads_what_pickle_writes(protocol):
  value = {"a": [1, -2, 300, 70000, -(1 << 40), 1 << 70, 2.5, None, True, False],
           "b": ("x" * 300, (), ((1, 2), [3, {}])), 7: "seven",
           (1, "k"): {"nested": [[[]]]}, "shared": [[0]] * 3}
  if protocol >= 3:  # protocol 2 pickles bytes through a call of _codecs.encode: refused
    value["bytes"] = (b"\x00\xff" * 200, b"", b"x" * 70000)
  hooks = pickle_machine.Hooks(*[lambda *a: pytest.fail("no hook is needed")] * 4)
  data = pickle.dumps(value, protocol=protocol)
  assert pickle_machine.Machine(pickle_machine.BytesReader(data), hooks).load() == value


def test_safetensors_of_every_dtype_read_exactly(tmp_path):
  rng = np.random.RandomState(3)
  arrays = {"f32": rng.randn(3, 4).astype(np.float32), "f16": rng.randn(5).astype(np.float16),
            "f64": rng.randn(2, 2), "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
            "empty": np.zeros([0, 4], np.float32)}
  safetensors_numpy.save_file(arrays, str(tmp_path / "a.safetensors"))
  got, dtypes = safetensors_file.read(str(tmp_path / "a.safetensors"),
                                      untrusted.Budget.unlimited())
  assert dtypes == ["float16", "float32", "float64", "int64"]
  for name, array in arrays.items():
    expected = array.astype(np.float32) if array.dtype.kind == "f" else array
    assert got[name].dtype == expected.dtype and got[name].shape == expected.shape
    np.testing.assert_array_equal(got[name], expected)
  bf16 = rng.randn(7).astype(np.float32)
  halves = (bf16.view(np.uint32) >> 16).astype("<u2")  # truncated to bfloat16
  hostile.write_safetensors(str(tmp_path), {"b": {"dtype": "BF16", "shape": [7],
                                                  "data_offsets": [0, 14]}}, halves.tobytes())
  got, dtypes = safetensors_file.read(str(tmp_path / "model.safetensors"),
                                      untrusted.Budget.unlimited())
  assert dtypes == ["bfloat16"]
  np.testing.assert_array_equal(got["b"], (halves.astype(np.uint32) << 16).view(np.float32))


def test_a_killed_import_leaves_nothing_for_the_next_one(tmp_path, monkeypatch):
  root = tmp_path / "tmp"
  root.mkdir()
  monkeypatch.setenv("TMPDIR", str(root))
  monkeypatch.setattr(init_lib.tempfile, "tempdir", None)
  killed = subprocess.run(  # stages an import, then dies by SIGKILL before settle or discard
      [sys.executable, "-c", "import os, signal, sys; sys.path.insert(0, %r); from "
       "bert_fin.interop import init_checkpoint as i; d = i._new_stage(); open(os.path.join(d, "
       "'x'), 'w').write('x'); os.kill(os.getpid(), signal.SIGKILL)" % helpers.REPO],
      env=dict(os.environ, TMPDIR=str(root)), timeout=60, check=False)
  assert killed.returncode == -signal.SIGKILL
  (left,) = os.listdir(str(root))
  assert left.startswith(init_lib.STAGE_PREFIX + io_utils.owner_tag().rpartition("-")[0])
  living = root / ("%s%s-%d+kept" % (init_lib.STAGE_PREFIX, io_utils.owner_tag().rpartition(
      "-")[0], os.getppid()))  # a living process's, and another host's: both kept
  other_host = root / (init_lib.STAGE_PREFIX + "elsewhere-1+kept")
  living.mkdir()
  other_host.mkdir()
  staged = init_lib.resolve(os.path.join(helpers.FIXTURES, "hf_tiny", "encoder"),
                            str(tmp_path / "out" / init_lib.IMPORT_DIR))
  assert sorted(os.listdir(str(root))) == sorted([os.path.basename(staged.staged_in),
                                                  living.name, other_host.name])
  init_lib.discard(staged)
  assert sorted(os.listdir(str(root))) == sorted([living.name, other_host.name])


def _finishes(function, *args):
  """function(*args)'s exception (or None), which must come within 10 s (a FIFO must not block
  the reader: a hang fails the test instead of stalling it)."""
  outcome = []

  def run():
    try:
      function(*args)
      outcome.append(None)
    except ValueError as e:
      outcome.append(e)
  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  thread.join(10)
  assert not thread.is_alive(), "%s blocked on %s" % (function.__name__, args)
  return outcome[0]


def test_vocab_files_that_are_fifos_empty_or_huge_are_refused(tmp_path, caplog):
  os.mkfifo(str(tmp_path / "fifo.txt"))
  (tmp_path / "empty.txt").write_text("")
  (tmp_path / "huge_line.txt").write_text("[PAD]\n" + "x" * 5000 + "\n")
  (tmp_path / "twice.txt").write_text("[PAD]\na\na\n")
  (tmp_path / "latin1.txt").write_bytes(b"[PAD]\ncaf\xe9\n")
  for reader in (google.load_vocab, vocab_lib.read_vocab):
    assert "is a FIFO (named pipe)" in str(_finishes(reader, str(tmp_path / "fifo.txt")))
    assert "has no tokens: an empty vocab" in str(_finishes(reader, str(tmp_path / "empty.txt")))
    assert "line 2 is 5000 characters long: not a vocab file" in str(
        _finishes(reader, str(tmp_path / "huge_line.txt")))
    assert "is a directory" in str(_finishes(reader, str(tmp_path)))
  assert "line 3 repeats the token 'a' of line 2" in str(
      _finishes(vocab_lib.read_vocab, str(tmp_path / "twice.txt")))
  assert google.load_vocab(str(tmp_path / "twice.txt")) == {"[PAD]": 0, "a": 2}  # google's
  assert list(google.load_vocab(str(tmp_path / "latin1.txt"))) == ["[PAD]", "caf"]
  assert "is not valid UTF-8 (byte 9): invalid bytes dropped" in caplog.text
  with pytest.raises(UnicodeDecodeError):
    vocab_lib.read_vocab(str(tmp_path / "latin1.txt"))
