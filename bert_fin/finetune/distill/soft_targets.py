"""The teacher's logits of the training rows: computed once, stored beside the student's
checkpoints with the teacher's fingerprint, so that a student step never runs the teacher and a
resumed run reads the same targets.

  fingerprint   sha256 of the teacher (its checkpoint's index and data files, its config) and of
                the rows it reads (every input array; with --unlabeled_file the distinct rows
                and their order, unlabeled.teacher_rows), hex; with --ensemble_dirs also every
                other teacher's checkpoint and the temperature (the stored targets' T);
  compute       the teacher's logits of the rows (Estimator.predict on its checkpoint);
  stored_or_computed  a run's: the stored ones, else computed (each teacher's, then one array
                of an ensemble's: teachers.mean_at_temperature) and (the chief) stored;
  write / read  TEACHER_FILE (.npz: logits float32 [n, L], a tagger's emission scores
                [n, S, L]: n x S x L x 4 bytes, 16 MB for 4,000 windows of 64 pieces and 16
                tags; held in memory while the student trains), fingerprint), atomic; read
                checks the fingerprint and shape and returns None when there is no file.
"""
import glob
import hashlib
import os
import shutil
import tempfile

import numpy as np

from bert_fin import io_utils
from bert_fin.finetune import batches
from bert_fin.finetune import estimator_skeleton

TEACHER_FILE = "teacher_logits.npz"
_CHUNK = 1 << 20


def _hash_file(digest, path):
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(_CHUNK), b""):
      digest.update(block)


def _hash_checkpoint(digest, checkpoint):
  for path in sorted(glob.glob(checkpoint + ".*")):
    digest.update(os.path.basename(path).encode("utf-8"))
    _hash_file(digest, path)


def fingerprint(teacher_checkpoint, teacher_config_json, arrays, ensemble=(), temperature=None):
  """Hex sha256 of the teacher checkpoint's files (prefix.index, prefix.data-*), its config (a
  JSON string) and the rows ({name: np.ndarray}, in name order); with an ensemble ([checkpoint
  prefix] of the other teachers, in order) also their files and the temperature the stored
  targets were averaged at (one teacher's print is unchanged by either)."""
  digest = hashlib.sha256()
  _hash_checkpoint(digest, teacher_checkpoint)
  digest.update(teacher_config_json.encode("utf-8"))
  for name in sorted(arrays):
    digest.update(name.encode("utf-8"))
    digest.update(str(arrays[name].shape).encode("utf-8"))
    digest.update(np.ascontiguousarray(arrays[name]).tobytes())
  for checkpoint in ensemble:
    digest.update(b"ensemble")
    _hash_checkpoint(digest, checkpoint)
  if ensemble:
    digest.update(("temperature %r" % float(temperature)).encode("utf-8"))
  return digest.hexdigest()


def compute(model_fn, checkpoint, arrays, batch_size, make_estimator):
  """float32 [n, L] (a tagger's [n, S, L]): the teacher's logits of every row of `arrays`, in
  row order.

  model_fn: the teacher's predict model_fn; checkpoint: its prefix; make_estimator(model_fn,
  model_dir) -> tf.estimator.Estimator (the run's RunConfig) in a scratch model_dir removed after.
  """
  model_dir = tempfile.mkdtemp(prefix="bert_fin_distill_teacher_")
  try:
    estimator = make_estimator(model_fn, model_dir)
    logits = [p["logits"] for p in estimator.predict(
        input_fn=batches.input_fn_builder(arrays, batch_size, False), checkpoint_path=checkpoint)]
  finally:
    shutil.rmtree(model_dir, ignore_errors=True)
  if len(logits) != batches.num_rows(arrays):
    raise RuntimeError("the teacher predicted %d rows for %d" % (len(logits),
                                                                 batches.num_rows(arrays)))
  return np.asarray(logits, dtype=np.float32)


def stored_or_computed(stored, teachers, combine, arrays, settings, dist, print_, say, what):
  """The teacher's logits of `arrays`' rows: `stored` (read from --output_dir) when not None,
  else compute's on every rank (an Estimator of the run's settings) for each teacher, combined
  into one array, which the chief writes to TEACHER_FILE with the fingerprint print_.

  Args:
    stored: float32 array or None (read's result).
    teachers: [(model_fn, checkpoint)], compute's, --teacher_dir's first (then --ensemble_dirs').
    combine: [float32 array] -> float32 array, one a teacher in order -> the stored targets
      (teachers.mean_at_temperature at the run's temperature).
    arrays: {name: array}, the distinct rows the teacher reads (unlabeled.teacher_rows).
    settings: the run's (its --output_dir, --predict_batch_size, RunConfig); dist: the workers.
    say: say(line), one line a decision.
    what: (the outputs' name, the rows' name) for the lines, e.g. ("logits", "rows").
  """
  outputs, rows = what
  if stored is not None:
    say("teacher %s: read from %s" % (outputs, TEACHER_FILE))
    return stored
  each = []
  for model_fn, checkpoint in teachers:
    each.append(compute(model_fn, checkpoint, arrays, settings.data.predict_batch_size,
                        lambda fn, model_dir: estimator_skeleton.estimator(fn, settings, dist,
                                                                           model_dir)))
    if len(teachers) > 1:
      say("teacher %d of %d (%s): %s of %d %s" % (len(each), len(teachers), checkpoint,
                                                  outputs, len(each[-1]), rows))
  logits = combine(each)
  if dist.is_chief:
    write(settings.output.output_dir, logits, print_)
    say("%s %s of %d %s (%.1f MB) stored in %s" % (
        "teacher" if len(teachers) == 1 else "the %d teachers' mean" % len(teachers), outputs,
        len(logits), rows, logits.nbytes / 1e6, TEACHER_FILE))
  return logits


def write(output_dir, logits, print_):
  """TEACHER_FILE in output_dir (atomic): the logits and the fingerprint `print_`."""
  with io_utils.atomic_output(os.path.join(output_dir, TEACHER_FILE), mode="wb",
                              encoding=None) as f:
    np.savez(f, logits=logits, fingerprint=np.array(print_))


def read(output_dir, print_, shape):
  """float32 `shape` ([rows, L], a tagger's [rows, S, L]): the stored logits, or None without
  TEACHER_FILE. ValueError (one line) for a file of another teacher or other rows
  (fingerprint), or of another shape."""
  path = os.path.join(output_dir, TEACHER_FILE)
  if not os.path.isfile(path):
    return None
  try:
    with np.load(path, allow_pickle=False) as stored:
      saved_print, logits = str(stored["fingerprint"]), stored["logits"]
  except (OSError, KeyError, ValueError) as e:
    raise ValueError("%s: not run_distill's teacher logits (%s): delete it or use a new "
                     "--output_dir" % (path, e))
  if saved_print != print_:
    raise ValueError("%s holds the logits of another teacher or other training rows (its "
                     "fingerprint differs): resume with the same --teacher_dir and data (and "
                     "--unlabeled_weight, --seed and epochs: the rows' order), or use a new "
                     "--output_dir" % path)
  if logits.shape != tuple(shape) or logits.dtype != np.float32:
    raise ValueError("%s: logits of shape %s, expected %s: delete it or use a new "
                     "--output_dir" % (path, list(logits.shape), list(shape)))
  return logits
