"""bert_fin.modeling against google-research/bert: config, variable names/shapes, and numerics
against an independent numpy implementation (tests/helpers/reference_bert_numpy.py), to 1e-5."""
import json

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import modeling_toys as mt
from helpers import reference_bert_numpy as ref
from bert_fin import modeling

TOL = mt.TOL


def test_config_defaults_json_and_google_file(tmp_path):
  config = modeling.BertConfig(vocab_size=21128)
  assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
          config.intermediate_size, config.hidden_act, config.hidden_dropout_prob,
          config.attention_probs_dropout_prob, config.max_position_embeddings,
          config.type_vocab_size, config.initializer_range) == (
              768, 12, 12, 3072, "gelu", 0.1, 0.1, 512, 16, 0.02)
  text = config.to_json_string()
  assert text.endswith("}\n") and json.loads(text) == config.to_dict()
  assert list(json.loads(text)) == sorted(config.to_dict())  # sort_keys
  assert text == json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n"
  # A released google config (chinese_L-12_H-768_A-12) with its extra keys.
  google = {"attention_probs_dropout_prob": 0.1, "directionality": "bidi", "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
            "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
            "num_hidden_layers": 12, "pooler_fc_size": 768, "type_vocab_size": 2,
            "vocab_size": 21128}
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(google, indent=2))
  loaded = modeling.BertConfig.from_json_file(str(path))
  assert loaded.to_dict() == google
  assert modeling.BertConfig.from_dict(json.loads(loaded.to_json_string())).to_dict() == google


def test_config_errors(tmp_path):
  with pytest.raises(ValueError, match="vocab_size"):
    modeling.BertConfig.from_dict({"hidden_size": 8})
  bad = tmp_path / "bad.json"
  bad.write_text("{not json")
  with pytest.raises(ValueError, match="not valid JSON"):
    modeling.BertConfig.from_json_file(str(bad))
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="multiple of the number of attention heads"):
      modeling.BertModel(mt.tiny_config(num_attention_heads=5), False,
                         tf.zeros([2, 8], tf.int32))


@pytest.mark.parametrize("objective", ["bert", "roberta"])
def test_variable_names_and_shapes_are_googles(objective):
  config = mt.tiny_config()
  inputs = mt.example_inputs(np.random.RandomState(0), config)
  with tf.Graph().as_default():
    mt.build(config, inputs, objective)
    ours = {mt.variable_name(v): v.shape.as_list() for v in tf.global_variables()}
    assert all(v.dtype.base_dtype == tf.float32 for v in tf.global_variables())
  assert ours == mt.google_variable_shapes(config, objective)


@pytest.mark.parametrize("objective", ["bert", "roberta"])
def test_the_pretraining_variable_listing_is_the_training_graphs(objective):
  """modeling/heads.py's listing (what the import fills, no training graph built) names the
  variables run_pretraining's graph holds, with their shapes."""
  from bert_fin.modeling import heads  # pylint: disable=import-outside-toplevel
  from bert_fin.training.graph import model_fn  # pylint: disable=import-outside-toplevel
  config = mt.tiny_config(num_hidden_layers=3)
  listed = heads.pretraining_variable_shapes(config, next_sentence=objective == "bert")
  assert listed == mt.google_variable_shapes(config, objective)
  assert listed == model_fn.pretraining_variable_shapes(config, objective)


