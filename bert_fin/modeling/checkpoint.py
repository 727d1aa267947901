"""Warm-starting from a google-bert (or bert_fin) checkpoint, with a by-name report.

Checkpoint names are google's (`bert/encoder/layer_0/attention/self/query/kernel`), graph variable
names are the same without the `:0` suffix, so the mapping is the identity on names.
"""
import collections
import glob
import os
import re

import tensorflow.compat.v1 as tf

# Checkpoint entries that are training state, not model weights: never reported as unused.
# train_step/ holds the training step's bookkeeping (the loss scale of --amp:
# training/graph/step.py), data_position/ the micro-batches consumed (input/stream.py); adam_step
# adamw's update count; distill_fit/ run_distill's projections of a student's hidden states onto
# its teacher's width (finetune/distill/matching.py): trained for that loss alone, no model reads
# them, so the exports and the yardstick leave them out as they leave the optimizer's slots.
DISTILL_FIT_SCOPE = "distill_fit"
_TRAINING_STATE = re.compile(r"(^|/)(adam_m|adam_v|Adam|Adam_1|Momentum|LAMB\w*)$|^global_step$|"
                             r"^adam_step$|(^|/)(beta1_power|beta2_power)$|^loss_scale|^good_steps$|"
                             r"^train_step/|^data_position/|^" + DISTILL_FIT_SCOPE + "/")

class CheckpointError(ValueError):
  """--init_checkpoint cannot be used: unreadable, or shapes differ (the message lists them)."""


CheckpointReport = collections.namedtuple(
    "CheckpointReport",
    ["checkpoint", "mapped", "missing_in_checkpoint", "unused_in_checkpoint"])
CheckpointReport.__doc__ = """Result of init_from_checkpoint. mapped: graph variable names
initialized from the checkpoint; missing_in_checkpoint: graph variables the checkpoint lacks (they
keep their initializer); unused_in_checkpoint: checkpoint variables no graph variable takes
(optimizer slots and global_step left out). All sorted lists of names."""


def variable_name(var):
  """A variable's name without the `:0` output suffix (its checkpoint name).

  Args:
    var: a tf.Variable (anything with `.name`).

  Returns:
    str: 'bert/encoder/kernel:0' -> 'bert/encoder/kernel'. The optimizers derive their slot
    names from it.
  """
  match = re.match("^(.*):\\d+$", var.name)
  return match.group(1) if match else var.name


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
  """google's helper: maps the checkpoint's variables onto the graph's of the same name.

  Args:
    tvars: the graph variables.
    init_checkpoint: checkpoint prefix or directory.

  Returns:
    (assignment_map: OrderedDict {checkpoint name: graph name}, initialized_variable_names:
    {name: 1, name + ":0": 1}) for the variables present in both.
  """
  name_to_variable = collections.OrderedDict((variable_name(v), v) for v in tvars)
  assignment_map = collections.OrderedDict()
  initialized_variable_names = {}
  for name, _ in tf.train.list_variables(init_checkpoint):
    if name not in name_to_variable:
      continue
    assignment_map[name] = name
    initialized_variable_names[name] = 1
    initialized_variable_names[name + ":0"] = 1
  return assignment_map, initialized_variable_names


def is_training_state(name):
  """True for optimizer slots, global_step and loss-scale state in a checkpoint."""
  return bool(_TRAINING_STATE.search(name))


def resolve_checkpoint(path, run_dir=False):
  """The checkpoint `path` names: a directory's latest, or a prefix as given.

  Args:
    path: a directory (its latest checkpoint, by its `checkpoint` state file), or a checkpoint
      prefix (out/model.ckpt-1000, returned unchanged: whether it can be read is the reader's
      to say); None or "" names none.
    run_dir: path is a run's output directory: anything but an existing directory (a run not
      started yet) holds no checkpoint, and is never taken as a prefix.

  Returns:
    The checkpoint prefix (str), or None: path names none, or the directory holds none.
  """
  if not path:
    return None
  if os.path.isdir(path):
    return tf.train.latest_checkpoint(path)
  return None if run_dir else path


def check_local_files(init_checkpoint):
  """CheckpointError when a local checkpoint's files (a directory's `checkpoint` state file, the
  prefix's .index and .data-* files) exist but are not regular files: TensorFlow would block on
  a FIFO or read a device for ever. Remote paths (gs://) and missing files pass (TF says)."""
  if "://" in str(init_checkpoint):
    return
  prefix = str(init_checkpoint)
  if os.path.isdir(prefix):
    state = os.path.join(prefix, "checkpoint")
    if os.path.exists(state) and not os.path.isfile(state):
      raise CheckpointError("init_from_checkpoint: %s is not a regular file (a FIFO or device?): "
                            "refused" % state)
    prefix = resolve_checkpoint(prefix) or ""
  for path in [prefix + ".index"] + glob.glob(glob.escape(prefix) + ".data-*"):
    if prefix and os.path.exists(path) and not os.path.isfile(path):
      raise CheckpointError("init_from_checkpoint: %s is not a regular file (a FIFO or device?): "
                            "refused" % path)


