"""The model extract_features runs: its checks and its graph (TensorFlow).

  config, layers = check_model(settings, checkpoint, config_file, vocab_file, say)
  encoder = Encoder(config, checkpoint, layers, max_seq_length)
  encoder.run(rows)   # inputs.Rows -> [float32 [B, S, H] a requested layer, in --layers order]

check_model (one-line ValueError naming the flag): the config read for --max_seq_length, --layers
against its layers, the vocab present and not larger than the config's vocab_size (a padded
config is said once), --do_lower_case against google's model names, the checkpoint readable.
Encoder: BertModel (is_training=False, google's variable names) on placeholders, every encoder
layer, started from the checkpoint; a checkpoint lacking an encoder variable is refused (google's
script would silently use random values), one without the pooler (never read) is fine.
"""
import os

import tensorflow.compat.v1 as tf

from bert_fin import modeling
from bert_fin import tokenization
from bert_fin.finetune.features import flags as features_flags
from bert_fin.modeling import config as config_lib
from bert_fin.records import schema as records

POOLER = "bert/pooler/"  # not read: a checkpoint without the pooler is fine


def check_model(settings, checkpoint, config_file, vocab_file, say):
  """(BertConfig, layer indexes) after the model checks (module docstring)."""
  config = config_lib.read_config_for(config_file, settings.data.max_seq_length)
  layers = features_flags.parse_layers(settings.data.layers)
  features_flags.check_layers(layers, config.num_hidden_layers, settings.data.layers)
  if not os.path.isfile(vocab_file):
    raise ValueError("--vocab_file %s: no such file" % vocab_file)
  padding = tokenization.check_vocab_size(vocab_file, config.vocab_size)
  if padding:
    say(padding)
  tokenization.validate_case_matches_checkpoint(settings.model.do_lower_case, checkpoint)
  try:
    tf.train.list_variables(checkpoint)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError("--init_checkpoint %s: cannot read checkpoint (%s)" % (
        checkpoint, str(e).splitlines()[0])) from None
  return config, layers


class Encoder(object):
  """The model on placeholders: run(rows) -> [float32 [B, S, H] a requested layer]."""

  def __init__(self, config, checkpoint, layers, max_seq_length):
    self.graph = tf.Graph()
    with self.graph.as_default():
      self.input_ids = tf.placeholder(tf.int32, [None, max_seq_length], records.INPUT_IDS)
      self.input_len = tf.placeholder(tf.int32, [None], records.INPUT_LEN)
      self.segment_ids = tf.placeholder(tf.int32, [None, max_seq_length], records.SEGMENT_IDS)
      model = modeling.BertModel(config=config, is_training=False, input_ids=self.input_ids,
                                 input_len=self.input_len, token_type_ids=self.segment_ids)
      every_layer = model.get_all_encoder_layers()
      self.outputs = [every_layer[index] for index in layers]
      report = modeling.init_from_checkpoint(checkpoint, tf.trainable_variables(), log=None)
      missing = [name for name in report.missing_in_checkpoint if not name.startswith(POOLER)]
      if missing:
        raise ValueError("--init_checkpoint %s lacks %d encoder variable(s) (%s): not a "
                         "checkpoint of --bert_config_file's model with google's names" % (
                             checkpoint, len(missing), ", ".join(missing[:3])))
      self.session = tf.Session(graph=self.graph)
      self.session.run(tf.global_variables_initializer())

  def run(self, rows):
    """rows: inputs.Rows of a batch -> [float32 [B, S, H] a requested layer]."""
    return self.session.run(self.outputs, {self.input_ids: rows.input_ids,
                                           self.input_len: rows.input_len,
                                           self.segment_ids: rows.segment_ids})

  def close(self):
    self.session.close()