@pytest.mark.parametrize("mask_mode", ["len", "mask"])
def test_outputs_and_losses_match_numpy_reference(mask_mode):
  rng = np.random.RandomState(1)
  config = mt.tiny_config()
  inputs = mt.example_inputs(rng, config)
  with tf.Graph().as_default():
    model, losses = mt.build(config, inputs, mask_mode=mask_mode)
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      weights = mt.randomize_variables(sess, rng)
      got = sess.run(dict(emb=model.get_embedding_output(), layers=model.get_all_encoder_layers(),
                          seq=model.get_sequence_output(), pooled=model.get_pooled_output(),
                          table=model.get_embedding_table(),
                          scores=model.get_all_attention_scores(), **losses))
  want = ref.bert_forward(weights, config, inputs["input_ids"], inputs["input_len"],
                          inputs["token_type_ids"])
  np.testing.assert_allclose(got["table"], weights["bert/embeddings/word_embeddings"])
  np.testing.assert_allclose(got["emb"], want["embedding_output"], atol=TOL, rtol=0)
  for got_layer, want_layer in zip(got["layers"], want["all_layers"]):
    np.testing.assert_allclose(got_layer, want_layer, atol=TOL, rtol=0)
  np.testing.assert_allclose(got["seq"], want["sequence_output"], atol=TOL, rtol=0)
  np.testing.assert_allclose(got["pooled"], want["pooled_output"], atol=TOL, rtol=0)
  assert len(got["scores"]) == config.num_hidden_layers
  for got_scores, want_scores in zip(got["scores"], want["attention_scores"]):
    np.testing.assert_allclose(got_scores, want_scores, atol=TOL, rtol=TOL)
  mlm = ref.masked_lm_loss(weights, config, want["sequence_output"],
                           inputs["masked_lm_positions"], inputs["masked_lm_ids"],
                           inputs["masked_lm_weights"])
  nsp = ref.next_sentence_loss(weights, want["pooled_output"], inputs["next_sentence_labels"])
  np.testing.assert_allclose(got["mlm_loss"], mlm[0], atol=TOL, rtol=TOL)
  np.testing.assert_allclose(got["mlm_per_example_loss"], mlm[1], atol=TOL, rtol=TOL)
  np.testing.assert_allclose(got["mlm_log_probs"], mlm[2], atol=TOL, rtol=TOL)
  np.testing.assert_allclose(got["nsp_loss"], nsp[0], atol=TOL, rtol=TOL)
  np.testing.assert_allclose(got["nsp_per_example_loss"], nsp[1], atol=TOL, rtol=TOL)
  np.testing.assert_allclose(got["nsp_log_probs"], nsp[2], atol=TOL, rtol=TOL)
  np.testing.assert_allclose(got["total_loss"], mlm[0] + nsp[0], atol=TOL, rtol=TOL)
  np.testing.assert_array_equal(got["mlm_ids"], inputs["masked_lm_ids"].reshape(-1))
  np.testing.assert_array_equal(got["nsp_labels"], inputs["next_sentence_labels"].reshape(-1))
  assert mlm[0] > 1.0 and nsp[0] > 0.05  # the comparison is not between near-constants


def test_packed_rows_match_numpy_reference():
  """Two sequences a row (sequence_lens): block-diagonal attention, positions restarting at 0."""
  rng = np.random.RandomState(4)
  config = mt.tiny_config()
  inputs = mt.example_inputs(rng, config)
  sequence_ids = np.zeros((mt.BATCH, mt.SEQ), np.int32)
  position_ids = np.zeros((mt.BATCH, mt.SEQ), np.int32)
  sequence_lens = np.zeros((mt.BATCH, 2), np.int32)
  for b, n in enumerate(inputs["input_len"]):
    cut = n // 3 + 1
    sequence_ids[b, :cut], sequence_ids[b, cut:n] = 1, 2
    position_ids[b, :cut], position_ids[b, cut:n] = np.arange(cut), np.arange(n - cut)
    sequence_lens[b] = cut, n - cut
  with tf.Graph().as_default():
    model = modeling.BertModel(config, False, tf.constant(inputs["input_ids"]),
                               input_len=tf.constant(inputs["input_len"]),
                               token_type_ids=tf.constant(inputs["token_type_ids"]),
                               sequence_lens=tf.constant(sequence_lens))
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      weights = mt.randomize_variables(sess, rng)
      got = sess.run(model.get_sequence_output())
  want = ref.bert_forward(weights, config, inputs["input_ids"], inputs["input_len"],
                          inputs["token_type_ids"], sequence_ids, position_ids)
  # Padding queries (sequence id 0) see no key: their softmax is over scores - 10000, where
  # float32 keeps ~1e-3 of the score (google's maths has the same property); compare real tokens.
  real = sequence_ids > 0
  np.testing.assert_allclose(got[real], want["sequence_output"][real], atol=TOL, rtol=0)
