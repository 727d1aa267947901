"""--fisher_file: the diagonal Fisher estimate of a base checkpoint's encoder, on disk.

A Fisher directory (tools/estimate_fisher.py writes it whole, or not at all: built in a scratch
directory beside it, then renamed):
  fisher.index, fisher.data-00000-of-00001, checkpoint
        a TF checkpoint (readable by tf.train.load_checkpoint): one float32 array F >= 0 for each
        penalised variable (penalty.penalised_names), under the variable's own name
        (bert/encoder/layer_0/attention/self/query/kernel, ...);
  manifest.json
        {"format": FORMAT,
         "base": {"checkpoint": the base checkpoint's absolute prefix,
                  "fingerprint": fingerprint(base)},
         "records": {"input_file": the glob(s) given, "files": [the files matched],
                     "records_read": records whose gradients were squared},
         "estimate": {"objective", "batch_size", "batches", "max_seq_length", "method"},
         "variables": {name: shape}, "statistics": {"mean", "max", "parameters"},
         "data": {"bytes": {file name: size} of the checkpoint's fisher.* files,
                  "sha256": data_digest(the arrays)}}.
--fisher_file names the directory (or its `fisher` prefix).

check(...) verifies it before the graph is built (every refusal one line naming the file and the
fix): the manifest's format and base fingerprint; the variables and shapes the run penalises;
each fisher.* file the size the manifest records (a truncated or replaced file is named); every
value finite and >= 0 (a mean of squares; a negative F would reward drifting from the base); and
the arrays' digest (Fisher data of another estimate under this manifest is refused). It reads the
arrays one at a time (memory: the largest variable).

fingerprint(checkpoint): what identifies a base's weights: the sha256 of its penalisable variables'
names and shapes, and the sha256 of the values of the 1-D ones among them (the biases and
LayerNorm parameters: a few hundred KB for a base model, and any training moves them), in name
order, as float32. A copy of the checkpoint, or the same weights written again (an import of its
transformers export), has the same fingerprint; another checkpoint has another.
"""
import hashlib
import json
import os

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.training.init_regularizer import penalty

FORMAT = "bert_fin fisher 2"  # 2: the manifest holds the data's sizes and digest
PREFIX = "fisher"
MANIFEST = "manifest.json"


def fingerprint(checkpoint):
  """{"shapes": sha256 hex, "values": sha256 hex} of a checkpoint prefix (module docstring)."""
  reader = tf.train.load_checkpoint(checkpoint)
  shapes = reader.get_variable_to_shape_map()
  names = sorted(name for name in shapes
                 if penalty.is_penalised(name) and not checkpoint_lib.is_training_state(name))
  values = hashlib.sha256()
  for name in names:
    if len(shapes[name]) == 1:
      values.update(name.encode("utf-8") + b"\0")
      values.update(np.ascontiguousarray(reader.get_tensor(name), dtype="<f4").tobytes())
  described = json.dumps([[name, list(shapes[name])] for name in names]).encode("utf-8")
  return {"shapes": hashlib.sha256(described).hexdigest(), "values": values.hexdigest()}


def data_digest(named_arrays):
  """sha256 hex of (name, shape, float32 little-endian values) of each (name, array) of
  named_arrays, an iterable in name order."""
  digest = hashlib.sha256()
  for name, value in named_arrays:
    digest.update(json.dumps([name, list(value.shape)]).encode("utf-8") + b"\0")
    digest.update(np.ascontiguousarray(value, dtype="<f4").tobytes())
  return digest.hexdigest()


def data_files(prefix):
  """{file name: bytes} of the files of the checkpoint `prefix` (prefix.index, prefix.data-*)."""
  directory, stem = os.path.split(prefix)
  return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(
      os.listdir(directory)) if name == stem + ".index" or name.startswith(stem + ".data-")}


def locate(fisher_file):
  """(directory, checkpoint prefix) of --fisher_file: the directory or its fisher prefix."""
  path = os.path.abspath(fisher_file)
  if os.path.isdir(path):
    return path, os.path.join(path, PREFIX)
  return os.path.dirname(path), path


def read_manifest(fisher_file):
  """The manifest dict of --fisher_file; ValueError (one line) when it has none, or not ours."""
  directory, _ = locate(fisher_file)
  path = os.path.join(directory, MANIFEST)

  def refusal(error):
    return ValueError("--fisher_file %s: %s is not a Fisher manifest (%s): estimate it again "
                      "with tools/estimate_fisher.py" % (fisher_file, path, error))

  manifest = io_utils.read_saved(path, json.loads, refusal)
  if manifest is None:
    raise ValueError("--fisher_file %s: no %s there: not the output of tools/estimate_fisher.py "
                     "(or an interrupted one)" % (fisher_file, MANIFEST))
  if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
    raise refusal("format %r, expected %r" % (
        manifest.get("format") if isinstance(manifest, dict) else manifest, FORMAT))
  return manifest


