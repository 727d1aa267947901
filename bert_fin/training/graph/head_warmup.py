"""--head_warmup_steps: which variables the head phase of continued pretraining trains.

A released checkpoint often carries the encoder but no (or a random) masked-LM / next-sentence
head; the first updates through a random head send large, meaningless gradients into the encoder.
With --head_warmup_steps=N, the first N updates train only the variables --init_checkpoint does
not provide (training/graph/step.py: the encoder gets no update and its optimizer slots stay as they
are), at the constant --learning_rate; then every variable, with the usual warm-up and decay
starting at step N (optimization/schedule.py head_warmup_schedule).

`warmup_variables` decides the set once, on rank 0 before anything is written (training/run.py
broadcasts it), from the names --init_checkpoint holds and the names the training graph will train
(model_fn.pretraining_variable_shapes); a resume with the same command decides the same set, and the
phase itself is read from global_step, so resume is exact across the boundary.
Refusals (ValueError, one line): a checkpoint that provides every trained variable (nothing to
warm up: the flag would only delay and reshape the schedule, so it is refused rather than
ignored), one that provides none of them (no encoder to protect: leave the flag out).
"""
from bert_fin.modeling import checkpoint
from bert_fin.training.graph import model_fn


def warmup_variables(init_checkpoint, bert_config, objective, head_warmup_steps):
  """Sorted tuple of the trained variable names init_checkpoint lacks (() when head_warmup_steps
  is 0); raises ValueError (CheckpointError for an unreadable checkpoint) as the module says."""
  if not head_warmup_steps:
    return ()
  provided = checkpoint.checkpoint_shapes(init_checkpoint)
  trained = sorted(model_fn.pretraining_variable_shapes(bert_config, objective,
                                                       trained_only=True))
  missing = tuple(name for name in trained if name not in provided)
  flag = "--head_warmup_steps=%d" % head_warmup_steps
  if not missing:
    raise ValueError("%s: --init_checkpoint %s provides every variable training updates (the "
                     "pretraining heads too): there is nothing to warm up; leave out "
                     "--head_warmup_steps" % (flag, init_checkpoint))
  if len(missing) == len(trained):
    raise ValueError("%s: --init_checkpoint %s provides none of the model's variables (another "
                     "model, or a fine-tuned one under other names?): there is no encoder to "
                     "keep frozen; check the checkpoint or leave out --head_warmup_steps"
                     % (flag, init_checkpoint))
  return missing


def describe(head_warmup_steps, variables):
  """The start-up log line of the head phase."""
  return ("head warm-up: updates 0..%d train only the %d variable(s) --init_checkpoint does not "
          "provide (%s) at the constant learning rate; the others are frozen (no update, optimizer "
          "slots untouched); from update %d on every variable, the learning-rate warm-up starting "
          "there" % (head_warmup_steps - 1, len(variables), ", ".join(variables),
                     head_warmup_steps))
