"""run_pretraining on one process: flags, the resolved run, training lowers the loss, the step
lines, TensorBoard, the eval block, refusals. One 20-update training (module fixture) serves the
tests that read its outputs."""
import contextlib
import io
import os
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402
from absl import flags as absl_flags  # noqa: E402

from helpers import pretraining_runs as pt  # noqa: E402
import tiny_data  # noqa: E402  (tests/fixtures/training, on sys.path by conftest.py)

from bert_fin.records import schema as records  # noqa: E402
from bert_fin.training import estimator  # noqa: E402
from bert_fin.training.monitor import eval_results  # noqa: E402
from bert_fin.training.monitor import plateau  # noqa: E402
from bert_fin.training import flags as train_flags  # noqa: E402
from bert_fin.training import run as run_lib  # noqa: E402

SEQ, STEPS, ACCUMULATION = pt.SEQ, 20, 2


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


@pytest.fixture(scope="module")
def trained(tmp_path_factory, records_dir):
  """(flag values, LossRecorder, stdout, eval result) of 20 updates x 2 micro-batches + eval."""
  tmp_path = tmp_path_factory.mktemp("trained")
  values = pt.parse_flags(pt.tiny_argv(
      tmp_path, str(records_dir / "*.tfrecord"), do_train=True, do_eval=True,
      num_train_steps=STEPS, num_accumulation_steps=ACCUMULATION, save_checkpoints_steps=STEPS,
      max_eval_steps=3, log_every_n_steps=5, save_summaries_steps=5))
  recorder, stdout = LossRecorder(), io.StringIO()
  with contextlib.redirect_stdout(stdout):
    result = pt.train(values, extra_hooks=[recorder])
  return values, recorder, stdout.getvalue(), result


def test_flags_keep_google_and_nvidia_names_and_defaults():
  values = pt.parse_flags([])
  google = {"max_seq_length": 128, "max_predictions_per_seq": 20, "do_train": False,
            "do_eval": False, "train_batch_size": 32, "eval_batch_size": 8, "learning_rate": 5e-5,
            "num_train_steps": 100000, "num_warmup_steps": 10000, "save_checkpoints_steps": 1000,
            "iterations_per_loop": 1000, "max_eval_steps": 100, "use_tpu": False,
            "num_tpu_cores": 8, "init_checkpoint": None}
  nvidia = {"horovod": False, "use_xla": False, "amp": False, "num_accumulation_steps": 1,
            "allreduce_post_accumulation": False, "init_loss_scale": 2**32}
  ours = {"input_pipeline": "tfdata", "sparse_as_dense": True, "fp16_allreduce": False,
          "scale_lr_by_workers": False, "objective": "bert", "recompute": False,
          "data_order": "resume", "index_dir": None, "seed": None, "log_every_n_steps": 10}
  for name, default in {**google, **nvidia, **ours}.items():
    assert values[name].value == default, name
  assert pt.parse_flags(["--optimizer_type=lamb"]).optimizer_type == "lamb"
  with pytest.raises(absl_flags.IllegalFlagValueError):
    pt.parse_flags(["--optimizer_type=sgd"])


def test_flag_refusals_are_clear(tmp_path, records_dir):
  base = pt.tiny_argv(tmp_path, os.path.join(str(records_dir), "*.tfrecord"), do_train=True)
  with pytest.raises(ValueError, match="--use_tpu is not supported"):
    train_flags.validate_flags(pt.parse_flags(base + ["--use_tpu", "--tpu_name=grpc://x"]))
  with pytest.raises(ValueError, match="At least one of `do_train` or `do_eval`"):
    train_flags.validate_flags(pt.parse_flags(base + ["--nodo_train"]))
  with pytest.raises(ValueError, match="--num_accumulation_steps must be >= 1"):
    train_flags.validate_flags(pt.parse_flags(base + ["--num_accumulation_steps=0"]))
  with pytest.raises(ValueError, match="save_summaries_steps"):
    train_flags.validate_flags(pt.parse_flags(base + ["--save_summaries_steps=0"]))


