"""The diagonal Fisher estimate of a base checkpoint, for --init_regularizer=ewc.

  F_i = 1/B · Σ_b (∂ L_b / ∂ θ_i)²        over B = --fisher_batches full batches b of the records

L_b: run_pretraining's loss of batch b at the base weights (total_loss: the masked-LM loss, plus
the next-sentence loss for objective "bert"; the model and heads of training/graph/model_fn.py in
EVAL mode: no dropout; packed and dynamic-masking records as training reads them, dynamic masks
drawn with the eval key), θ_i every parameter of the penalised variables (penalty.py: bert/...).

This is the batch-level empirical Fisher, the usual practical estimate: the square of each batch's
mean gradient, not the mean of the per-example squares. It is cheaper by a factor of the batch
size, and smaller: for batches of n examples, E[g_b²] = (E g)² + Var(g_example) / n, so F scales
roughly as 1/n and --init_regularizer_weight has to be chosen with the file's statistics (its
manifest holds the mean and max). --batch_size=1 gives the per-example (exact empirical) Fisher at
n times the steps. The last partial batch of the files is left out.
"""
import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin.input import tfdata
from bert_fin.modeling.checkpoint import variable_name
from bert_fin.records import schema as records
from bert_fin.training import distributed
from bert_fin.training.graph import model_fn as model_fn_lib
from bert_fin.training.init_regularizer import penalty

METHOD = ("batch-level empirical Fisher: mean over full batches of the squared gradient of the "
          "batch's mean total_loss (masked LM + next sentence), dropout off")


def check_base(checkpoint_shapes, bert_config, objective):
  """ValueError unless the base checkpoint ({name: shape}) holds every variable training updates
  for `objective`, the heads included: a random head gives the loss, and its gradients, no
  meaning. Returns the {name: shape} of the penalised ones (what the estimate covers)."""
  trained = model_fn_lib.pretraining_variable_shapes(bert_config, objective, trained_only=True)
  missing = sorted(name for name in trained if name not in checkpoint_shapes)
  if missing:
    raise ValueError("--init_checkpoint lacks %d variable(s) of the %s model (%s): the Fisher needs "
                     "the base's own pretraining heads (an encoder-only checkpoint has no "
                     "likelihood to estimate it from; hold it with --init_regularizer=l2 instead)"
                     % (len(missing), objective, ", ".join(missing[:3])))
  other = ["%s (%s, config %s)" % (name, checkpoint_shapes[name], shape)
           for name, shape in sorted(trained.items())
           if list(checkpoint_shapes[name]) != list(shape)]
  if other:
    raise ValueError("--init_checkpoint does not fit --bert_config_file: %s" % "; ".join(other[:3]))
  return {name: shape for name, shape in trained.items() if penalty.is_penalised(name)}


def estimate(bert_config, init_checkpoint, files, layout, masking_config, objective, batch_size,
             num_batches, session_config=None, progress=None):
  """({name: float32 F}, full batches used) of the base `init_checkpoint` over `files` (their
  records.RecordLayout `layout`, dynamic-masking `masking_config` or None) in file order, at most
  num_batches batches of batch_size. progress: called with the batches done after each one."""
  with tf.Graph().as_default():
    dataset = tfdata.eval_dataset(files, layout, batch_size, masking_config)
    features = tf.data.make_one_shot_iterator(dataset).get_next()
    build = model_fn_lib.model_fn_builder(bert_config, layout, init_checkpoint,
                                          distributed.SingleProcess(), None, objective)
    loss = build(features, None, tf.estimator.ModeKeys.EVAL, None).loss
    tvars = [v for v in tf.trainable_variables() if penalty.is_penalised(variable_name(v))]
    grads = tf.gradients(loss, tvars)
    pairs = [(g, v) for g, v in zip(grads, tvars) if g is not None]
    sums = [tf.Variable(tf.zeros(v.shape, tf.float32), trainable=False,
                        collections=[tf.GraphKeys.LOCAL_VARIABLES]) for _, v in pairs]
    full = tf.equal(tf.shape(features[records.INPUT_IDS])[0], batch_size)
    weight = tf.cast(full, tf.float32)
    accumulate = tf.group(*[total.assign_add(weight * tf.square(distributed.densify(g)))
                            for total, (g, _) in zip(sums, pairs)])
    with tf.control_dependencies([accumulate]):
      counted = tf.identity(full)
    done = 0
    with tf.Session(config=session_config) as session:
      session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      while done < num_batches:
        try:
          done += int(session.run(counted))
        except tf.errors.OutOfRangeError:
          break
        if progress:
          progress(done)
      totals = session.run(sums)
  return ({variable_name(v): (total / max(done, 1)).astype(np.float32)
           for total, (_, v) in zip(totals, pairs)}, done)