def check(fisher_file, init_checkpoint, shapes):
  """The Fisher checkpoint prefix (absolute) of --fisher_file, checked against the run: estimated
  on init_checkpoint's weights (the same fingerprint), holding every name of shapes ({penalised
  name: shape list}) with that shape, its data as its manifest describes it and valid (module
  docstring). ValueError (one line naming the file and the fix)."""
  manifest = read_manifest(fisher_file)
  _, prefix = locate(fisher_file)
  try:
    base = manifest["base"]
    base_path, base_print = base["checkpoint"], base["fingerprint"]
  except (KeyError, TypeError) as e:
    raise ValueError("--fisher_file %s: its manifest names no base checkpoint (%s): estimate it "
                     "again with tools/estimate_fisher.py" % (fisher_file, e)) from e
  if base_print != fingerprint(init_checkpoint):
    raise ValueError("--fisher_file %s was estimated on the base %s, whose weights are not "
                     "--init_checkpoint %s's: estimate the Fisher on %s (tools/estimate_fisher.py"
                     " --init_checkpoint=%s)" % (fisher_file, base_path, init_checkpoint,
                                                 init_checkpoint, init_checkpoint))
  try:
    held = dict(tf.train.list_variables(prefix))
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError("--fisher_file %s: cannot read the checkpoint %s (%s)" % (
        fisher_file, prefix, str(e).splitlines()[0])) from e
  missing = sorted(name for name in shapes if name not in held)
  if missing:
    raise ValueError("--fisher_file %s lacks %d penalised variable(s) (%s): estimate it with the "
                     "run's --objective and --bert_config_file" % (
                         fisher_file, len(missing), ", ".join(missing[:3])))
  other = ["%s (%s, the model %s)" % (name, held[name], shape)
           for name, shape in sorted(shapes.items()) if list(held[name]) != list(shape)]
  if other:
    raise ValueError("--fisher_file %s has %d variable(s) of another shape: %s" % (
        fisher_file, len(other), "; ".join(other[:3])))
  _check_data(fisher_file, prefix, manifest, sorted(held))
  return prefix


def _refused(fisher_file, what):
  return ValueError("--fisher_file %s: %s: estimate it again with tools/estimate_fisher.py"
                    % (fisher_file, what))


def _check_data(fisher_file, prefix, manifest, names):
  """The fisher.* files' sizes against the manifest, then every array of `names` (all the
  checkpoint holds) finite and >= 0, then their digest; ValueError (one line)."""
  data = manifest.get("data")
  if not isinstance(data, dict) or not isinstance(data.get("bytes"), dict):
    raise _refused(fisher_file, "its manifest records no sizes and digest of the Fisher data")
  sizes = data_files(prefix)
  for name, size in sorted(data["bytes"].items()):
    if sizes.get(name) != size:
      raise _refused(fisher_file, "%s holds %s bytes, the manifest says %s (truncated or "
                     "replaced)" % (name, sizes.get(name, "no"), size))
  reader = tf.train.load_checkpoint(prefix)

  def arrays():
    for name in names:
      try:
        value = reader.get_tensor(name)
      except (tf.errors.OpError, ValueError) as e:
        raise _refused(fisher_file, "cannot read %s (%s)" % (name, str(e).splitlines()[0])) from e
      _check_values(fisher_file, name, value)
      yield name, value

  if data_digest(arrays()) != data.get("sha256"):
    raise _refused(fisher_file, "its arrays are not the ones its manifest describes (another "
                   "estimate's data under this manifest?)")


def value_problem(name, value):
  """What makes the array F of `name` no Fisher estimate (a value NaN, inf or negative), or None."""
  bad = ~np.isfinite(value)
  if bad.any():
    return "%s holds %d non-finite value(s) of %d" % (name, int(bad.sum()), value.size)
  negative = value < 0
  if negative.any():
    return ("%s holds %d negative value(s) (the smallest %g); an estimate of the Fisher is a mean "
            "of squares, >= 0 (a negative one rewards drifting away from the base)"
            % (name, int(negative.sum()), float(value.min())))
  return None


def _check_values(fisher_file, name, value):
  """ValueError unless every value of the array F of `name` is finite and >= 0."""
  problem = value_problem(name, value)
  if problem:
    raise _refused(fisher_file, problem)


def statistics(tensors):
  """{"parameters", "mean", "max"} of {name: F}: the scale --init_regularizer_weight meets."""
  count = sum(int(value.size) for value in tensors.values())
  total = sum(float(value.sum(dtype=np.float64)) for value in tensors.values())
  largest = max(float(value.max()) for value in tensors.values()) if tensors else 0.0
  return {"parameters": count, "mean": total / count if count else 0.0, "max": largest}


def write(output_dir, tensors, manifest):
  """Writes {name: float32 F} and the manifest (FORMAT, variables, statistics and data added) as the
  Fisher directory output_dir, which must not exist or be empty: built in a scratch directory
  beside it and renamed, so it appears whole. Returns the manifest written."""
  manifest = dict(manifest, format=FORMAT,
                  variables={name: list(value.shape) for name, value in sorted(tensors.items())},
                  statistics=statistics(tensors))
  output_dir = os.path.abspath(output_dir)
  parent = os.path.dirname(output_dir)
  os.makedirs(parent, exist_ok=True)
  with io_utils.work_dir(parent, prefix="fisher-") as scratch:
    checkpoint_lib.write_checkpoint(os.path.join(scratch, PREFIX), tensors)
    manifest["data"] = {"bytes": data_files(os.path.join(scratch, PREFIX)),
                        "sha256": data_digest((name, tensors[name]) for name in sorted(tensors))}
    io_utils.write_json_atomic(os.path.join(scratch, MANIFEST), manifest)
    if os.path.isdir(output_dir):
      os.rmdir(output_dir)  # empty (checked before): the rename needs its place
    os.rename(scratch, output_dir)
  return manifest


def check_output_dir(output_dir):
  """ValueError unless output_dir can be created (or is an empty directory)."""
  io_utils.check_output_dir(output_dir, "--output_dir")
  if os.path.isdir(output_dir) and os.listdir(output_dir):
    raise ValueError("--output_dir %s is not empty: give a new directory for the Fisher estimate"
                     % output_dir)