def test_the_run_is_resolved_once_with_one_seed_and_absolute_files(tmp_path, records_dir):
  pattern = os.path.join(os.path.relpath(str(records_dir)), "*.tfrecord")
  run = pt.resolve(tmp_path, pattern, workers_count=2, num_accumulation_steps=3,
                   scale_lr_by_workers=True, save_checkpoints_steps=500, seed=None)
  assert run.global_batch_size == 4 * 3 * 2 and run.learning_rate == pytest.approx(2e-3)
  assert run.save_summaries_steps == 500  # the checkpoint cadence unless asked
  train_files = run.decided.train_files
  assert all(os.path.isabs(f) for f in train_files) and len(train_files) == 2
  assert run.decided.layout == (SEQ, pt.P, None, False, False)  # not dynamic_masking
  # no --seed: one seed drawn, the same for RunConfig, the data order and dropout
  assert run.order().seed == run.decided.seed
  assert estimator.run_config(run.estimator_settings(), pt.workers(2),
                              str(tmp_path)).tf_random_seed == run.decided.seed
  # rank 0's decisions travel as JSON and come back equal and typed
  text = run.decided.to_json()
  assert run_lib.Decisions.from_json(text).to_json() == text
  decoded = run_lib.Decisions.from_json(text)
  assert isinstance(decoded.layout, records.RecordLayout) and decoded.eval_layout is None
  assert decoded.train_files == train_files and isinstance(decoded.head_warmup_variables, tuple)
  assert decoded.bert_config.to_dict() == run.decided.bert_config.to_dict()
  with pytest.raises(dataclasses_error()):
    run.decided.seed = 1  # immutable
  with pytest.raises(dataclasses_error()):
    run.settings.optimizer.learning_rate = 1.0  # the settings too
  with pytest.raises(ValueError, match="2 input file.*for 4 workers"):
    pt.resolve(tmp_path, pattern, workers_count=4)
  with pytest.raises(ValueError, match="only trained up to sequence length 64"):
    pt.resolve(tmp_path, pattern, max_seq_length=128)


def test_a_padded_vocab_size_is_accepted_and_a_smaller_one_is_refused(tmp_path, records_dir):
  # The records' ids come from a 100-token vocab; NVIDIA-style padding (to a multiple of 8, or
  # more) only adds embedding rows no id reaches. Fewer rows than the ids need are refused.
  pattern = os.path.join(str(records_dir), "*.tfrecord")
  padded = tiny_data.write_config(str(tmp_path / "padded.json"), vocab_size=104)
  run = pt.resolve(tmp_path, pattern, bert_config_file=padded)
  assert run.decided.bert_config.vocab_size == 104
  small = tiny_data.write_config(str(tmp_path / "small.json"), vocab_size=50)
  with pytest.raises(ValueError, match=r"outside \[0, vocab_size=50\) of --bert_config_file"):
    pt.resolve(tmp_path, pattern, bert_config_file=small)


def dataclasses_error():
  import dataclasses  # pylint: disable=import-outside-toplevel
  return dataclasses.FrozenInstanceError


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


def test_training_runs_one_session_run_a_micro_batch_and_lowers_the_loss(trained):
  values, recorder, _, _ = trained
  assert len(recorder.losses) == STEPS * ACCUMULATION
  assert recorder.steps[-1] == STEPS - 1  # global_step counts optimizer updates
  first, last = recorder.losses[:6], recorder.losses[-6:]
  assert sum(last) / len(last) < sum(first) / len(first) - 0.3, recorder.losses
  assert estimator.checkpoint_step(values.output_dir) == STEPS


