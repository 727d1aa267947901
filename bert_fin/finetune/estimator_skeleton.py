"""The Estimator pieces every fine-tuning program calls, top to bottom in its own run():

  train_steps       how many updates (and warm-up) the flags and the training rows give;
  train_setup       the TrainSetup of the flags (optimizer, schedule, recipe, step lines) that the
                    program's model_fn_builder takes;
  worker_estimator  this worker's Estimator of that model_fn: `with worker_estimator(name, settings,
                    dist, model_fn) as estimator:` (worker_model_dir: --output_dir on the chief, a
                    private temporary directory on the others, removed at the end; they start
                    from rank 0's weights);
  training_start    the step training starts from (rank 0 reads --output_dir's checkpoint), None
                    when the run does not train;
  train             every rank on its share of the rows from there (the chief first writes
                    optimizer.json and recipe.json; the program's own files are the program's).
Evaluate and predict are each program's own, on the chief (classify/, ner/, squad/
orchestration.py).
"""
import contextlib
import shutil
import tempfile

import tensorflow.compat.v1 as tf

from bert_fin.finetune import batches
from bert_fin.finetune import finetuned
from bert_fin.finetune import recipes
from bert_fin.finetune import settings as finetune_settings
from bert_fin.training import estimator as estimator_lib
from bert_fin.training.graph import step
from bert_fin.training.graph import train_setup as train_setup_lib
from bert_fin.training.monitor import hooks


def train_steps(settings, rows, dist, what):
  """(num_train_steps, num_warmup_steps) of a run: --num_train_steps, else --num_train_epochs over
  `rows` training rows (`what`: "examples", "windows") in batches of --train_batch_size on every
  worker; (0, 0) without --do_train. ValueError when that is not one full batch."""
  if not settings.mode.do_train:
    return 0, 0
  num_train_steps = settings.optimizer.num_train_steps or int(
      rows / (settings.data.train_batch_size * dist.size) * settings.optimizer.num_train_epochs)
  if num_train_steps < 1:
    raise ValueError("%d training %s give no full batch of --train_batch_size %d x %d "
                     "workers: lower the batch size or pass --num_train_steps" % (
                         rows, what, settings.data.train_batch_size, dist.size))
  return num_train_steps, int(num_train_steps * settings.optimizer.warmup_proportion)


def training_start(settings, dist, num_train_steps):
  """The step this run's training starts from: --output_dir's checkpoint step (rank 0 reads it,
  every rank gets its answer), 0 when there is none; None when the run does not train (no
  --do_train, or that checkpoint is at num_train_steps already: the skip is logged). Every rank
  calls it."""
  if not settings.mode.do_train:
    return None
  start = dist.broadcast_int(estimator_lib.checkpoint_step(settings.output.output_dir)
                             if dist.is_chief else 0)
  if start >= num_train_steps:
    tf.logging.info("Skipping training: %s is at step %d", settings.output.output_dir, start)
    return None
  return start


def train(estimator, settings, dist, arrays, num_train_steps, start):
  """Trains on this worker's share of `arrays` (rows: examples) from step `start`
  (training_start's; a resumed run skips the rows its steps read) up to num_train_steps; the
  chief first writes optimizer.json and recipe.json beside the checkpoints (the program's own
  files beside them are the program's to write)."""
  if dist.is_chief:
    finetuned.write_optimizer(settings.output.output_dir, settings.optimizer.optimizer)
    recipes.write_recipe(settings.output.output_dir, recipes.of_settings(settings))
  arrays = batches.shard(arrays, dist.size, dist.rank)
  tf.logging.info("***** Running training *****")
  tf.logging.info("  Num examples = %d on this worker, batch size = %d, num steps = %d",
                  batches.num_rows(arrays), settings.data.train_batch_size, num_train_steps)
  if start:
    tf.logging.info("  Resuming at step %d: the first %d rows of the stream are skipped", start,
                    start * settings.data.train_batch_size)
  estimator.train(input_fn=batches.input_fn_builder(
      arrays, settings.data.train_batch_size, True, seed=settings.execution.seed + dist.rank,
      skip_rows=start * settings.data.train_batch_size),
                  hooks=dist.broadcast_hooks(), max_steps=num_train_steps)


@contextlib.contextmanager
def worker_model_dir(name, settings, dist):
  """The model_dir of this worker: --output_dir on the chief (created), else a private temporary
  directory (prefix bert_fin_<name>_rank<r>_), removed when the block ends."""
  if dist.is_chief:
    tf.io.gfile.makedirs(settings.output.output_dir)
    yield settings.output.output_dir
    return
  model_dir = tempfile.mkdtemp(prefix="bert_fin_%s_rank%d_" % (name, dist.rank))
  try:
    yield model_dir
  finally:
    shutil.rmtree(model_dir, ignore_errors=True)


def train_setup(settings, dist, num_train_steps, num_warmup_steps):
  """The train_setup.TrainSetup of a fine-tuning run's flags (None without --do_train)."""
  if not settings.mode.do_train:
    return None
  return train_setup_lib.TrainSetup(
      learning_rate=settings.optimizer.learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps, optimizer_type=settings.optimizer.optimizer,
      step_config=step.StepConfig(use_loss_scaling=settings.execution.amp),
      log_every_n_steps=settings.output.log_every_n_steps,
      global_batch_size=settings.data.train_batch_size * dist.size,
      summary_dir=settings.output.output_dir if dist.is_chief else None,
      examples_name=hooks.EXAMPLES, recipe=recipes.of_settings(settings),
      dropout_seed=settings.execution.seed)


def estimator(model_fn, settings, dist, model_dir):
  """The tf.estimator.Estimator of model_fn with the run's RunConfig (seed, checkpoints,
  session threads, XLA / AMP, Horovod's device per rank)."""
  return tf.estimator.Estimator(model_fn=model_fn, config=estimator_lib.run_config(
      finetune_settings.estimator_settings(settings), dist, model_dir))


@contextlib.contextmanager
def worker_estimator(name, settings, dist, model_fn):
  """This worker's Estimator for a fine-tuning run, in its model_dir (worker_model_dir).

  Args:
    name: the program ("classifier", "ner", "squad"): the prefix of a non-chief's temporary
      model_dir.
    settings: the program's checked settings (an --init_checkpoint folder resolved).
    dist: training/distributed.init(...)'s process group.
    model_fn: the Estimator's model_fn (the program's model_fn_builder(..., train_setup(...))).

  Yields:
    tf.estimator.Estimator; a non-chief's temporary model_dir is removed when the block ends.
  """
  tf.logging.set_verbosity(tf.logging.INFO)
  with worker_model_dir(name, settings, dist) as model_dir:
    yield estimator(model_fn, settings, dist, model_dir)

