"""run_pretraining on one process: flags, training lowers the loss, eval block, refusals."""
import os
import re
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402
from absl import flags as absl_flags  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "fixtures", "training"))
import tiny_data  # noqa: E402

from bert_fin.training import distributed  # noqa: E402
from bert_fin.training import estimator  # noqa: E402
from bert_fin.training import eval_results  # noqa: E402
from bert_fin.training import flags as train_flags  # noqa: E402

SEQ, P = 32, 5


def parse_flags(argv):
  """A fresh FlagValues with every run_pretraining flag, parsed from argv."""
  values = train_flags.define_flags(absl_flags.FlagValues())
  values(["run_pretraining.py"] + argv)
  return values


def tiny_argv(tmp_path, input_file, **extra):
  argv = {
      "bert_config_file": tiny_data.write_config(str(tmp_path / "bert_config.json")),
      "input_file": input_file, "output_dir": str(tmp_path / "out"),
      "max_seq_length": SEQ, "max_predictions_per_seq": P, "train_batch_size": 4,
      "eval_batch_size": 8, "learning_rate": 1e-3, "num_warmup_steps": 0,
      "intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 2, "seed": 1234,
  }
  argv.update(extra)
  out = []
  for name, value in argv.items():
    if value is True:
      out.append("--" + name)
    elif value is False:
      out.append("--no" + name)
    else:
      out.append("--%s=%s" % (name, value))
  return out


class LossRecorder(tf.train.SessionRunHook):
  """Records total_loss and global_step of every session.run (one micro-batch)."""

  def __init__(self):
    self.losses, self.steps = [], []

  def before_run(self, run_context):
    return tf.train.SessionRunArgs(["total_loss:0", tf.train.get_global_step()])

  def after_run(self, run_context, run_values):
    loss, step = run_values.results
    self.losses.append(float(loss))
    self.steps.append(int(step))


class FakeWorkers(object):
  """The bits of distributed.init() that preflight reads, for N workers without mpirun."""

  def __init__(self, size):
    self.size, self.rank, self.local_rank, self.is_chief = size, 0, 0, True


@pytest.fixture(scope="module")
def records_dir(tmp_path_factory):
  directory = tmp_path_factory.mktemp("records")
  tiny_data.write_records(str(directory), num_files=2, per_file=16, seq_len=SEQ,
                          max_predictions=P, seed=3)
  return directory


def test_flags_keep_google_and_nvidia_names_and_defaults():
  values = parse_flags([])
  google = {"max_seq_length": 128, "max_predictions_per_seq": 20, "do_train": False,
            "do_eval": False, "train_batch_size": 32, "eval_batch_size": 8, "learning_rate": 5e-5,
            "num_train_steps": 100000, "num_warmup_steps": 10000, "save_checkpoints_steps": 1000,
            "iterations_per_loop": 1000, "max_eval_steps": 100, "use_tpu": False,
            "num_tpu_cores": 8, "init_checkpoint": None}
  nvidia = {"horovod": False, "use_xla": False, "amp": False, "num_accumulation_steps": 1,
            "allreduce_post_accumulation": False, "init_loss_scale": 2**32}
  ours = {"input_pipeline": "tfdata", "sparse_as_dense": True, "fp16_allreduce": False,
          "scale_lr_by_workers": False, "objective": "bert", "recompute": False}
  for name, default in {**google, **nvidia, **ours}.items():
    assert values[name].value == default, name
  assert parse_flags(["--optimizer_type=lamb"]).optimizer_type == "lamb"
  with pytest.raises(absl_flags.IllegalFlagValueError):
    parse_flags(["--optimizer_type=sgd"])


def test_summaries_follow_the_checkpoint_cadence_unless_asked(tmp_path):
  from bert_fin.training import estimator
  values = parse_flags(tiny_argv(tmp_path, "x", save_checkpoints_steps=500))
  assert values.log_every_n_steps == 10 and estimator.summary_steps(values) == 500
  assert estimator.summary_steps(parse_flags(tiny_argv(tmp_path, "x", save_summaries_steps=50))) == 50
  with pytest.raises(ValueError, match="save_summaries_steps"):
    train_flags.validate_flags(parse_flags(tiny_argv(tmp_path, "x", do_train=True,
                                                     save_summaries_steps=0)))


