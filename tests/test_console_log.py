"""console_log: quiet by default (TensorFlow's deprecation notices and Estimator chatter gone, bert_fin's
own lines kept), everything back with BERT_FIN_VERBOSE=1 / --verbose."""
import logging
import os
import subprocess
import sys

from bert_fin import console_log
from helpers import REPO

TF_DIR = "/venv/lib/python3.11/site-packages/tensorflow/python"


def _record(pathname, level, message, module=None):
  record = logging.LogRecord("tensorflow", level, pathname, 1, message, None, None)
  if module:
    record.module = module
  return record


def test_quiet_rule_keeps_bert_fin_and_what_users_act_on():
  own = os.path.join(REPO, "bert_fin", "training", "estimator.py")
  assert console_log.keep_record(_record(own, logging.INFO, "***** Running training *****"))
  assert console_log.keep_record(_record(os.path.join(REPO, "run_pretraining.py"), logging.INFO, "x"))
  # TensorFlow's estimator.py has the same base name as ours: the directory decides
  tf_estimator = "/venv/site-packages/tensorflow_estimator/python/estimator/estimator.py"
  assert not console_log.keep_record(_record(tf_estimator, logging.INFO, "Calling model_fn."))
  assert not console_log.keep_record(_record(TF_DIR + "/training/monitored_session.py",
                                             logging.INFO, "Graph was finalized."))
  assert console_log.keep_record(_record(TF_DIR + "/training/basic_session_run_hooks.py",
                                         logging.INFO, "Saving checkpoints for 400 into m/x."))
  assert not console_log.keep_record(_record(
      TF_DIR + "/util/deprecation.py", logging.WARNING,
      "From x.py:1: RunConfig.__init__ is deprecated and will be removed in a future version.",
      module="deprecation"))
  assert console_log.keep_record(_record(TF_DIR + "/training/saver.py", logging.WARNING,
                                         "a real problem TensorFlow reports"))
  assert console_log.keep_record(_record(TF_DIR + "/training/saver.py", logging.ERROR, "boom"))


def test_ranks_other_than_0_print_only_warnings_and_errors():
  """Under mpirun a rank > 0 repeats rank 0's INFO lines; quiet mode keeps only its problems."""
  own = os.path.join(REPO, "bert_fin", "training", "estimator.py")
  assert console_log.keep_record(_record(own, logging.INFO, "***** Running training *****"), 0)
  assert not console_log.keep_record(_record(own, logging.INFO, "***** Running training *****"), 1)
  assert not console_log.keep_record(_record(TF_DIR + "/training/basic_session_run_hooks.py",
                                             logging.INFO, "Saving checkpoints for 4 into m/x."), 3)
  assert console_log.keep_record(_record(own, logging.WARNING, "input: a file changed"), 1)
  assert console_log.keep_record(_record(TF_DIR + "/training/saver.py", logging.ERROR, "boom"), 2)


# A deprecated TF1 API: RunConfig logs a deprecation notice.
PROGRAM = """
from bert_fin import console_log
console_log.configure()
import tensorflow_estimator as tfe
tfe.estimator.RunConfig()
"""


def _run(**env):
  environ = {k: v for k, v in os.environ.items() if k not in ("BERT_FIN_VERBOSE",
                                                              "TF_CPP_MIN_LOG_LEVEL")}
  environ.update(env, PYTHONPATH=REPO)
  result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          env=environ, timeout=300, cwd=REPO)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stderr


def test_deprecation_notices_gone_by_default_and_back_when_verbose():
  quiet = _run()
  assert "is deprecated" not in quiet and "Instructions for updating" not in quiet, quiet[-2000:]
  assert "oneDNN custom operations" not in quiet  # TF's C++ INFO lines are off too
  verbose = _run(BERT_FIN_VERBOSE="1")
  assert "RunConfig.__init__" in verbose and "is deprecated" in verbose, verbose[-2000:]
