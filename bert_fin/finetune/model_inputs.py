"""The checks of a fine-tuning run's model inputs, shared by run_classifier, run_ner and
run_squad (every rank runs them in preflight, before anything is written; one-line ValueErrors):

  resolve_init_folder     --init_checkpoint naming a transformers folder -> settings with the
                          imported checkpoint (and its config / vocab), staged outside
                          --output_dir; settle_init_folder moves it in once preflight passed;
  check_model_inputs      config, vocab, checkpoint readable and consistent, --optimizer and the
                          recipes (recipes.py) the ones of --output_dir's checkpoint; returns
                          (settings, BertConfig);
  check_init_checkpoint   what --init_checkpoint restores of the model (said), refused when it
                          restores none of the encoder;
  check_weights           the weights a run starts from: the fine-tuned model it reads (its fit
                          checked by the program), else check_init_checkpoint.
"""
import dataclasses
import os
import tempfile

import tensorflow.compat.v1 as tf

from bert_fin import tokenization
from bert_fin.finetune import finetuned
from bert_fin.finetune import recipes
from bert_fin.finetune import train_op
from bert_fin.interop import init_checkpoint as init_lib
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.modeling import config as config_lib


def resolve_init_folder(settings, dist, say):
  """The settings (a fine-tuning program's frozen table) to run with: when --init_checkpoint
  names a transformers folder, the chief imports it for --output_dir/imported_init
  (interop/init_checkpoint.py, one line refusals; a new import staged in a temporary directory
  until settle_init_folder), and every rank's settings.model switches init_checkpoint to the
  import (a rank on a host that does not see it imports its own into a private temporary
  directory), and bert_config_file / vocab_file left out to its config and vocab; the chief's
  init_lib.Resolved is settings.init_import. Other values of the flag: `settings` unchanged."""
  model = settings.model
  if not init_lib.is_transformers_folder(model.init_checkpoint):
    return settings
  decided = dist.chief_decides(lambda: init_lib.resolve(
      model.init_checkpoint, os.path.join(settings.output.output_dir, init_lib.IMPORT_DIR),
      model.bert_config_file, model.vocab_file)._asdict(), catch=(ValueError,))
  resolved = init_lib.Resolved(**decided)
  if not dist.is_chief and not os.path.isfile(decided["checkpoint"] + ".index"):
    # a host that does not see the chief's output dir: this rank imports the folder privately
    resolved = init_lib.resolve(model.init_checkpoint, tempfile.mkdtemp(
        prefix="bert_fin_imported_init_rank%d_" % dist.rank), model.bert_config_file,
                                model.vocab_file)
    resolved = init_lib.settle(resolved)._replace(lines=[])  # private: settled where it is
  for line in resolved.lines:
    say(line)
  if resolved.do_lower_case not in (None, model.do_lower_case):
    say("note: the folder's tokenizer has do_lower_case=%s, this run --do_lower_case=%s" % (
        str(resolved.do_lower_case).lower(), str(model.do_lower_case).lower()))
  return _with_import(settings, resolved)


def _with_import(settings, resolved):
  """settings starting from the import `resolved` (its checkpoint, config and vocab)."""
  return dataclasses.replace(settings, init_import=resolved, model=dataclasses.replace(
      settings.model, init_checkpoint=resolved.checkpoint,
      bert_config_file=resolved.bert_config_file, vocab_file=resolved.vocab_file))


def settle_init_folder(settings, dist):
  """After every preflight check passed: the chief moves a staged import into
  --output_dir/imported_init (init_lib.settle) and says where it is; every rank that used the
  staged files switches to the settled ones (a rank with a private import keeps it). Returns the
  settings to run with; `settings` when nothing was imported. Raises ValueError (one line)."""
  resolved = settings.init_import
  if resolved is None:
    return settings
  settled = dist.chief_decides(lambda: init_lib.settle(resolved)._asdict(), catch=(ValueError,))
  if dist.is_chief or (resolved.staged_in is not None and os.path.isfile(
      settled["checkpoint"] + ".index")):
    return _with_import(settings, init_lib.Resolved(**settled))
  return settings  # this rank's own private import (another host), or an import reused


