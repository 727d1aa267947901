"""The pretraining losses of run_pretraining: google's heads applied to the decoded record features.

`pretraining_losses(config, model, features, objective, packed)` reads the feature dict of the
records (bert_fin.records.schema names), builds modeling's masked-LM head (and for objective "bert" the
next-sentence head) on `model` and returns every loss and eval input as tensors.

Packed rows (packed=True: features hold sequence_lens [B, K]; the model was built with them) give the
same losses as the same sequences unpacked: masked positions are absolute in the row, so the
masked-LM loss stays google's mean over the real predictions; the next-sentence head reads every
sequence's own pooled [CLS] ([B, K, H] -> [B*K, H]) and its loss is the mean over the real
sequences (slots with sequence_lens > 0).
"""
import tensorflow.compat.v1 as tf

from bert_fin.records import schema as records
from bert_fin.modeling import heads
from bert_fin.objectives import OBJECTIVES


def pretraining_losses(config, model, features, objective="bert", packed=False):
  """Builds the heads for `objective` on `model` and returns the losses and eval inputs.

  features: the decoded record dict (bert_fin.records.schema names): masked_lm_positions,
    masked_lm_ids int32 [B, P], masked_lm_weights float32 [B, P], next_sentence_labels int32
    [B, 1] (only read for "bert"); packed rows (packed=True, the run's RecordLayout says so):
    also sequence_lens int32 [B, K], with next_sentence_labels [B, K].
  Returns dict: total_loss, mlm_loss, nsp_loss (constant 0 for "roberta", which creates no
    cls/seq_relationship variables), and for google's eval metrics mlm_per_example_loss [B*P],
    mlm_log_probs [B*P, vocab], mlm_ids [B*P], mlm_weights [B*P], nsp_per_example_loss [B],
    nsp_log_probs [B, 2], nsp_labels [B] (these three only for "bert"; packed: [B*K] / [B*K, 2]
    plus nsp_weights [B*K], 1.0 for real sequences). Every value is a tensor, so the dict can be
    fetched with Session.run.
  """
  if objective not in OBJECTIVES:
    raise ValueError("objective must be one of %s, got %r" % (OBJECTIVES, objective))
  needed = [records.MASKED_LM_POSITIONS, records.MASKED_LM_IDS, records.MASKED_LM_WEIGHTS]
  if objective == "bert":
    needed.append(records.NEXT_SENTENCE_LABELS)
  if packed:
    needed.append(records.SEQUENCE_LENS)
  missing = [name for name in needed if name not in features]
  if missing:
    raise ValueError("pretraining_losses(%s): features lack %s (have %s)" % (
        objective, missing, sorted(features)))
  mlm_loss, mlm_per_example, mlm_log_probs = heads.get_masked_lm_output(
      config, model.get_sequence_output(), model.get_embedding_table(),
      features[records.MASKED_LM_POSITIONS], features[records.MASKED_LM_IDS],
      features[records.MASKED_LM_WEIGHTS])
  out = {
      "mlm_loss": mlm_loss,
      "mlm_per_example_loss": mlm_per_example,
      "mlm_log_probs": mlm_log_probs,
      "mlm_ids": tf.reshape(features[records.MASKED_LM_IDS], [-1]),
      "mlm_weights": tf.reshape(features[records.MASKED_LM_WEIGHTS], [-1]),
  }
  if objective == "bert":
    labels = features[records.NEXT_SENTENCE_LABELS]
    pooled, weights = model.get_pooled_output(), None
    if packed:  # one pooled vector per slot
      pooled = tf.reshape(pooled, [-1, config.hidden_size])
      weights = tf.reshape(tf.cast(features[records.SEQUENCE_LENS] > 0, tf.float32), [-1])
      out["nsp_weights"] = weights
    nsp_loss, nsp_per_example, nsp_log_probs = heads.get_next_sentence_output(
        config, pooled, labels, weights)
    out.update(nsp_per_example_loss=nsp_per_example, nsp_log_probs=nsp_log_probs,
               nsp_labels=tf.reshape(labels, [-1]))
  else:
    nsp_loss = tf.constant(0.0, tf.float32)
  out["nsp_loss"] = nsp_loss
  out["total_loss"] = mlm_loss + nsp_loss
  return out
