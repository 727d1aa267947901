"""Exact resume and reproducibility of run_pretraining (one process; mpirun in
test_resume_mpi.py): a run SIGKILLed after its first checkpoint and started again with the same
command ends with exactly the weights of an uninterrupted run (tf.data and DALI, dropout on,
accumulation, epochs of 3.5 updates so the kill lands mid-epoch and epochs end mid-update; static
records and dynamic-masking ones, whose masks are drawn anew each epoch; a mixture of two sources
(--input_source), the small one in its 4th epoch when the run ends); two uninterrupted runs end
with identical checkpoints."""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import pytest  # noqa: E402

from helpers import resume_runs as rt  # noqa: E402
from helpers.resume_runs import tiny_data  # noqa: E402

from bert_fin.input import stream  # noqa: E402

STEPS, SAVE_STEPS = 16, 8  # 2 files x 14 records, batch 4, 2 micro-batches: 3.5 updates an epoch


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """{"static": (config, glob), "dynamic": (config, glob of dynamic-masking records), "mixture":
  (config, --input_source flags: 2 files x 6 records at weight 1, the static records at 2)}."""
  directory = tmp_path_factory.mktemp("resume")
  tiny_data.write_records(str(directory / "records"), num_files=2, per_file=14, seq_len=rt.SEQ,
                          max_predictions=rt.P, seed=11)
  tiny_data.write_dynamic_records(str(directory / "dynamic"), num_files=2, per_file=14,
                                  seq_len=rt.SEQ, seed=11)
  assert tiny_data.DYNAMIC_MASKING["max_predictions_per_seq"] == rt.P
  tiny_data.write_records(str(directory / "small"), num_files=2, per_file=6, seq_len=rt.SEQ,
                          max_predictions=rt.P, seed=12)
  config = rt.write_dropout_config(str(directory / "bert_config.json"))
  return {"static": (config, str(directory / "records" / "*.tfrecord")),
          "dynamic": (config, str(directory / "dynamic" / "*.tfrecord")),
          "mixture": (config, ["--input_source=small=%s:1" % (directory / "small" / "*.tfrecord"),
                               "--input_source=large=%s:2" % (directory / "records" / "*")])}


def _command(corpus, output_dir, pipeline, records="static"):
  config, input_glob = corpus[records]
  return [sys.executable, rt.RUN_PRETRAINING] + rt.flags(config, input_glob, output_dir, STEPS,
                                                         pipeline, SAVE_STEPS)


@pytest.fixture(scope="module")
def uninterrupted(corpus, tmp_path_factory):
  """uninterrupted(pipeline, records) -> output_dir of an uninterrupted run, each run once, on
  demand (the tf.data tests need no DALI)."""
  done = {}

  def output_dir_of(pipeline, records="static"):
    if (pipeline, records) not in done:
      output_dir = str(tmp_path_factory.mktemp("whole_%s_%s" % (pipeline, records)) / "out")
      rt.run(_command(corpus, output_dir, pipeline, records))
      done[pipeline, records] = output_dir
    return done[pipeline, records]

  return output_dir_of


@pytest.mark.slow
@pytest.mark.parametrize("pipeline,records", [("tfdata", "static"), ("dali", "static"),
                                              ("tfdata", "dynamic"), ("dali", "dynamic"),
                                              ("tfdata", "mixture")])
def test_sigkill_then_same_command_ends_with_identical_weights(pipeline, records, corpus,
                                                               uninterrupted, tmp_path):
  if pipeline == "dali":
    pytest.importorskip("nvidia.dali.plugin.tf", reason="nvidia-dali TF plugin not installed")
  output_dir = str(tmp_path / "out")
  command = _command(corpus, output_dir, pipeline, records)
  rt.kill_after_first_checkpoint(command, output_dir, STEPS)
  rt.run(command)
  rt.assert_identical(rt.checkpoint_variables(output_dir),
                      rt.checkpoint_variables(uninterrupted(pipeline, records)))
  with open(os.path.join(output_dir, stream.ORDER_FILE), encoding="utf-8") as f:
    resumed_order = json.load(f)
  with open(os.path.join(uninterrupted(pipeline, records), stream.ORDER_FILE),
            encoding="utf-8") as f:
    assert json.load(f) == resumed_order


@pytest.mark.slow  # two training programs
def test_two_deterministic_runs_end_with_identical_checkpoints(corpus, uninterrupted, tmp_path):
  output_dir = str(tmp_path / "out")
  rt.run(_command(corpus, output_dir, "tfdata"))
  variables = rt.checkpoint_variables(output_dir)
  rt.assert_identical(variables, rt.checkpoint_variables(uninterrupted("tfdata")))
  assert int(variables["global_step"]) == STEPS
  assert int(variables["data_position/micro_batches"]) == STEPS * 2
  # The weights moved since the run's middle checkpoint: equality above is not trivially true.
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  middle = os.path.join(output_dir, "model.ckpt-%d" % SAVE_STEPS)
  name = "bert/embeddings/word_embeddings"
  assert tf.train.load_variable(middle, name).tobytes() != variables[name].tobytes()
