"""The unigram plateau: a masked LM that has not learned predicts the most frequent tokens
whatever the context, and its masked-LM accuracy is then about the share of the most frequent
masked token among the masked tokens of the records it is evaluated on. A checkpoint whose
accuracy is below PLATEAU_FACTOR x that share has not left the plateau: fine-tuning it can do
worse than random init (measured: 600 pretraining steps at masked-LM accuracy 0.07-0.09 gave
reading-comprehension F1 0.250 where random init gave 0.396).

The eval block (run_pretraining's, eval_results.write_eval_results) carries TOP_SHARE_KEY beside
masked_lm_accuracy (for each named eval set, NAME/...); plateau_line(result) is the one-line
warning or None, used by the eval block and by the yardstick (the eval_results.txt beside a
checkpoint). Pure Python; the share's metric is built by top_token_share_metric (TensorFlow).
"""
ACCURACY_KEY = "masked_lm_accuracy"
TOP_SHARE_KEY = "masked_lm_top_token_share"
PLATEAU_FACTOR = 1.5


def _number(value):
  try:
    return float(value)
  except (TypeError, ValueError):
    return None


def plateau_sets(result):
  """[(eval set name or "", accuracy, top share)] of the sets of an eval result ({key: value},
  values numbers or their text) whose masked-LM accuracy is below PLATEAU_FACTOR x the share."""
  found = []
  for key in sorted(result):
    prefix, _, name = key.rpartition("/")
    if name != ACCURACY_KEY:
      continue
    share_key = (prefix + "/" if prefix else "") + TOP_SHARE_KEY
    accuracy, share = _number(result[key]), _number(result.get(share_key))
    if accuracy is not None and share and accuracy < PLATEAU_FACTOR * share:
      found.append((prefix, accuracy, share))
  return found


def plateau_line(result, what="this checkpoint"):
  """One line warning that `what` has not left the unigram plateau, or None."""
  found = plateau_sets(result)
  if not found:
    return None
  figures = "; ".join("%smasked-LM accuracy %.3f, the most frequent masked token alone %.3f" % (
      name + ": " if name else "", accuracy, share) for name, accuracy, share in found)
  step = result.get("global_step")
  return ("WARNING: %s%s has not left the unigram plateau (%s; below %g x): it predicts the "
          "most frequent tokens, not from context; fine-tuning it may do worse than random "
          "init: pretrain longer (or check the learning rate and data)" % (
              what, " (step %s)" % step if step is not None else "", figures, PLATEAU_FACTOR))


def top_token_share_metric(label_ids, weights, vocab_size):
  """A tf.metrics-style (value, update_op): the share of the most frequent label id among the
  weighted labels seen (label_ids int32 [N], weights float [N]; padding has weight 0)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  counts = tf.get_variable(
      "masked_lm_label_counts", [vocab_size], dtype=tf.float32, trainable=False,
      initializer=tf.zeros_initializer(),
      collections=[tf.GraphKeys.LOCAL_VARIABLES, tf.GraphKeys.METRIC_VARIABLES])
  batch = tf.math.unsorted_segment_sum(tf.cast(tf.reshape(weights, [-1]), tf.float32),
                                       tf.reshape(label_ids, [-1]), vocab_size)
  update_op = tf.assign_add(counts, batch)
  value = tf.div_no_nan(tf.reduce_max(counts), tf.reduce_sum(counts))
  return value, update_op
