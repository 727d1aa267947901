"""The checks of a fine-tuning run's model inputs, shared by run_classifier and run_ner (every
rank runs them in preflight, before anything is written; one-line ValueErrors):

  resolve_init_folder     --init_checkpoint naming a transformers folder -> an imported checkpoint;
  check_model_inputs      config, vocab, checkpoint readable and consistent, --optimizer the one
                          of --output_dir's checkpoint; returns the BertConfig;
  check_init_checkpoint   what --init_checkpoint restores of the model (said), refused when it
                          restores none of the encoder.
"""
import json
import os
import tempfile

import tensorflow.compat.v1 as tf

from bert_fin import tokenization
from bert_fin.finetune import finetuned
from bert_fin.interop import init_checkpoint as init_lib
from bert_fin.modeling import config as config_lib


def resolve_init_folder(values, dist, say):
  """--init_checkpoint naming a transformers folder: the chief imports it into
  --output_dir/imported_init (interop/init_checkpoint.py, one line refusals), the ranks all
  switch --init_checkpoint to the import (a rank on a host that does not see it imports its own
  into a private temporary directory), and --bert_config_file / --vocab_file left out to its
  config and vocab. Other values of the flag are left alone."""
  if not init_lib.is_transformers_folder(values.init_checkpoint):
    return
  text = ""
  if dist.is_chief:
    try:
      resolved = init_lib.resolve(
          values.init_checkpoint, os.path.join(values.output_dir, init_lib.IMPORT_DIR),
          values.bert_config_file, values.vocab_file)
      text = json.dumps(resolved._asdict())
    except ValueError as e:
      text = json.dumps({"error": str(e)})
  decided = json.loads(dist.broadcast_bytes(text.encode("utf-8")).decode("utf-8"))
  if "error" in decided:
    raise ValueError(decided["error"])
  if not dist.is_chief and not os.path.isfile(decided["checkpoint"] + ".index"):
    # a host that does not see the chief's output dir: this rank imports the folder privately
    resolved = init_lib.resolve(values.init_checkpoint, tempfile.mkdtemp(
        prefix="bert_fin_imported_init_rank%d_" % dist.rank), values.bert_config_file,
                                values.vocab_file)
    decided = dict(resolved._asdict(), lines=[])
  for line in decided["lines"]:
    say(line)
  if decided["do_lower_case"] not in (None, values.do_lower_case):
    say("note: the folder's tokenizer has do_lower_case=%s, this run --do_lower_case=%s" % (
        str(decided["do_lower_case"]).lower(), str(values.do_lower_case).lower()))
  values.init_checkpoint = decided["checkpoint"]
  values.bert_config_file = decided["bert_config_file"]
  values.vocab_file = decided["vocab_file"]


def check_model_inputs(values, dist, say):
  """--init_checkpoint's transformers folder imported (resolve_init_folder); config, vocab and
  checkpoint readable and consistent, and a training run's --optimizer the one of --output_dir's
  checkpoint (if any); returns the BertConfig. A config padded past the vocab (vocab_size > its
  tokens) is accepted and say(line)s so, once."""
  resolve_init_folder(values, dist, say)
  bert_config = config_lib.read_config_for(values.bert_config_file, values.max_seq_length)
  if not os.path.isfile(values.vocab_file):
    raise ValueError("--vocab_file %s: no such file" % values.vocab_file)
  padding = tokenization.check_vocab_size(values.vocab_file, bert_config.vocab_size)
  if padding:
    say(padding)
  tokenization.validate_case_matches_checkpoint(values.do_lower_case, values.init_checkpoint)
  if values.init_checkpoint:
    try:
      tf.train.list_variables(values.init_checkpoint)
    except (tf.errors.OpError, ValueError) as e:
      raise ValueError("--init_checkpoint %s: cannot read checkpoint (%s)" % (
          values.init_checkpoint, str(e).splitlines()[0]))
  if values.do_train:
    finetuned.check_optimizer(values.output_dir, values.optimizer)
  return bert_config


def check_init_checkpoint(values, say, shapes_fn, encoder_scope):
  """say(line)s what --init_checkpoint restores of the model whose variables shapes_fn() gives
  ({name: shape}), or that there is none (random init); ValueError when it restores nothing of
  the encoder (`encoder_scope`/...). Shared by run_classifier and run_ner."""
  if not values.init_checkpoint:
    say("no --init_checkpoint: every variable starts from its initializer (random init)")
    return
  report = finetuned.restore_report(values.init_checkpoint, shapes_fn())
  say(finetuned.describe_restore(report))
  if not any(name.startswith(encoder_scope + "/") for name in report.mapped):
    raise ValueError("--init_checkpoint %s restores none of the encoder's variables (%s/...): "
                     "not a BERT checkpoint with google's variable names" % (
                         values.init_checkpoint, encoder_scope))
