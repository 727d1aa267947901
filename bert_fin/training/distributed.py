"""Who am I among the workers, how gradients are averaged across them, and how rank 0 decides.

`init(use_horovod)` returns a small object with one interface and two implementations:

  SingleProcess  size 1, allreduce is the identity (IndexedSlices still densified on request).
  HorovodProcess hvd.init(); allreduce = hvd.allreduce(op=Average) of each gradient tensor.

Both offer `chief_decides(decide)`, the one way a run's decisions are made: rank 0 alone runs
decide() (globbing files, reading a checkpoint, taking the run lock), and every rank gets the same
answer, or raises the same one-line error, after a single broadcast. Nothing a rank decides on its
own can differ from the others'.

Both count the gradient tensors they were asked to allreduce while the graph was built
(`allreduce_count`), so a test can check that a train op averages each gradient exactly once.
The caller (bert_fin/training/graph/step.py) decides WHERE the allreduce happens (per micro-batch or
once per update); this module never wraps an optimizer (no hvd.DistributedOptimizer), so a
gradient can never be averaged twice.

Session configuration (one place for it, as NVIDIA's run_pretraining.py does in main()):
  * GPU hosts: `visible_device_list = local_rank` (one GPU a rank), allow_growth.
  * XLA: `global_jit_level = ON_1`; memory optimizer off (NO_MEM_OPT) with XLA, as NVIDIA does.
    TF_XLA_FLAGS / XLA_FLAGS are set by training/xla_env.py alone, before TensorFlow is imported
    (a write from here would come after TensorFlow has read them, i.e. too late to matter).
  * AMP: the grappler `auto_mixed_precision` rewrite (RewriterConfig field, present in TF 2.15)
    turns fp32 graphs into fp16 compute with fp32 variables on GPUs. It is a no-op on CPU hosts.
    tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite also still exists in
    TF 2.15, but it wraps the optimizer in its own LossScaleOptimizer; bert_fin does its own
    dynamic loss scaling in training/graph/step.py (works on CPU too, and with any optimizer), so only the
    session-config rewrite option is used here.
"""
import json
import os

import tensorflow.compat.v1 as tf
from tensorflow.core.protobuf import rewriter_config_pb2


def init(use_horovod):
  """Returns the process-group object: HorovodProcess (after hvd.init()) or SingleProcess."""
  if use_horovod:
    return HorovodProcess()
  return SingleProcess()


def densify(grad):
  """IndexedSlices -> dense Tensor (what `sparse_as_dense` means); Tensors and None unchanged."""
  if isinstance(grad, tf.IndexedSlices):
    return tf.convert_to_tensor(grad)
  return grad


def gpu_count():
  """Number of GPUs TensorFlow sees on this host (0 with tensorflow-cpu)."""
  return len(tf.config.list_physical_devices("GPU"))


