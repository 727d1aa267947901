"""The --init_regularizer penalty in the training graph: the encoder held near --init_checkpoint.

  l2:   P(θ) = λ/2 · Σ_i (θ_i − θ0_i)²
  ewc:  P(θ) = λ/2 · Σ_i F_i · (θ_i − θ0_i)²       F: the diagonal Fisher estimate of --fisher_file
λ = --init_regularizer_weight, θ0 = --init_checkpoint's values, the sum over the penalised
variables (penalised_names): those under bert/ (embeddings, encoder layers, pooler: what a
fine-tuning reads) that training updates and --init_checkpoint holds. The pretraining heads
(cls/...) are not penalised: fine-tuning discards them, and a checkpoint may lack them.

Its gradient λ·F·(θ − θ0) enters the update, not the loss (training/graph/step.py): it is added to
the averaged, unscaled data gradients once an update, before the finite check and the clip.
  accumulation  once an update, at the weights of that update (they do not move inside a window:
                the same as adding P / N to each of the N micro-batch losses, without N copies);
  Horovod       after the allreduce: θ, θ0 and F are the same on every rank, so is the penalty's
                gradient, and adding it to the average equals adding it to every rank's gradient
                before averaging; no collective carries it;
  AMP           in float32 (fp32 variables, θ0, F), outside the loss scale: it cannot overflow
                the scale, nor skip an update on its own;
  clip          the global norm (and the logged grad_norm) includes it, as when part of the loss;
  head warm-up  the penalised variables are frozen in the head phase (θ = θ0: P = 0).
Its value P, at the weights the last update started from (0 before the first), is logged as
init_penalty beside the losses (total_loss stays google's MLM + NSP).

θ0 and F are local variables (tf.GraphKeys.LOCAL_VARIABLES): never trained, never saved (the
checkpoints keep their variable list and size), and no constant in the graph proto (a base model's
weights would pass its 2 GB limit). On the chief their initial value is a RestoreV2 op reading the
files, run by the Scaffold's local_init_op at every session start (a resume too); the other ranks
start them at 0 and broadcast_hook copies the chief's right after the session starts, so, as for
the weights, --init_checkpoint and --fisher_file need not be visible on their hosts. Memory: one
more copy of the encoder's weights for l2, two for ewc.
"""
import collections

import tensorflow.compat.v1 as tf

from bert_fin.modeling.checkpoint import resolve_checkpoint
from bert_fin.modeling.checkpoint import variable_name

KINDS = ("l2", "ewc")
ENCODER_PREFIX = "bert/"  # BertModel's scope: embeddings, encoder, pooler
SCOPE = "init_regularizer"

Spec = collections.namedtuple("Spec", ["kind", "weight", "init_checkpoint", "fisher_checkpoint",
                                       "variables"])
Spec.__doc__ = """kind: "l2" | "ewc"; weight: λ > 0; init_checkpoint: the checkpoint prefix of θ0;
fisher_checkpoint: the prefix of F (ewc; None for l2); variables: the penalised names (sorted)."""


def is_penalised(name):
  """True for a variable the penalty may hold (BertModel's, bert/...), False for the heads."""
  return name.startswith(ENCODER_PREFIX)


def penalised_names(trained_shapes, checkpoint_shapes):
  """Sorted tuple of the names of trained_shapes ({name: shape} of the variables training
  updates) under bert/ that checkpoint_shapes ({name: shape} of --init_checkpoint) holds with the
  same shape."""
  return tuple(sorted(name for name, shape in trained_shapes.items()
                      if is_penalised(name) and name in checkpoint_shapes
                      and list(checkpoint_shapes[name]) == list(shape)))


def describe(spec):
  """The start-up log line of a run with the penalty."""
  weighting = ("weighted by the Fisher estimate %s" % spec.fisher_checkpoint
               if spec.kind == "ewc" else "every parameter alike")
  return ("init regularizer %s: lambda %g / 2 x sum (w - w0)^2, %s, over %d variable(s) under "
          "%s held near %s (the heads are free); logged as init_penalty"
          % (spec.kind, spec.weight, weighting, len(spec.variables), ENCODER_PREFIX,
             spec.init_checkpoint))


