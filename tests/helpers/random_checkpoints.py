"""Checkpoints made in the tests: google-named random weights of a config, whole or without the
pretraining heads (an "encoder-only" release, as many hub checkpoints are)."""
import numpy as np

from helpers import modeling_toys
from bert_fin.modeling import checkpoint


def is_encoder(name):
  """True for the variables of BertModel (bert/...), False for the pretraining heads (cls/...)."""
  return not name.startswith("cls/")


def write_random_checkpoint(prefix, config, objective="bert", keep=lambda name: True, seed=0):
  """Writes google-named weights of `config` (N(0, 0.02), LayerNorm gamma 1) for which keep(name)
  holds as checkpoint `prefix`; returns {name: array} written."""
  rng = np.random.RandomState(seed)
  tensors = {}
  for name, shape in sorted(modeling_toys.google_variable_shapes(config, objective).items()):
    if keep(name):
      value = np.ones(shape) if name.endswith("gamma") else rng.normal(0.0, 0.02, shape)
      tensors[name] = value.astype(np.float32)
  checkpoint.write_checkpoint(prefix, tensors)
  return tensors
