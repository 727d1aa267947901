"""run_pretraining with a mixture and per-source evaluation: --input_source / --eval_source /
--best_eval_source refusals (one line; mismatched layouts name both sources, exit 2, nothing
written), a mixture trained and evaluated per source (the eval block's NAME/ keys equal to
evaluating each set alone; TensorBoard's eval_NAME directories), continuous eval keeping best/ by
the chosen source's masked_lm_loss. (The mixture's stream: test_mixture.py; kill -9 and exact
resume of a mixture: test_resume.py.)"""
import contextlib
import io
import os

import pytest

from helpers import pretraining_runs as pt
import tiny_data

from bert_fin.input import stream
from bert_fin.training import flags as train_flags
from bert_fin.training import run as run_lib
from bert_fin.training import sources
from bert_fin.training.monitor import eval_results


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
  """A directory with news/ (2 files x 8 records), wiki/ (2 x 24) and wide/ (seq 64)."""
  base = tmp_path_factory.mktemp("corpora")
  tiny_data.write_records(str(base / "news"), 2, 8, seq_len=pt.SEQ, max_predictions=pt.P, seed=1,
                          prefix="news")
  tiny_data.write_records(str(base / "wiki"), 2, 24, seq_len=pt.SEQ, max_predictions=pt.P,
                          seed=2, prefix="wiki")
  tiny_data.write_records(str(base / "wide"), 2, 4, seq_len=64, max_predictions=pt.P, seed=3,
                          prefix="wide")
  return base


def _glob(corpora, name):
  return str(corpora / name / "*.tfrecord")


def _argv(tmp_path, corpora, train=("news:1", "wiki:3"), evals=("news", "wiki"), **flags):
  argv = pt.tiny_argv(tmp_path, None, **flags)
  for item in train:
    name, weight = item.split(":")
    argv.append("--input_source=%s=%s:%s" % (name, _glob(corpora, name), weight))
  return argv + ["--eval_source=%s=%s" % (name, _glob(corpora, name)) for name in evals]


@pytest.mark.parametrize("extra,message", [
    (["--input_file=x"], "--input_file and --input_source are given together"),
    (["--input_pipeline=dali"], r"--input_source needs --input_pipeline=tfdata"),
    (["--input_source=news=y:2"], "the name 'news' is given twice"),
    (["--input_source=bad name=y:1"], "the name 'bad name' may hold only letters"),
    (["--input_source=web=y"], r"expected NAME=GLOB:WEIGHT"),
    (["--input_source=web=y:-1"], "the weight must be a positive number, got -1"),
    (["--eval_source=news"], "--eval_source=news: expected NAME=GLOB"),
    (["--best_eval_source=web"], "--best_eval_source=web names no eval set .they are: news, "
                                 "wiki."),
    (["--best_eval_source=news"], "--best_eval_source=news chooses the checkpoint "
                                  "--eval_continuous keeps in best/, and this run evaluates no "
                                  "stream of checkpoints"),
    (["--input_source=web=y:1e308"], r"the largest weight is 1e\+308 times the smallest"),
])
def test_source_flags_that_cannot_run_are_one_line(tmp_path, corpora, extra, message):
  values = pt.parse_flags(_argv(tmp_path, corpora, do_train=True) + extra)
  with pytest.raises(ValueError, match=message) as error:
    train_flags.validate_flags(values)
  assert "\n" not in str(error.value)


def test_best_metric_is_the_chosen_source_else_the_unprefixed_set_else_the_first():
  unnamed, news = sources.EvalSet("", ("a",)), sources.EvalSet("news", ("b",))
  wiki = sources.EvalSet("wiki", ("c",))
  assert sources.best_metric([news, wiki], "wiki") == "wiki/masked_lm_loss"
  assert sources.best_metric([unnamed, news]) == "masked_lm_loss"
  assert sources.best_metric([news, wiki]) == "news/masked_lm_loss"
  merged = eval_results.merge_results([("", {"loss": 1.0, "global_step": 3}),
                                       ("news", {"loss": 2.0, "global_step": 3})])
  assert merged == {"loss": 1.0, "news/loss": 2.0, "global_step": 3}


