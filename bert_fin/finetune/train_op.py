"""The fine-tuning train op of run_classifier, run_ner, run_squad and run_distill: run_pretraining's
builder (training/graph/train_setup.py: --optimizer with google's warmup / linear decay schedule,
clip at 1.0, Horovod allreduce, loss scaling with --amp, the progress guard on every rank, on the
chief the step lines: step, loss, grad norm, learning rate, examples/s, real tokens/s, elapsed,
ETA, with their TensorBoard scalars) with the recipes of finetune/recipes.py (layer-wise
learning-rate decay, re-initialised top layers) of the TrainSetup. Also what every head shares:
the encoder of a record batch, its scope and the head dropout.

A program adopts the recipes by building its TrainSetup with `recipe=recipes.of_settings(...)`
(estimator_skeleton.train_setup does) and passing it, in TRAIN mode only, to init_from_checkpoint.
"""
import tensorflow.compat.v1 as tf

from bert_fin import modeling
from bert_fin.finetune import recipes
from bert_fin.modeling import layers
from bert_fin.modeling.checkpoint import variable_name
from bert_fin.records import schema as records
from bert_fin.training.graph import train_setup as train_setup_lib
from bert_fin.training.monitor import progress_guard

ENCODER_SCOPE = "bert"  # BertModel's default scope
HEAD_DROPOUT = 0.1  # google: tf.nn.dropout(keep_prob=0.9) on what the head reads


def encoder(bert_config, is_training, features, dropout_seed=None, on_encoder=None):
  """The modeling.BertModel every fine-tuning head reads, built on a record batch's features
  (input_ids, segment_ids int32 [B, S]; input_len int32 [B]).

  dropout_seed: None (google's stateful dropout) or int64 [2]: every mask stateless
  (training_dropout_seed). on_encoder: None, or a function called with the model once it is
  built (run_distill's layer matching reads its hidden states and attention scores).
  """
  model = modeling.BertModel(
      config=bert_config, is_training=is_training, input_ids=features[records.INPUT_IDS],
      input_len=features[records.INPUT_LEN], token_type_ids=features[records.SEGMENT_IDS],
      dropout_seed=dropout_seed)
  if on_encoder is not None:
    on_encoder(model)
  return model


def training_dropout_seed(setup, rank):
  """None, or int64 [2]: the stateless dropout seed of this training step, a function of
  setup.dropout_seed, the worker's rank and the global step, so that a resumed run draws the
  masks the uninterrupted run drew (modeling.BertModel's dropout_seed)."""
  if setup is None or setup.dropout_seed is None:
    return None
  return tf.random.experimental.stateless_fold_in(
      tf.constant([setup.dropout_seed, rank], tf.int64), tf.train.get_or_create_global_step())


def head_dropout(tensor, dropout_seed, num_hidden_layers):
  """tensor (float [..., H], what a head reads) with HEAD_DROPOUT applied: google's stateful mask
  when dropout_seed is None, else a stateless one from dropout_seed (int64 [2],
  training_dropout_seed) folded in past the encoder's (embeddings 0, layer i: i + 1)."""
  return layers.dropout(tensor, HEAD_DROPOUT, None if dropout_seed is None else
                        tf.random.experimental.stateless_fold_in(dropout_seed,
                                                                 num_hidden_layers + 1))


def init_from_checkpoint(init_checkpoint, dist, setup=None):
  """Starts the trainable variables from init_checkpoint (google's names; none: initializers),
  on the chief only: Horovod broadcasts its weights to the other ranks. setup: the TrainSetup in
  TRAIN mode (None otherwise): the variables its --reinit_top_layers names are not restored and
  keep their initializers (recipes.py; a resumed run restores its own checkpoint instead)."""
  if not init_checkpoint or not dist.is_chief:
    return
  tvars = tf.trainable_variables()
  if setup is not None and setup.recipe.reinit_top_layers:
    fresh = set(recipes.reinitialised([variable_name(v) for v in tvars],
                                      setup.recipe.reinit_top_layers))
    tf.logging.info("--reinit_top_layers=%d: %d variables keep their initializer: %s",
                    setup.recipe.reinit_top_layers, len(fresh), ", ".join(sorted(fresh)))
    tvars = [v for v in tvars if variable_name(v) not in fresh]
  modeling.init_from_checkpoint(init_checkpoint, tvars, log=tf.logging.info)


def train_spec(mode, loss, dist, setup, input_len):
  """The TRAIN EstimatorSpec of a head's loss: train_op_and_hooks' op and hooks.

  Args:
    mode: tf.estimator.ModeKeys.TRAIN.
    loss: float32 [], the head's mean loss of the micro-batch.
    dist: training/distributed.init(...) result.
    setup: training/graph/train_setup.TrainSetup of the fine-tuning flags.
    input_len: int32 [B], this worker's real tokens a row.

  Returns:
    tf.estimator.EstimatorSpec (its loss: progress_guard.reported_loss).
  """
  op, training_hooks = train_op_and_hooks(loss, dist, setup, input_len)
  return tf.estimator.EstimatorSpec(mode=mode, loss=progress_guard.reported_loss(loss),
                                    train_op=op, training_hooks=training_hooks)


def train_op_and_hooks(loss, dist, setup, input_len):
  """(train op, training hooks) of train_setup.train_op_and_hooks, each variable's rate scaled
  by setup.recipe's layer-wise decay, the loss logged as "loss"; a halt (non-finite loss, a run
  of skipped updates) ends the program in one line, exit 2 (progress_guard.exit_program).
  loss: float32 []; input_len: int32 [B], this worker's real tokens a row."""
  multipliers = recipes.learning_rate_multipliers(
      [variable_name(v) for v in tf.trainable_variables()], setup.recipe.layerwise_lr_decay)
  return train_setup_lib.train_op_and_hooks(
      loss, dist, setup, input_len, {"loss": loss}, learning_rate_multipliers=multipliers,
      on_halt=progress_guard.exit_program)