def restore_op(prefix, names, shapes):
  """[float32 tensor a name]: the checkpoint `prefix`'s values of `names` (shapes: their shape
  lists), read from the files when the op runs (one RestoreV2 op, on the CPU). prefix: a
  checkpoint prefix, or a directory (its latest checkpoint, as --init_checkpoint)."""
  prefix = resolve_checkpoint(prefix)
  dtypes = tf.train.load_checkpoint(prefix).get_variable_to_dtype_map()
  with tf.device("/cpu:0"):
    values = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=list(names),
                                  shape_and_slices=[""] * len(names),
                                  dtypes=[dtypes[name] for name in names])
  result = []
  for value, shape in zip(values, shapes):
    value = tf.cast(value, tf.float32)
    value.set_shape(shape)
    result.append(value)
  return result


class InitPenalty(object):
  """The penalty of a Spec over the graph's variables (module docstring).

  spec: Spec; tvars: the trained variables (every name of spec.variables among them, else
  ValueError); read_files: True on the chief (θ0 and F read from the files), False on the other
  ranks (0 until broadcast_hook copies the chief's).
  """

  def __init__(self, spec, tvars, read_files):
    if spec.kind not in KINDS:
      raise ValueError("init regularizer must be one of %s, got %r" % (KINDS, spec.kind))
    by_name = {variable_name(v): v for v in tvars}
    unknown = [name for name in spec.variables if name not in by_name]
    if unknown:
      raise ValueError("init regularizer: no trained variable named %s" % ", ".join(unknown[:5]))
    self.spec = spec
    self.variables = [by_name[name] for name in spec.variables]
    shapes = [v.shape.as_list() for v in self.variables]
    with tf.name_scope(SCOPE):
      self.anchors = self._locals("anchor", spec.init_checkpoint if read_files else None, shapes)
      self.fishers = None
      if spec.kind == "ewc":
        self.fishers = self._locals("fisher", spec.fisher_checkpoint if read_files else None,
                                    shapes)

  def _locals(self, what, prefix, shapes):
    """One float32 local variable a penalised variable, from the checkpoint prefix (or 0)."""
    if prefix:
      values = restore_op(prefix, self.spec.variables, shapes)
    else:
      values = [tf.zeros(shape, tf.float32) for shape in shapes]
    return [tf.Variable(value, trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES],
                        name="%s/%s" % (what, name), use_resource=True)
            for name, value in zip(self.spec.variables, values)]

  def local_variables(self):
    """θ0 (and F): what broadcast_hook copies from the chief."""
    return self.anchors + (self.fishers or [])

  def gradients_and_value(self, tvars):
    """([float32 gradient of P, or None, for each of tvars], float32 [] P), at the variables'
    values when the ops run: λ·F·(θ − θ0) and λ/2 · Σ F·(θ − θ0)²."""
    terms = {}
    for index, (var, anchor) in enumerate(zip(self.variables, self.anchors)):
      difference = tf.cast(var.read_value(), tf.float32) - anchor.read_value()
      weighted = self.spec.weight * difference
      if self.fishers is not None:
        weighted *= self.fishers[index].read_value()
      terms[var.ref()] = (weighted, tf.reduce_sum(weighted * difference))
    grads = [terms[v.ref()][0] if v.ref() in terms else None for v in tvars]
    value = 0.5 * tf.add_n([sums for _, sums in terms.values()])
    return grads, value

  def broadcast_hook(self, dist):
    """The SessionRunHook that copies the chief's θ0 and F to this rank after the session starts
    (None with one worker): every rank adds it, at the same place of its hooks."""
    return dist.broadcast_variables_hook(self.local_variables())
