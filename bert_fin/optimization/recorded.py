"""optimizer.json: which optimizer a run directory's checkpoints were trained with.

Every training program (run_pretraining, and the fine-tuning programs through
finetune/estimator_skeleton.py) writes {"optimizer": name} beside its checkpoints before training
(the canonical name: adamweightdecay is written adam) and checks it before resuming: adam and
lamb keep the same slots, so a checkpoint continued with the other optimizer would restore
without an error and train on with the wrong algorithm.
"""
import json
import os

from bert_fin import io_utils
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.optimization import names as optimizer_names

OPTIMIZER_FILE = "optimizer.json"


def write_optimizer(output_dir, optimizer):
  """optimizer.json beside the checkpoints: the name of the optimizer that trains them
  (optimizer_names.canonical: adamweightdecay is written adam; atomic write)."""
  with io_utils.atomic_output(os.path.join(output_dir, OPTIMIZER_FILE)) as f:
    f.write(json.dumps({"optimizer": optimizer_names.canonical(optimizer)}, indent=2) + "\n")


def check_optimizer(output_dir, optimizer, flag, without_record=None):
  """Refuses to continue output_dir's checkpoint with another optimizer than its record's.

  Args:
    output_dir: str, the run directory (nothing is checked when it holds no checkpoint).
    optimizer: str, the optimizer this run asks for (optimizer_names.ACCEPTED).
    flag: str, the program's optimizer flag, named in the message ("--optimizer_type").
    without_record: str, the optimizer a checkpoint without optimizer.json was trained with;
      None: such a directory is not checked (it resumes as before the record).

  Raises:
    ValueError: one line, naming the recorded optimizer and the flag; or optimizer.json is not a
      record of a known optimizer. Names are compared as optimizer_names.canonical (a record of
      adamweightdecay resumes with adam, and back).
  """
  if not checkpoint_lib.resolve_checkpoint(output_dir, run_dir=True):
    return
  path = os.path.join(output_dir, OPTIMIZER_FILE)
  saved = io_utils.read_saved(
      path, lambda text: _known_optimizer(json.loads(text)["optimizer"]), lambda e: ValueError(
          "%s: not an optimizer record (%s); delete it or use a new --output_dir" % (path, e)),
      default=without_record)
  if saved is None or optimizer_names.canonical(saved) == optimizer_names.canonical(optimizer):
    return
  raise ValueError("--output_dir %s holds a checkpoint trained with %s=%s, this run asks for "
                   "%s=%s: resume with %s=%s or use a new --output_dir" % (
                       output_dir, flag, saved, flag, optimizer, flag, saved))


def _known_optimizer(name):
  """name when optimizer_names.canonical knows it; else its ValueError (or TypeError)."""
  optimizer_names.canonical(name)
  return name
