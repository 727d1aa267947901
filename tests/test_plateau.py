"""The unigram-plateau warning: a masked LM whose accuracy is about the share of the most frequent
masked token gets one line in the eval block and in the yardstick's checkpoint line; a trained
one does not; the share is measured over the eval records' weighted masked labels."""
import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin.training.monitor import eval_results
from bert_fin.training.monitor import plateau
from bert_fin.yardstick import checks

PLATEAU = {"masked_lm_accuracy": 0.081, plateau.TOP_SHARE_KEY: 0.074, "global_step": 600}
TRAINED = {"masked_lm_accuracy": 0.452, plateau.TOP_SHARE_KEY: 0.074, "global_step": 60000}


def test_plateau_line_for_a_plateau_checkpoint_only():
  line = plateau.plateau_line(PLATEAU)
  assert line.startswith("WARNING: this checkpoint (step 600) has not left the unigram plateau")
  assert "masked-LM accuracy 0.081, the most frequent masked token alone 0.074" in line
  assert "\n" not in line
  assert plateau.plateau_line(TRAINED) is None
  assert plateau.plateau_line({"masked_lm_accuracy": 0.08}) is None  # no share: no verdict


def test_named_eval_sets_are_judged_each():
  result = {"news/masked_lm_accuracy": 0.40, "news/" + plateau.TOP_SHARE_KEY: 0.06,
            "wiki/masked_lm_accuracy": "0.05", "wiki/" + plateau.TOP_SHARE_KEY: "0.06"}
  assert [name for name, _, _ in plateau.plateau_sets(result)] == ["wiki"]


def test_top_token_share_counts_weighted_masked_labels_over_batches():
  with tf.Graph().as_default():
    ids = tf.placeholder(tf.int32, [None])
    weights = tf.placeholder(tf.float32, [None])
    value, update = plateau.top_token_share_metric(ids, weights, 8)
    with tf.Session() as session:
      session.run(tf.local_variables_initializer())
      session.run(update, {ids: [5, 5, 3, 0], weights: [1, 1, 1, 0]})  # 0: padding
      assert np.isclose(session.run(value), 2 / 3)
      session.run(update, {ids: [3, 3, 3], weights: [1, 1, 1]})
      assert np.isclose(session.run(value), 4 / 6)  # now 3 is the most frequent


def test_eval_block_prints_the_warning_for_a_plateau_checkpoint_only(tmp_path, capsys):
  eval_results.write_eval_results(str(tmp_path), PLATEAU)
  assert "has not left the unigram plateau" in capsys.readouterr().out
  eval_results.write_eval_results(str(tmp_path), TRAINED)
  assert "plateau" not in capsys.readouterr().out


def test_yardstick_notes_a_plateau_checkpoint_from_its_eval_results(tmp_path):
  prefix = str(tmp_path / "model.ckpt-600")
  eval_results.write_results_file(str(tmp_path / eval_results.EVAL_RESULTS_FILE), PLATEAU)
  note = checks.plateau_note(prefix)
  assert note.startswith("; WARNING: the checkpoint (its ") and "unigram plateau" in note
  eval_results.write_results_file(str(tmp_path / eval_results.EVAL_RESULTS_FILE), TRAINED)
  assert checks.plateau_note(prefix) == ""
  assert checks.plateau_note(str(tmp_path / "elsewhere" / "model.ckpt-1")) == ""