def test_sources_of_different_layouts_are_refused_naming_both_before_writing(tmp_path, corpora):
  argv = _argv(tmp_path, corpora, train=("news:1", "wide:1"), evals=(), do_train=True,
               num_train_steps=2)
  proc = pt.run_cli(tmp_path, argv)
  assert proc.returncode == 2, proc.stderr[-3000:]
  lines = [line for line in proc.stderr.splitlines() if "error:" in line]
  assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
  assert ("--input_source news (news-00000.tfrecord: max_seq_length=32 max_predictions=5) and "
          "--input_source wide (wide-00000.tfrecord: max_seq_length=64 max_predictions=5) hold "
          "records of different layouts") in lines[0]
  out = tmp_path / "out"
  assert not out.exists() or not os.listdir(str(out))


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory, corpora):
  """(output_dir, eval result) of 4 updates on news:1 + wiki:3, evaluated on news and wiki."""
  tmp_path = tmp_path_factory.mktemp("mixed")
  values = pt.parse_flags(_argv(tmp_path, corpora, do_train=True, do_eval=True,
                                num_train_steps=4, save_checkpoints_steps=2, max_eval_steps=2,
                                log_every_n_steps=2))
  stdout = io.StringIO()
  with contextlib.redirect_stdout(stdout):
    result = pt.train(values)
  return values.output_dir, result, stdout.getvalue()


@pytest.mark.slow
def test_per_source_eval_numbers_equal_each_set_evaluated_alone(mixed_run, corpora, tmp_path):
  output_dir, result, stdout = mixed_run
  assert result["global_step"] == 4
  assert "  news/masked_lm_accuracy = " in stdout and "  wiki/next_sentence_loss = " in stdout
  for name in ("news", "wiki"):
    alone = pt.train(pt.parse_flags(pt.tiny_argv(
        tmp_path, _glob(corpora, name), output_dir=output_dir, do_eval=True, max_eval_steps=2,
        eval_input_file=_glob(corpora, name))))
    for key in ("loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                "next_sentence_loss"):
      assert result["%s/%s" % (name, key)] == alone[key], (name, key)
    # TensorBoard: Estimator.evaluate(name=NAME) writes its summaries to eval_NAME/.
    assert any(f.startswith("events.") for f in os.listdir(os.path.join(output_dir,
                                                                        "eval_" + name)))
  assert result["news/masked_lm_loss"] != result["wiki/masked_lm_loss"]


@pytest.mark.slow
def test_continuous_eval_reports_each_source_and_keeps_best_by_the_chosen_one(mixed_run, corpora,
                                                                             tmp_path):
  from bert_fin.training.monitor import continuous_eval  # pylint: disable=import-outside-toplevel
  output_dir, _, _ = mixed_run
  values = pt.parse_flags(_argv(tmp_path, corpora, output_dir=output_dir, do_eval=True,
                                eval_continuous=True, num_train_steps=4, max_eval_steps=1,
                                best_eval_source="wiki", eval_timeout_secs=0))
  last = pt.train(values)
  assert last["global_step"] == 4 and "wiki/masked_lm_loss" in last
  records = continuous_eval.read_results(output_dir)
  assert records[-1]["news/masked_lm_loss"] == last["news/masked_lm_loss"]
  assert continuous_eval.best_value(output_dir, "wiki/masked_lm_loss") == pytest.approx(
      last["wiki/masked_lm_loss"])


def test_a_start_that_read_no_data_binds_nothing_a_corrected_command_starts_anew(tmp_path,
                                                                             corpora):
  """The data_order.json of a start that crashed before its first update, with weights the
  schedule cannot represent: no checkpoint holds a data position, so the corrected command is no
  resume and is not refused as one (its order replaces the file when training starts)."""
  out = tmp_path / "out"
  out.mkdir()
  crashed = stream.MixedOrder(7, 1, 4, "files", [
      stream.Source("news", _glob(corpora, "news"), 1.0),
      stream.Source("wiki", _glob(corpora, "wiki"), 1.0)])
  (out / stream.ORDER_FILE).write_text(
      crashed.to_json().replace('"weight": 1.0', '"weight": 1e308', 1))
  values = pt.parse_flags(_argv(tmp_path, corpora, do_train=True, num_train_steps=2))
  run = run_lib.resolve(values, pt.workers(1))
  assert [(s.name, s.weight) for s in run.order().sources] == [("news", 1.0), ("wiki", 3.0)]
  assert run.decided.start_step == 0 and not run.decided.order_restarted