def checkpoint_shapes(init_checkpoint):
  """The variables of a checkpoint and their shapes.

  Args:
    init_checkpoint: checkpoint prefix or directory.

  Returns:
    {variable name: shape list}.

  Raises:
    CheckpointError: the checkpoint cannot be read (check_local_files first).
  """
  check_local_files(init_checkpoint)
  try:
    return dict(tf.train.list_variables(init_checkpoint))
  except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError) as e:
    raise CheckpointError("init_from_checkpoint: cannot read checkpoint %r: %s"
                          % (init_checkpoint, e)) from e


def init_from_checkpoint(init_checkpoint, tvars=None, log=print):
  """Makes the graph's variables initialize from `init_checkpoint` and reports what matched.

  Args:
    init_checkpoint: checkpoint prefix or directory.
    tvars: the variables to restore (default: tf.trainable_variables()).
    log: a function taking one string (print, tf.logging.info, ...), or None.

  Returns:
    CheckpointReport (mapped, missing and unused names; also logged through `log`).

  Raises:
    CheckpointError: (a ValueError, one line: how many variables and the first, in graph
      order) a variable's shape differs from the checkpoint's, or the checkpoint cannot be read.
  """
  if tvars is None:
    tvars = tf.trainable_variables()
  ckpt_shapes = checkpoint_shapes(init_checkpoint)
  assignment_map, _ = get_assignment_map_from_checkpoint(tvars, init_checkpoint)
  graph_vars = {variable_name(v): v for v in tvars}
  mismatched = ["%s: graph %s, checkpoint %s" % (name, graph_vars[name].shape.as_list(),
                                                 ckpt_shapes[name])
                for name in graph_vars  # graph order: the first is the first built
                if name in assignment_map
                and graph_vars[name].shape.as_list() != list(ckpt_shapes[name])]
  if mismatched:
    raise CheckpointError("init_from_checkpoint: shape mismatch for %d variable(s) of %s (is it "
                          "a checkpoint of this --bert_config_file?); the first: %s" % (
                              len(mismatched), init_checkpoint, mismatched[0]))
  tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
  report = CheckpointReport(
      checkpoint=init_checkpoint,
      mapped=sorted(assignment_map),
      missing_in_checkpoint=sorted(set(graph_vars) - set(assignment_map)),
      unused_in_checkpoint=sorted(name for name in ckpt_shapes
                                  if name not in graph_vars and not is_training_state(name)))
  if log is not None:
    log("init_from_checkpoint %s: %d of %d variables mapped" % (
        init_checkpoint, len(report.mapped), len(graph_vars)))
    for name in report.missing_in_checkpoint:
      log("  not in checkpoint (keeps its initializer): %s" % name)
    for name in report.unused_in_checkpoint:
      log("  in checkpoint but unused: %s" % name)
  return report


def model_tensors(checkpoint):
  """Reads the model weights of a checkpoint into memory.

  Args:
    checkpoint: checkpoint prefix or directory.

  Returns:
    {google name: np.ndarray}, in name order, training state (is_training_state) left out.
  """
  reader = tf.train.load_checkpoint(checkpoint)
  names = [name for name in reader.get_variable_to_shape_map() if not is_training_state(name)]
  return {name: reader.get_tensor(name) for name in sorted(names)}


def write_checkpoint(prefix, tensors):
  """Writes arrays as a TF checkpoint.

  Readable by tf.train.load_checkpoint, google's init_from_checkpoint and init_from_checkpoint
  above. One SaveV2 op fed the arrays, no variables (the weights are held once, not twice). Not
  atomic: write into a scratch directory and rename (io_utils.work_dir).

  Args:
    prefix: the checkpoint prefix; writes `prefix`.index / .data-00000-of-00001 and its
      directory's `checkpoint` file (relative), creating the directory.
    tensors: {name: np.ndarray}.
  """
  names = sorted(tensors)
  os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
  with tf.Graph().as_default():
    holders = [tf.placeholder(tf.as_dtype(tensors[n].dtype), tensors[n].shape) for n in names]
    save = tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                             shape_and_slices=[""] * len(names), tensors=holders)
    with tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=1,
                                          inter_op_parallelism_threads=1)) as sess:
      sess.run(save, dict(zip(holders, (tensors[n] for n in names))))
  tf.train.update_checkpoint_state(os.path.dirname(os.path.abspath(prefix)),
                                   os.path.basename(prefix))