def test_flag_refusals_are_clear(tmp_path, records_dir):
  base = tiny_argv(tmp_path, os.path.join(str(records_dir), "*.tfrecord"), do_train=True)
  with pytest.raises(ValueError, match="--use_tpu is not supported"):
    train_flags.validate_flags(parse_flags(base + ["--use_tpu", "--tpu_name=grpc://x"]))
  with pytest.raises(ValueError, match="At least one of `do_train` or `do_eval`"):
    train_flags.validate_flags(parse_flags(base + ["--nodo_train"]))
  with pytest.raises(ValueError, match="--num_accumulation_steps must be >= 1"):
    train_flags.validate_flags(parse_flags(base + ["--num_accumulation_steps=0"]))


def test_preflight_refuses_file_counts_not_divisible_by_workers(tmp_path, records_dir):
  values = parse_flags(tiny_argv(tmp_path, os.path.join(str(records_dir), "*.tfrecord"),
                                 do_train=True))
  plan = estimator.preflight(values, FakeWorkers(2))
  assert plan.global_batch_size == 4 * 2 and plan.learning_rate == pytest.approx(1e-3)
  with pytest.raises(ValueError, match="2 input file.*for 4 workers"):
    estimator.preflight(values, FakeWorkers(4))
  values = parse_flags(tiny_argv(tmp_path, os.path.join(str(records_dir), "*.tfrecord"),
                                 do_train=True, scale_lr_by_workers=True, num_accumulation_steps=3))
  plan = estimator.preflight(values, FakeWorkers(2))
  assert plan.learning_rate == pytest.approx(2e-3) and plan.global_batch_size == 4 * 3 * 2
  long_seq = parse_flags(tiny_argv(tmp_path, str(records_dir / "*.tfrecord"), do_train=True,
                                   max_seq_length=128))
  with pytest.raises(ValueError, match="only trained up to sequence length 64"):
    estimator.preflight(long_seq, FakeWorkers(1))


def test_eval_block_has_google_form_and_is_written_atomically(tmp_path, capsys):
  result = {"masked_lm_loss": 2.5, "global_step": 7, "masked_lm_accuracy": 0.25, "loss": 3.0}
  path = eval_results.write_eval_results(str(tmp_path), result)
  printed = capsys.readouterr().out.splitlines()
  assert printed == ["***** Eval results *****", "  global_step = 7", "  loss = 3.0",
                     "  masked_lm_accuracy = 0.25", "  masked_lm_loss = 2.5"]
  with open(path, encoding="utf-8") as f:
    assert f.read() == ("global_step = 7\nloss = 3.0\nmasked_lm_accuracy = 0.25\n"
                        "masked_lm_loss = 2.5\n")
  assert os.listdir(str(tmp_path)) == [eval_results.EVAL_RESULTS_FILE]