def build_session_config(local_rank, local_size, use_xla, use_amp, num_gpus):
  """tf.ConfigProto for one rank (a pure function).

  local_rank/local_size: this rank's index and the number of ranks on this host.
  CPU threads: the host's cores are split between its local ranks (intra-op); CPU ranks get 2
  inter-op threads when there is more than one rank. GPU ranks keep TF's inter-op default: their
  host threads launch kernels and feed input, and 2 would serialize that.
  """
  config = tf.ConfigProto(allow_soft_placement=True)
  if local_size > 1:
    config.intra_op_parallelism_threads = max(1, (os.cpu_count() or 1) // local_size)
    if num_gpus == 0:
      config.inter_op_parallelism_threads = 2
  if num_gpus > 0:
    config.gpu_options.visible_device_list = str(local_rank)
    config.gpu_options.allow_growth = True
  if use_xla:
    config.graph_options.optimizer_options.global_jit_level = tf.OptimizerOptions.ON_1
    config.graph_options.rewrite_options.memory_optimization = (
        rewriter_config_pb2.RewriterConfig.NO_MEM_OPT)
  if use_amp:
    config.graph_options.rewrite_options.auto_mixed_precision = rewriter_config_pb2.RewriterConfig.ON
  return config


class _Workers(object):
  """What both process groups share: chief_decides on top of is_chief and broadcast_bytes."""

  def chief_decides(self, decide, error_type=ValueError, catch=(ValueError, OSError)):
    """Rank 0's decision on every rank, or its refusal on every rank.

    Every rank calls it at the same point of the program (a collective). The chief runs
    decide(); an exception of `catch` there becomes a refusal, anything else propagates. One
    broadcast carries the chief's answer or its refusal's message to every rank.

    Args:
      decide: a function of no argument returning a JSON-able value (str, number, bool, None,
        lists and dicts of them), run by the chief only.
      error_type: the exception type every rank raises with the chief's message.
      catch: the exception types of decide() that are refusals (one-line user errors).
    Returns:
      decide()'s value as JSON carries it (a tuple becomes a list), the same on every rank, the
      chief included.
    Raises:
      error_type(message) on every rank when the chief's decide() raised one of `catch`;
      TypeError on the chief when decide()'s value is not JSON-able (a bug, not a refusal).
    """
    message = b""
    if self.is_chief:
      try:
        message = _answer_message(decide())
      except catch as e:  # pylint: disable=catching-non-exception
        message = json.dumps({"refusal": str(e)}).encode("utf-8")
    received = json.loads(self.broadcast_bytes(message).decode("utf-8"))
    if "refusal" in received:
      raise error_type(received["refusal"])
    return received["answer"]


def _answer_message(answer):
  """The broadcast bytes of the chief's answer; TypeError when it is not JSON-able."""
  try:
    return json.dumps({"answer": answer}).encode("utf-8")
  except (TypeError, ValueError) as e:
    raise TypeError("chief_decides: decide() returned %s, not JSON-able (%s)"
                    % (type(answer).__name__, e)) from None


class SingleProcess(_Workers):
  """One worker: size 1, rank 0; allreduce is the identity."""

  size = 1
  rank = 0
  local_rank = 0
  local_size = 1
  is_chief = True

  def __init__(self):
    self.allreduce_count = 0

  def allreduce(self, grads, sparse_as_dense=True, fp16_compression=False):
    """Averages each gradient over the workers (here: returns it).

    grads: list of Tensor / IndexedSlices / None. None passes through; IndexedSlices are
    densified when sparse_as_dense (so the result does not depend on the worker count).
    fp16_compression is accepted for interface parity and has no effect with one worker.
    """
    del fp16_compression
    result = []
    for grad in grads:
      if grad is not None:
        self.allreduce_count += 1
        grad = densify(grad) if sparse_as_dense else grad
      result.append(grad)
    return result

  def session_config(self, use_xla=False, use_amp=False, num_gpus=None):
    """tf.ConfigProto for this rank (see module docstring); num_gpus: default gpu_count()."""
    return build_session_config(self.local_rank, self.local_size, use_xla, use_amp,
                                gpu_count() if num_gpus is None else num_gpus)

  def broadcast_hooks(self):
    """SessionRunHooks that copy rank 0's initial variables to every rank: none here."""
    return []

  def broadcast_variables_hook(self, variables):
    """The hook copying rank 0's values of `variables` (local ones too) to every rank after the
    session starts: None here."""
    del variables
    return None

  def broadcast_int(self, value):
    """Rank 0's `value` on every rank: here, `value`."""
    return int(value)

  def broadcast_bytes(self, value):
    """Rank 0's bytes on every rank: here, `value`."""
    return bytes(value)


class HorovodProcess(_Workers):
  """One rank of a Horovod job (launch with mpirun/horovodrun). Calls hvd.init()."""

  def __init__(self):
    try:
      import horovod.tensorflow as hvd  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise RuntimeError("--horovod needs horovod[tensorflow] (tools/install.sh builds it): %s" % e)
    hvd.init()
    self._hvd = hvd
    self.size = hvd.size()
    self.rank = hvd.rank()
    self.local_rank = hvd.local_rank()
    self.local_size = hvd.local_size()
    self.is_chief = self.rank == 0
    self.allreduce_count = 0

  def allreduce(self, grads, sparse_as_dense=True, fp16_compression=False):
    """Averages each gradient over all ranks with one hvd.allreduce a tensor.

    grads: list of Tensor / IndexedSlices / None; None passes through. IndexedSlices are
    densified first when sparse_as_dense (one dense allreduce instead of an allgather).
    fp16_compression: cast to float16 for the transfer (halves the bytes; the caller's loss
    scaling must keep values inside fp16 range, overflow shows up as inf and skips the step).
    """
    hvd = self._hvd
    compression = hvd.Compression.fp16 if fp16_compression else hvd.Compression.none
    result = []
    for grad in grads:
      if grad is not None:
        self.allreduce_count += 1
        grad = densify(grad) if sparse_as_dense else grad
        grad = hvd.allreduce(grad, op=hvd.Average, compression=compression)
      result.append(grad)
    return result

  def session_config(self, use_xla=False, use_amp=False, num_gpus=None):
    """tf.ConfigProto for this rank: its own GPU, host cores split among local ranks;
    num_gpus: default gpu_count()."""
    return build_session_config(self.local_rank, self.local_size, use_xla, use_amp,
                                gpu_count() if num_gpus is None else num_gpus)

  def broadcast_hooks(self):
    """[hvd.BroadcastGlobalVariablesHook(0)]: every rank starts from rank 0's weights."""
    return [self._hvd.BroadcastGlobalVariablesHook(0)]

  def broadcast_variables_hook(self, variables):
    """A SessionRunHook copying rank 0's values of `variables` (local variables too, which
    BroadcastGlobalVariablesHook leaves out) to every rank after each session starts; a
    collective: every rank adds it at the same place of its hooks."""
    return _BroadcastVariablesHook(self._hvd, variables)

  def broadcast_int(self, value):
    """Rank 0's `value` on every rank: a blocking collective in a graph and CPU session of its own,
    outside the Estimator (every rank must call it). The value is fed, not a constant: ranks'
    graphs must not be folded differently by grappler, or Horovod waits forever."""
    with tf.Graph().as_default():
      fed = tf.placeholder(tf.int64, [])
      broadcast = self._hvd.broadcast(fed, root_rank=0, name="bert_fin_broadcast_int")
      with tf.Session(config=tf.ConfigProto(device_count={"GPU": 0})) as session:
        return int(session.run(broadcast, {fed: value}))

  def broadcast_bytes(self, value):
    """Rank 0's bytes `value` (other ranks pass anything, e.g. b"") on every rank: the length,
    then the bytes as a uint8 tensor of that length (the same shape on every rank)."""
    import numpy as np  # pylint: disable=g-import-not-at-top
    length = self.broadcast_int(len(value) if self.is_chief else 0)
    data = np.frombuffer(value, np.uint8) if self.is_chief else np.zeros([length], np.uint8)
    with tf.Graph().as_default():
      fed = tf.placeholder(tf.uint8, [length])
      broadcast = self._hvd.broadcast(fed, root_rank=0, name="bert_fin_broadcast_bytes")
      with tf.Session(config=tf.ConfigProto(device_count={"GPU": 0})) as session:
        return session.run(broadcast, {fed: data}).tobytes()


class _BroadcastVariablesHook(tf.estimator.SessionRunHook):
  """Runs hvd.broadcast_variables(variables, root_rank=0) once after each session is created."""

  def __init__(self, hvd, variables):
    self._hvd, self._variables, self._op = hvd, list(variables), None

  def begin(self):
    self._op = self._hvd.broadcast_variables(self._variables, root_rank=0)

  def after_create_session(self, session, coord):
    del coord
    session.run(self._op)