def test_step_lines_carry_losses_rates_mfu_and_real_tokens(trained):
  _, _, stdout, _ = trained
  logged = [line for line in stdout.splitlines() if re.match(r"^step \d+: total_loss = ", line)]
  assert pt.step_lines(stdout) == [0, 5, 10, 15, 20]  # first run (no update yet), multiples of 5
  for index, line in enumerate(logged):
    fields = dict(f.split(" = ") for f in line.split(": ", 1)[1].split(", "))
    assert {"mlm_loss", "nsp_loss", "mlm_accuracy", "grad_norm", "learning_rate",
            "elapsed"} <= set(fields)
    assert 0 <= float(fields["mlm_accuracy"]) <= 1 and float(fields["grad_norm"]) >= 0
    if index == 0:  # the first session.run (graph warm-up) has no rates
      assert "sentences/s" not in fields
      continue
    assert {"sentences/s", "mfu", "sec/step", "eta"} <= set(fields)
    assert re.match(r"^\d+:\d\d:\d\d$", fields["eta"]), fields["eta"]
    tokens_per_sentence = float(fields["real_tokens/s"]) / float(fields["sentences/s"])
    assert SEQ // 2 <= tokens_per_sentence <= SEQ  # the records' input_len range, not padded SEQ


def test_tensorboard_loss_points_fall_on_step_line_points(trained):
  values, _, _, _ = trained
  scalars = {}
  for events in tf.io.gfile.glob(os.path.join(values.output_dir, "events.out.tfevents*")):
    for event in tf.train.summary_iterator(events):
      for value in event.summary.value:
        scalars.setdefault(value.tag, {})[event.step] = value.simple_value
  assert {"train/total_loss", "train/learning_rate", "train/mlm_accuracy", "train/grad_norm",
          "examples/sec", "throughput/real_tokens_per_sec", "throughput/mfu"} <= set(scalars)
  # The Estimator's `loss` (every --save_summaries_steps = 5, hooks.SummaryHook) falls on the
  # steps of the step lines' train/total_loss, with the same value.
  assert sorted(scalars["loss"]) == [0, 5, 10, 15, 20]
  for step_number, value in scalars["loss"].items():
    assert scalars["train/total_loss"][step_number] == pytest.approx(value, rel=1e-5)