def test_single_process_training_lowers_the_loss_then_evaluates(tmp_path, records_dir, capsys):
  steps, accumulation = 20, 2
  values = parse_flags(tiny_argv(
      tmp_path, os.path.join(str(records_dir), "*.tfrecord"), do_train=True, do_eval=True,
      num_train_steps=steps, num_accumulation_steps=accumulation, save_checkpoints_steps=steps,
      max_eval_steps=3, log_every_n_steps=5, save_summaries_steps=5))
  recorder = LossRecorder()
  result = estimator.run(values, distributed.init(False), extra_hooks=[recorder])

  # One session.run a micro-batch; global_step counts optimizer updates.
  assert len(recorder.losses) == steps * accumulation
  assert recorder.steps[-1] == steps - 1
  first, last = recorder.losses[:6], recorder.losses[-6:]
  assert sum(last) / len(last) < sum(first) / len(first) - 0.3, recorder.losses
  out_dir = values.output_dir
  assert estimator.checkpoint_step(out_dir) == steps

  # Rank 0's log every 5 updates: losses, lr, sentences/s, real tokens/s (from input_len), MFU.
  stdout = capsys.readouterr().out
  logged = [line for line in stdout.splitlines() if re.match(r"^step \d+: total_loss = ", line)]
  assert len(logged) >= 3, stdout[-3000:]
  # The first line (first session.run, graph warm-up) has no rates; the later ones have them all.
  for index, line in enumerate(logged):
    fields = dict(f.split(" = ") for f in line.split(": ", 1)[1].split(", "))
    assert {"mlm_loss", "nsp_loss", "mlm_accuracy", "grad_norm", "learning_rate",
            "elapsed"} <= set(fields)
    assert 0 <= float(fields["mlm_accuracy"]) <= 1 and float(fields["grad_norm"]) >= 0
    if index == 0:
      continue
    assert {"sentences/s", "mfu", "sec/step", "eta"} <= set(fields)
    assert re.match(r"^\d+:\d\d:\d\d$", fields["eta"]), fields["eta"]
    tokens_per_sentence = float(fields["real_tokens/s"]) / float(fields["sentences/s"])
    assert SEQ // 2 <= tokens_per_sentence <= SEQ  # the records' input_len range, not padded SEQ
  scalars = {}
  for events in tf.io.gfile.glob(os.path.join(values.output_dir, "events.out.tfevents*")):
    for event in tf.train.summary_iterator(events):
      for value in event.summary.value:
        scalars.setdefault(value.tag, {})[event.step] = value.simple_value
  assert {"train/total_loss", "train/learning_rate", "train/mlm_accuracy", "train/grad_norm",
          "examples/sec", "throughput/real_tokens_per_sec", "throughput/mfu"} <= set(scalars)
  # The Estimator's own `loss` (every --save_summaries_steps = 5) falls on steps of the hook's
  # train/total_loss (the same rule from the first run), with the same value.
  assert len(scalars["loss"]) >= 2, scalars["loss"]
  for step_number, value in scalars["loss"].items():
    assert scalars["train/total_loss"][step_number] == pytest.approx(value, rel=1e-5)

  # Eval: google's block on stdout and in eval_results.txt, from the trained checkpoint.
  assert result["global_step"] == steps
  assert result["masked_lm_loss"] < recorder.losses[0]
  keys = sorted(result)
  assert {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
          "next_sentence_loss", "loss", "global_step"} <= set(keys)
  block = stdout[stdout.index("***** Eval results *****"):].splitlines()[:len(keys) + 1]
  assert block[1:] == ["  %s = %s" % (k, result[k]) for k in keys]
  with open(os.path.join(out_dir, "eval_results.txt"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert [line.split(" = ")[0] for line in lines] == keys
  assert all(re.match(r"^\w+ = \S+$", line) for line in lines)

  # --init_checkpoint into a fresh output_dir: the eval sees exactly the trained weights.
  warm = parse_flags(tiny_argv(
      tmp_path, os.path.join(str(records_dir), "*.tfrecord"), do_eval=True, max_eval_steps=3,
      output_dir=str(tmp_path / "warm"), init_checkpoint=tf.train.latest_checkpoint(out_dir)))
  warm_result = estimator.run(warm, distributed.init(False))
  assert warm_result["masked_lm_loss"] == pytest.approx(result["masked_lm_loss"], rel=1e-5)
  assert warm_result["global_step"] == 0

  # A second run at num_train_steps resumes from the checkpoint and has nothing left to do.
  again = LossRecorder()
  estimator.run(parse_flags(tiny_argv(
      tmp_path, os.path.join(str(records_dir), "*.tfrecord"), do_train=True,
      num_train_steps=steps, num_accumulation_steps=accumulation)), distributed.init(False),
      extra_hooks=[again])
  assert again.losses == [] and estimator.checkpoint_step(out_dir) == steps


def test_command_line_refuses_use_tpu_with_one_line(tmp_path, records_dir):
  argv = tiny_argv(tmp_path, os.path.join(str(records_dir), "*.tfrecord"), do_train=True,
                   use_tpu=True)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1")
  proc = subprocess.run([sys.executable, os.path.join(REPO, "run_pretraining.py")] + argv,
                        capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "run_pretraining.py: error: --use_tpu is not supported" in proc.stderr
  assert "Traceback" not in proc.stderr
  assert not os.path.exists(str(tmp_path / "out"))


def test_command_line_prints_each_step_once_and_says_what_flags_do_here(tmp_path, records_dir):
  """stdout: one line a log step (not echoed through logging on stderr); stderr: the start-up
  notes (MFU peak and its source, --amp inactive without a GPU, TPU flags ignored)."""
  argv = tiny_argv(tmp_path, os.path.join(str(records_dir), "*.tfrecord"), do_train=True,
                   num_train_steps=5, log_every_n_steps=2, amp=True, tpu_name="grpc://x")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
  proc = subprocess.run([sys.executable, os.path.join(REPO, "run_pretraining.py")] + argv,
                        capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path))
  assert proc.returncode == 0, proc.stderr[-3000:]
  step_line = re.compile(r"step (\d+): total_loss = ")
  steps = [int(m.group(1)) for m in map(step_line.search, proc.stdout.splitlines()) if m]
  assert steps == [1, 3, 5], proc.stdout
  assert not step_line.search(proc.stderr)
  assert re.search(r"Peak for MFU = [0-9.e+]+ TFLOP/s a device x 1 device\(s\), from "
                   r"/proc/cpuinfo", proc.stderr)
  assert "fp16 AMP is INACTIVE on this host (no GPU)" in proc.stderr
  assert proc.stderr.count("TPU flags accepted and ignored (no TPU support): --tpu_name") == 1
  # quiet by default (bert_fin/console_log.py): none of TensorFlow's deprecation notices or the
  # Estimator's internals, bert_fin's own lines in the short `HH:MM:SS I` form
  assert "Instructions for updating" not in proc.stderr and "is deprecated" not in proc.stderr
  assert "Calling model_fn" not in proc.stderr and "Graph was finalized" not in proc.stderr
  assert re.search(r"^\d\d:\d\d:\d\d I \*\*\*\*\* Running training", proc.stderr, re.M)


def test_roberta_lamb_amp_recompute_and_xla_flags_reach_the_graph(tmp_path, records_dir):
  values = parse_flags(tiny_argv(
      tmp_path, os.path.join(str(records_dir), "*.tfrecord"), do_train=True, do_eval=True,
      num_train_steps=3, objective="roberta", optimizer_type="lamb", amp=True, recompute=True,
      use_xla=True, log_every_n_steps=1, max_eval_steps=2))
  result = estimator.run(values, distributed.init(False))
  names = {name for name, _ in tf.train.list_variables(values.output_dir)}
  assert not any("seq_relationship" in n for n in names)  # RoBERTa: MLM only
  assert "train_step/loss_scale/scale" in names  # --amp: dynamic loss scaling state
  assert result["global_step"] == 3
  assert "masked_lm_accuracy" in result and "next_sentence_accuracy" not in result


def test_xla_environment_is_prepared_before_tensorflow_and_keeps_user_flags():
  from bert_fin.training import xla_env
  environ = {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2"}
  value = xla_env.prepare(True, environ, gpu_host=False)
  assert value.split() == ["--tf_xla_auto_jit=2", xla_env.LAZY_COMPILATION_OFF,
                           xla_env.CPU_GLOBAL_JIT]
  assert xla_env.prepare(True, environ, gpu_host=False) == value  # idempotent
  assert xla_env.prepare(True, {}, gpu_host=True) == xla_env.LAZY_COMPILATION_OFF
  untouched = {}
  assert xla_env.prepare(False, untouched, gpu_host=False) == "" and untouched == {}


def test_help_lists_every_flag_by_origin_with_its_default():
  proc = subprocess.run([sys.executable, os.path.join(REPO, "run_pretraining.py"), "--help"],
                        capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  out = proc.stdout
  titles = [title for title, _ in train_flags.flag_groups()]
  assert [out.index(title + " flags:") for title in titles] == sorted(
      out.index(title + " flags:") for title in titles)
  values = parse_flags([])
  for _, names in train_flags.flag_groups():
    for name in names:
      flag = values[name]
      shown = "--[no]%s: " % name if flag.boolean else "--%s: " % name
      assert shown in out, name
      entry = out[out.index(shown):].split("\n  --")[0]
      default = "none" if flag.default is None else flag.default_as_str
      assert "(default: %s)" % default in " ".join(entry.split()), (name, entry)
  # plus the programs' shared --verbose (bert_fin/console_log.py)
  assert "--[no]verbose: " in out
  assert len([line for line in out.splitlines() if line.startswith("  --")]) == len(
      [n for _, names in train_flags.flag_groups() for n in names]) + 1
