"""google's eval results: the '***** Eval results *****' block and output_dir/eval_results.txt, and
the evaluation of several named eval sets (--eval_source) into one such block."""
import os

from bert_fin import io_utils
from bert_fin.training.monitor import plateau

EVAL_RESULTS_FILE = "eval_results.txt"


def format_eval_results(result):
  """google's eval block: '***** Eval results *****' then '  key = value' for sorted keys."""
  lines = ["***** Eval results *****"]
  lines += ["  %s = %s" % (key, str(result[key])) for key in sorted(result.keys())]
  return "\n".join(lines)


def write_results_file(path, result):
  """google's eval_results.txt at path: 'key = value' lines, sorted keys, written atomically."""
  with io_utils.atomic_output(path) as f:
    for key in sorted(result.keys()):
      f.write("%s = %s\n" % (key, str(result[key])))
  return path


def read_results_file(path):
  """google's eval_results.txt ('key = value' lines) at path -> {key: value string}."""
  values = {}
  with open(path, encoding="utf-8", errors="replace") as f:
    for line in f:
      key, _, value = line.partition(" = ")
      values[key.strip()] = value.strip()
  return values


def write_eval_results(output_dir, result):
  """Prints the eval block once (stdout, not echoed through logging), and the warning of a
  masked LM still on the unigram plateau (plateau.py); writes output_dir/eval_results.txt."""
  print(format_eval_results(result), flush=True)
  warning = plateau.plateau_line(result)
  if warning:
    print(warning, flush=True)
  return write_results_file(os.path.join(output_dir, EVAL_RESULTS_FILE), result)


def merge_results(named_results):
  """One eval result of [(name, result dict)]: the unnamed set's keys as they are, each named
  set's as NAME/key (e.g. news/masked_lm_accuracy), global_step once."""
  merged = {}
  for name, result in named_results:
    for key, value in result.items():
      merged[key if not name or key == "global_step" else "%s/%s" % (name, key)] = value
  return merged


def evaluate_sets(estimator, eval_sets, max_eval_steps, checkpoint_path=None):
  """The merged result of Estimator.evaluate on each eval set ([(name, input_fn)]; a named set
  evaluated under name=NAME, so its TensorBoard summaries go to model_dir/eval_NAME/)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  results = []
  for name, input_fn in eval_sets:
    if name:
      tf.logging.info("  Eval set %s", name)
    results.append((name, estimator.evaluate(input_fn=input_fn, steps=max_eval_steps,
                                             checkpoint_path=checkpoint_path, name=name or None)))
  return merge_results(results)
