"""google's eval results: the '***** Eval results *****' block and output_dir/eval_results.txt."""
import os

from bert_fin import io_utils

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


def write_eval_results(output_dir, result):
  """Prints the eval block once (stdout, not echoed through logging); writes
  output_dir/eval_results.txt."""
  print(format_eval_results(result), flush=True)
  return write_results_file(os.path.join(output_dir, EVAL_RESULTS_FILE), result)
