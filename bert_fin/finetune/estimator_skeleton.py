"""The Estimator skeleton of a fine-tuning run, shared by run_classifier and run_ner: how many
updates (train_steps), the Estimator with its TrainSetup and run config, training on every rank
(each on its share of the rows; rank 0 owns output_dir, the others train in a private temporary
model_dir and start from rank 0's weights), then eval and predict on rank 0. What differs between
the programs (the model_fn, the files beside the checkpoints, eval and predict) is passed in.
"""
import shutil
import tempfile

import tensorflow.compat.v1 as tf

from bert_fin.finetune import batches
from bert_fin.finetune import finetuned
from bert_fin.finetune import flags as finetune_flags
from bert_fin.finetune import train_op
from bert_fin.training import estimator as estimator_lib
from bert_fin.training import settings as train_settings
from bert_fin.training import step


def train_steps(values, rows, dist, what):
  """(num_train_steps, num_warmup_steps) of a run: --num_train_steps, else --num_train_epochs over
  `rows` training rows (`what`: "examples", "windows") in batches of --train_batch_size on every
  worker; (0, 0) without --do_train. ValueError when that is not one full batch."""
  if not values.do_train:
    return 0, 0
  num_train_steps = values.num_train_steps or int(
      rows / (values.train_batch_size * dist.size) * values.num_train_epochs)
  if num_train_steps < 1:
    raise ValueError("%d training %s give no full batch of --train_batch_size %d x %d "
                     "workers: lower the batch size or pass --num_train_steps" % (
                         rows, what, values.train_batch_size, dist.size))
  return num_train_steps, int(num_train_steps * values.warmup_proportion)


def train(estimator, values, dist, arrays, num_train_steps, write_run_files):
  """Trains on this worker's share of `arrays` (rows: examples) up to num_train_steps, unless
  --output_dir's checkpoint is there already; the chief first writes optimizer.json and calls
  write_run_files() (the other files beside the checkpoints). Shared by run_classifier and
  run_ner."""
  start = dist.broadcast_int(estimator_lib.checkpoint_step(values.output_dir)
                             if dist.is_chief else 0)
  if start >= num_train_steps:
    tf.logging.info("Skipping training: %s is at step %d", values.output_dir, start)
    return
  if dist.is_chief:
    finetuned.write_optimizer(values.output_dir, values.optimizer)
    write_run_files()
  arrays = batches.shard(arrays, dist.size, dist.rank)
  tf.logging.info("***** Running training *****")
  tf.logging.info("  Num examples = %d on this worker, batch size = %d, num steps = %d",
                  len(arrays[batches.LABEL_IDS]), values.train_batch_size, num_train_steps)
  estimator.train(input_fn=batches.input_fn_builder(
      arrays, values.train_batch_size, True, seed=values.seed + dist.rank),
                  hooks=dist.broadcast_hooks(), max_steps=num_train_steps)


def run_estimator(values, dist, name, plan, model_fn_of, train_fn, evaluate_fn, predict_fn):
  """The Estimator part of a fine-tuning run, shared by run_classifier and run_ner: the model_fn
  is model_fn_of(train_op.TrainSetup from plan.num_train_steps / num_warmup_steps, or None
  without --do_train); then, as the flags say, train_fn(estimator) on every rank and, on the
  chief only, evaluate_fn(estimator) (its result is returned) and predict_fn(estimator). Ranks
  other than the chief train in a private temporary model_dir, removed at the end."""
  tf.logging.set_verbosity(tf.logging.INFO)
  if dist.is_chief:
    tf.io.gfile.makedirs(values.output_dir)
  model_dir = values.output_dir if dist.is_chief else tempfile.mkdtemp(
      prefix="bert_fin_%s_rank%d_" % (name, dist.rank))
  try:
    setup = None
    if values.do_train:
      setup = train_op.TrainSetup(
          values.learning_rate, plan.num_train_steps, plan.num_warmup_steps,
          step.StepConfig(use_loss_scaling=values.amp),
          optimizer_type=finetune_flags.OPTIMIZERS[values.optimizer],
          log_every_n_steps=values.log_every_n_steps,
          global_batch_size=values.train_batch_size * dist.size,
          summary_dir=values.output_dir if dist.is_chief else None)
    estimator = tf.estimator.Estimator(model_fn=model_fn_of(setup),
                                       config=estimator_lib.run_config(
                                           train_settings.EstimatorSettings.of_finetune_flags(
                                               values), dist, model_dir))
    if values.do_train:
      train_fn(estimator)
    if not dist.is_chief:
      return None
    result = evaluate_fn(estimator) if values.do_eval else None
    if values.do_predict:
      predict_fn(estimator)
    return result
  finally:
    if not dist.is_chief:
      shutil.rmtree(model_dir, ignore_errors=True)
