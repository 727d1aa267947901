"""Fine-tuning recipes for small labelled sets, shared by every program built on finetune/train_op.py
(run_classifier, run_ner, run_squad): layer-wise learning-rate decay and re-initialising the top layers.

--layerwise_lr_decay=γ (0 < γ <= 1; 1: off, google's fine-tuning). Each step down the stack
multiplies the learning rate by γ; for an encoder of L layers (bert/encoder/layer_0 the bottom):
  the task head (output_weights, output_bias, the CRF's transitions, ...) and bert/pooler   1
  bert/encoder/layer_i/...   (i = 0 .. L-1)                                            γ^(L-i)
  bert/embeddings/...                                                                  γ^(L+1)
so the top layer gets γ, the bottom one γ^L and the embeddings γ^(L+1). L=2, γ=0.9: head and
pooler lr, layer_1 0.9 lr, layer_0 0.81 lr, embeddings 0.729 lr. The factor multiplies the
optimizer's whole step (optimization/optimizers.py learning_rate_multipliers), weight decay
included, on top of the warmup / decay schedule.

--reinit_top_layers=N (Zhang et al. 2021, "Revisiting Few-sample BERT Fine-tuning"): the top N
encoder layers (layer_{L-N} .. layer_{L-1}) and the pooler, as Zhang et al. do, are not restored
from --init_checkpoint: they keep the model's own initializers, google's (truncated normal with
stddev initializer_range for kernels, zeros for biases, LayerNorm gamma 1 and beta 0), drawn from
the run's --seed. It happens only when a training run starts from --init_checkpoint: a run that
resumes --output_dir's checkpoint restores every variable from it (the Estimator runs no
initializer then), and an eval / predict-only run builds no train setup, so it restores the
fine-tuned model whole.

Both are recorded beside the checkpoints in recipe.json ({"layerwise_lr_decay": γ,
"reinit_top_layers": N}), written with optimizer.json; continuing a checkpoint with other values
is refused in one line (a directory without the file was trained with neither: 1.0 and 0).
"""
import collections
import json
import os
import re

from bert_fin import io_utils
from bert_fin.modeling import checkpoint as checkpoint_lib

RECIPE_FILE = "recipe.json"
Recipe = collections.namedtuple("Recipe", ["layerwise_lr_decay", "reinit_top_layers"])
GOOGLE = Recipe(layerwise_lr_decay=1.0, reinit_top_layers=0)  # google's fine-tuning: neither
_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")
_EMBEDDINGS, _POOLER = "bert/embeddings/", "bert/pooler/"


def of_settings(settings):
  """The Recipe of a fine-tuning program's settings (finetune/settings.py Optimizer group)."""
  return Recipe(settings.optimizer.layerwise_lr_decay, settings.optimizer.reinit_top_layers)


def num_layers(names):
  """L: the number of encoder layers among variable names (bert/encoder/layer_i/...)."""
  indices = {int(m.group(1)) for m in map(_LAYER.match, names) if m}
  return max(indices) + 1 if indices else 0


def learning_rate_multipliers(names, layerwise_lr_decay):
  """{name: factor} of the variables (names: every trained variable) whose learning rate the
  decay scales (module docstring); {} at 1.0. The head and the pooler, at 1, are left out."""
  if layerwise_lr_decay == 1.0:
    return {}
  layers = num_layers(names)
  factors = {}
  for name in names:
    match = _LAYER.match(name)
    if match:
      factors[name] = layerwise_lr_decay ** (layers - int(match.group(1)))
    elif name.startswith(_EMBEDDINGS):
      factors[name] = layerwise_lr_decay ** (layers + 1)
  return factors


def reinitialised(names, reinit_top_layers):
  """Sorted names among `names` that --reinit_top_layers=N re-initialises: the top N encoder
  layers' variables and the pooler's. ValueError when the encoder has fewer than N layers."""
  if not reinit_top_layers:
    return []
  layers = num_layers(names)
  if reinit_top_layers > layers:
    raise ValueError("--reinit_top_layers=%d, but the encoder has %d layers"
                     % (reinit_top_layers, layers))
  top = set(range(layers - reinit_top_layers, layers))
  return sorted(name for name in names if name.startswith(_POOLER) or (
      _LAYER.match(name) and int(_LAYER.match(name).group(1)) in top))


def check_layers(recipe, bert_config):
  """ValueError when --reinit_top_layers exceeds the config's num_hidden_layers."""
  if recipe.reinit_top_layers > bert_config.num_hidden_layers:
    raise ValueError("--reinit_top_layers=%d, but --bert_config_file has num_hidden_layers=%d"
                     % (recipe.reinit_top_layers, bert_config.num_hidden_layers))


def describe(recipe, num_hidden_layers):
  """The start-up line of a training run with a recipe; None with google's fine-tuning."""
  parts = []
  if recipe.layerwise_lr_decay != 1.0:
    decay = recipe.layerwise_lr_decay
    parts.append("--layerwise_lr_decay=%g: learning rate x %g for layer_%d (the top), x %g for "
                 "layer_0, x %g for the embeddings, x 1 for the pooler and the head"
                 % (decay, decay, num_hidden_layers - 1, decay ** num_hidden_layers,
                    decay ** (num_hidden_layers + 1)))
  if recipe.reinit_top_layers:
    first = num_hidden_layers - recipe.reinit_top_layers
    parts.append("--reinit_top_layers=%d: layer_%d..layer_%d and the pooler start from google's "
                 "initializer, not from --init_checkpoint" % (
                     recipe.reinit_top_layers, first, num_hidden_layers - 1))
  return "; ".join(parts) or None


def write_recipe(output_dir, recipe):
  """recipe.json beside the checkpoints (atomic write)."""
  with io_utils.atomic_output(os.path.join(output_dir, RECIPE_FILE)) as f:
    f.write(json.dumps(recipe._asdict(), indent=2) + "\n")


def read_recipe(directory):
  """The Recipe recorded in directory/recipe.json; GOOGLE without the file."""
  path = os.path.join(directory, RECIPE_FILE)
  return io_utils.read_saved(
      path, lambda text: Recipe(**json.loads(text)), lambda e: ValueError(
          "%s: not a fine-tuning recipe record (%s); delete it or use a new --output_dir"
          % (path, e)), default=GOOGLE)


def check_recipe(output_dir, recipe):
  """ValueError (one line) when output_dir holds a checkpoint trained with another recipe:
  continuing it would mix two (its re-initialisation happened, or not, when it started)."""
  if not checkpoint_lib.resolve_checkpoint(output_dir, run_dir=True):
    return
  saved = read_recipe(output_dir)
  if saved != recipe:
    raise ValueError("--output_dir %s holds a checkpoint trained with %s, this run asks for %s: "
                     "resume with the recorded values or use a new --output_dir"
                     % (output_dir, _as_flags(saved), _as_flags(recipe)))


def _as_flags(recipe):
  return "--layerwise_lr_decay=%g --reinit_top_layers=%d" % tuple(recipe)