def check_model_inputs(settings, dist, say):
  """--init_checkpoint's transformers folder imported (resolve_init_folder); config, vocab and
  checkpoint readable and consistent, and a training run's --optimizer and recipes the ones of
  --output_dir's checkpoint (if any; the recipes said); returns (the settings to run with:
  resolve_init_folder's, the BertConfig). A config padded past the vocab (vocab_size > its
  tokens) is accepted and say(line)s so, once."""
  settings = resolve_init_folder(settings, dist, say)
  model = settings.model
  bert_config = config_lib.read_config_for(model.bert_config_file, settings.data.max_seq_length)
  if not os.path.isfile(model.vocab_file):
    raise ValueError("--vocab_file %s: no such file" % model.vocab_file)
  padding = tokenization.check_vocab_size(model.vocab_file, bert_config.vocab_size)
  if padding:
    say(padding)
  tokenization.validate_case_matches_checkpoint(model.do_lower_case, model.init_checkpoint)
  if model.init_checkpoint:
    try:
      checkpoint_lib.check_local_files(model.init_checkpoint)  # no FIFO for TF to block on
      tf.train.list_variables(model.init_checkpoint)
    except (tf.errors.OpError, ValueError) as e:
      raise ValueError("--init_checkpoint %s: cannot read checkpoint (%s)" % (
          model.init_checkpoint, str(e).splitlines()[0]))
  if settings.mode.do_train:
    finetuned.check_optimizer(settings.output.output_dir, settings.optimizer.optimizer)
    _check_recipe(settings, bert_config, say)
  return settings, bert_config


def _check_recipe(settings, bert_config, say):
  """The recipes of a training run: fit the config, are those of --output_dir's checkpoint;
  said once."""
  recipe = recipes.of_settings(settings)
  recipes.check_layers(recipe, bert_config)
  recipes.check_recipe(settings.output.output_dir, recipe)
  line = recipes.describe(recipe, bert_config.num_hidden_layers)
  output_dir = settings.output.output_dir
  resuming = checkpoint_lib.resolve_checkpoint(output_dir, run_dir=True)
  if recipe.reinit_top_layers and resuming:
    line += " (this run resumes --output_dir's checkpoint: nothing is re-initialised)"
  elif recipe.reinit_top_layers and not settings.model.init_checkpoint:
    line += " (no --init_checkpoint: every variable starts from its initializer anyway)"
  if line:
    say(line)


def check_init_checkpoint(settings, say, shapes_fn):
  """say(line)s what --init_checkpoint restores of the model whose variables shapes_fn() gives
  ({name: shape}), or that there is none (random init); ValueError when it restores nothing of
  the encoder (train_op.ENCODER_SCOPE/..., every program's encoder). Shared by run_classifier,
  run_ner and run_squad."""
  if not settings.model.init_checkpoint:
    say("no --init_checkpoint: every variable starts from its initializer (random init)")
    return
  report = finetuned.restore_report(settings.model.init_checkpoint, shapes_fn())
  say(finetuned.describe_restore(report))
  if not any(name.startswith(train_op.ENCODER_SCOPE + "/") for name in report.mapped):
    raise ValueError("--init_checkpoint %s restores none of the encoder's variables (%s/...): "
                     "not a BERT checkpoint with google's variable names" % (
                         settings.model.init_checkpoint, train_op.ENCODER_SCOPE))


def check_weights(settings, say, checkpoint, shapes_fn, check_saved):
  """The weights the run starts from, checked and said before anything is written: with a
  fine-tuned `checkpoint` to read (finetuned.saved_model's; None: none), say(check_saved(
  checkpoint)) (check_saved: the line naming it, ValueError when it does not fit the run);
  without one, what --init_checkpoint restores of the model whose variable shapes shapes_fn()
  gives (check_init_checkpoint)."""
  if checkpoint is None:
    check_init_checkpoint(settings, say, shapes_fn)
  else:
    say(check_saved(checkpoint))