def test_eval_prints_googles_block_from_the_trained_checkpoint(trained):
  values, recorder, stdout, result = trained
  assert result["global_step"] == STEPS
  assert result["masked_lm_loss"] < recorder.losses[0]
  keys = sorted(result)
  assert {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
          "next_sentence_loss", "loss", "global_step"} <= set(keys)
  block = stdout[stdout.index("***** Eval results *****"):].splitlines()[:len(keys) + 1]
  assert block[1:] == ["  %s = %s" % (k, result[k]) for k in keys]
  with open(os.path.join(values.output_dir, "eval_results.txt"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert [line.split(" = ")[0] for line in lines] == keys
  # the unigram plateau's accuracy beside it: these 20 updates on repetitive toy records left it
  # (0.18 vs 0.054), so no warning
  assert 0 < result[plateau.TOP_SHARE_KEY] <= 1
  assert result["masked_lm_accuracy"] > plateau.PLATEAU_FACTOR * result[plateau.TOP_SHARE_KEY]
  assert "unigram plateau" not in stdout


def test_init_checkpoint_into_a_fresh_output_dir_evaluates_the_same_weights(
    trained, tmp_path, records_dir):
  values, _, _, result = trained
  warm = pt.parse_flags(pt.tiny_argv(
      tmp_path, str(records_dir / "*.tfrecord"), do_eval=True, max_eval_steps=3,
      init_checkpoint=tf.train.latest_checkpoint(values.output_dir)))
  warm_result = pt.train(warm)
  assert warm_result["masked_lm_loss"] == pytest.approx(result["masked_lm_loss"], rel=1e-5)
  assert warm_result["global_step"] == 0


def test_a_finished_run_started_again_has_nothing_left_to_do(trained, records_dir):
  values, _, _, _ = trained
  again = LossRecorder()
  argv = ["--%s=%s" % (name, values[name].value) for name in (
      "bert_config_file", "output_dir", "max_seq_length", "max_predictions_per_seq",
      "train_batch_size", "num_train_steps", "num_accumulation_steps", "seed")]
  pt.train(pt.parse_flags(argv + ["--do_train", "--input_file=%s" % values.input_file]),
           extra_hooks=[again])
  assert again.losses == [] and estimator.checkpoint_step(values.output_dir) == STEPS


def test_command_line_refuses_use_tpu_with_one_line(tmp_path, records_dir):
  proc = pt.run_cli(tmp_path, pt.tiny_argv(tmp_path, str(records_dir / "*.tfrecord"),
                                           do_train=True, use_tpu=True), timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "run_pretraining.py: error: --use_tpu is not supported" in proc.stderr
  assert "Traceback" not in proc.stderr
  assert not os.path.exists(str(tmp_path / "out"))


def test_command_line_prints_each_step_once_and_trains_in_one_call(tmp_path):
  """stdout: one line a log step, at 1 and the multiples of --log_every_n_steps (not echoed
  through logging on stderr); stderr: the start-up notes (MFU peak and its source, --amp inactive
  without a GPU, TPU flags ignored). Epochs of 2 micro-batches, checkpoints every 3 updates: the
  graph is built once for the whole run, not once per stretch of epochs."""
  pt.tiny_data.write_records(str(tmp_path / "small"), num_files=2, per_file=4, seq_len=SEQ,
                             max_predictions=pt.P, seed=2)
  argv = pt.tiny_argv(tmp_path, str(tmp_path / "small" / "*.tfrecord"), do_train=True,
                      num_train_steps=7, save_checkpoints_steps=3, log_every_n_steps=3, amp=True,
                      tpu_name="grpc://x")
  proc = pt.run_cli(tmp_path, argv, env={"CUDA_VISIBLE_DEVICES": ""})
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert pt.step_lines(proc.stdout) == [1, 3, 6], proc.stdout
  assert not re.search(r"step (\d+): total_loss = ", proc.stderr)
  assert re.search(r"Peak for MFU = [0-9.e+]+ TFLOP/s a device x 1 device\(s\), from "
                   r"/proc/cpuinfo", proc.stderr)
  assert "fp16 AMP is INACTIVE on this host (no GPU)" in proc.stderr
  assert proc.stderr.count("TPU flags accepted and ignored (no TPU support): --tpu_name") == 1
  # quiet by default (bert_fin/console_log.py): none of TensorFlow's deprecation notices or the
  # Estimator's internals, bert_fin's own lines in the short `HH:MM:SS I` form
  assert "Instructions for updating" not in proc.stderr and "is deprecated" not in proc.stderr
  assert "Calling model_fn" not in proc.stderr and "Graph was finalized" not in proc.stderr
  assert re.search(r"^\d\d:\d\d:\d\d I \*\*\*\*\* Running training", proc.stderr, re.M)
  # one training call, one graph: model_fn (which logs the features once a call) ran once
  assert proc.stderr.count("*** Features ***") == 1, proc.stderr.count("*** Features ***")
  assert estimator.checkpoint_step(str(tmp_path / "out")) == 7


def test_roberta_lamb_amp_recompute_and_xla_flags_reach_the_graph(tmp_path, records_dir):
  values = pt.parse_flags(pt.tiny_argv(
      tmp_path, str(records_dir / "*.tfrecord"), do_train=True, do_eval=True,
      num_train_steps=3, objective="roberta", optimizer_type="lamb", amp=True, recompute=True,
      use_xla=True, log_every_n_steps=1, max_eval_steps=2))
  result = pt.train(values)
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


def test_help_lists_every_flag_by_origin_with_its_default(tmp_path):
  proc = pt.run_cli(tmp_path, ["--help"], timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  out = proc.stdout
  titles = [title for title, _ in train_flags.flag_groups()]
  assert [out.index(title + " flags:") for title in titles] == sorted(
      out.index(title + " flags:") for title in titles)
  values = pt.parse_flags([])
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
