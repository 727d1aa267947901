"""finetune/estimator_skeleton.train_steps: the update count run_classifier and run_ner share
(google's int(rows / global batch * epochs), --num_train_steps overriding it, a refusal naming the
rows and the fix when that is not one full batch)."""
import dataclasses
import types

import pytest

from bert_fin import flag_table
from bert_fin.finetune import estimator_skeleton
from bert_fin.finetune import settings as finetune_settings


def _values(**overrides):
  """The shared fine-tuning settings with these flag values (the rest: the flags' defaults)."""
  values = dict(do_train=True, num_train_steps=0, train_batch_size=8, num_train_epochs=3.0,
                warmup_proportion=0.1)
  values.update(overrides)
  concerns = {}
  for path, _ in flag_table.leaf_fields(finetune_settings.Settings):
    if path[-1] in values:
      concerns.setdefault(path[0], {})[path[-1]] = values[path[-1]]
  defaults = finetune_settings.Settings()
  return dataclasses.replace(defaults, **{
      concern: dataclasses.replace(getattr(defaults, concern), **fields)
      for concern, fields in concerns.items()})


def _dist(size):
  return types.SimpleNamespace(size=size)


def test_epochs_over_the_global_batch_and_the_warmup_share():
  # 100 rows / (8 x 2 workers) x 3 epochs = 18.75 -> 18 updates, 10% warmup -> 1
  assert estimator_skeleton.train_steps(_values(), 100, _dist(2), "examples") == (18, 1)
  assert estimator_skeleton.train_steps(_values(warmup_proportion=0.5), 100, _dist(1),
                                        "examples") == (37, 18)


def test_num_train_steps_overrides_the_epochs_and_no_training_means_no_steps():
  assert estimator_skeleton.train_steps(_values(num_train_steps=7), 3, _dist(4), "windows") == (
      7, 0)
  assert estimator_skeleton.train_steps(_values(do_train=False), 100, _dist(1), "x") == (0, 0)


@pytest.mark.parametrize("what", ["examples", "windows"])
def test_less_than_one_full_batch_is_refused_with_the_rows_and_the_fix(what):
  with pytest.raises(ValueError, match=r"^5 training %s give no full batch of --train_batch_size "
                     r"8 x 2 workers: lower the batch size or pass --num_train_steps$" % what):
    estimator_skeleton.train_steps(_values(num_train_epochs=1.0), 5, _dist(2), what)
