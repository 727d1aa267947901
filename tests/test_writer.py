"""Hand-encoded Examples and TFRecord files (bert_fin/data/writer.py) against TensorFlow's own."""
import os
import random

import pytest

from bert_fin.data import writer
from bert_fin.records import schema

os.environ.setdefault("OMP_NUM_THREADS", "1")
S, P = 16, 4


@pytest.fixture(scope="module")
def tf():
  import tensorflow.compat.v1 as tf_module
  return tf_module


def _random_instance(rng, vocab_size=30000):
  n = rng.randint(3, S)
  k = rng.randint(0, min(P, n - 2))
  return dict(input_ids=[rng.randrange(vocab_size) for _ in range(n)],
              segment_ids=[rng.randint(0, 1) for _ in range(n)],
              masked_lm_positions=sorted(rng.sample(range(1, n), k)),
              masked_lm_ids=[rng.randrange(vocab_size) for _ in range(k)],
              next_sentence_label=rng.randint(0, 1))


def _reference_example(tf, features, specs):
  feature = {}
  for spec in specs:
    values = features[spec.name]
    if spec.dtype == schema.FLOAT32:
      feature[spec.name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    else:
      feature[spec.name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  return tf.train.Example(features=tf.train.Features(feature=feature))


@pytest.mark.parametrize("write_input_mask", [False, True])
def test_encoded_example_equals_tf_train_example(tf, write_input_mask):
  encoder = writer.ExampleEncoder(S, P, write_input_mask, max_value=30000)
  rng = random.Random(0)
  for _ in range(50):
    inst = _random_instance(rng)
    data = encoder.encode(**inst)
    features = encoder.padded_features(**inst)
    parsed = tf.train.Example.FromString(data)
    assert parsed == _reference_example(tf, features, encoder.specs)
    n, k = len(inst["input_ids"]), len(inst["masked_lm_positions"])
    assert list(parsed.features.feature["input_len"].int64_list.value) == [n]
    assert list(parsed.features.feature["masked_lm_weights"].float_list.value) == (
        [1.0] * k + [0.0] * (P - k))
    if write_input_mask:
      assert list(parsed.features.feature["input_mask"].int64_list.value) == (
          [1] * n + [0] * (S - n))


def test_records_parse_with_the_training_spec(tf, tmp_path):
  encoder = writer.ExampleEncoder(S, P, write_input_mask=True, max_value=30000)
  rng = random.Random(1)
  instances = [_random_instance(rng) for _ in range(7)]
  paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
  with writer.ShardedRecordWriter(paths) as out:
    for inst in instances:
      out.write(encoder.encode(**inst))
  assert out.counts == [4, 3]
  with tf.Graph().as_default(), tf.Session() as sess:
    for legacy in (False, True):
      spec = schema.tf_parsing_spec(S, P, legacy_input_mask=legacy)
      dataset = tf.data.TFRecordDataset(paths[0]).map(
          lambda r, spec=spec: schema.tf_decode_features(tf.io.parse_single_example(r, spec)))
      next_element = tf.data.make_one_shot_iterator(dataset).get_next()
      for inst in instances[0::2]:  # round-robin: file a holds instances 0, 2, 4, 6
        got = sess.run(next_element)
        n = len(inst["input_ids"])
        assert got["input_len"] == n
        assert list(got["input_ids"][:n]) == inst["input_ids"]
        assert not got["input_ids"][n:].any()
        k = len(inst["masked_lm_positions"])
        assert list(got["masked_lm_positions"][:k]) == inst["masked_lm_positions"]
        assert list(got["masked_lm_ids"][:k]) == inst["masked_lm_ids"]
        assert list(got["next_sentence_labels"]) == [inst["next_sentence_label"]]


def test_output_paths():
  assert writer.output_paths("/d/x", 3) == (
      ["/d/x-00000-of-00003.tfrecord", "/d/x-00001-of-00003.tfrecord",
       "/d/x-00002-of-00003.tfrecord"], "/d/x.stats.json")
  assert writer.output_paths("/d/x.tfrecord", 1) == (["/d/x.tfrecord"], "/d/x.tfrecord.stats.json")
  assert writer.output_paths("a,b", 1) == (["a", "b"], "a.stats.json")
  with pytest.raises(ValueError, match="lists 2 files"):
    writer.output_paths("a,b", 3)


def test_failed_write_leaves_no_file(tmp_path):
  encoder = writer.ExampleEncoder(S, P, max_value=100)
  path = tmp_path / "x.tfrecord"
  with pytest.raises(ValueError, match="exceeds"):
    with writer.ShardedRecordWriter([str(path)]) as out:
      out.write(encoder.encode([1, 2, 3], [0, 0, 0], [1], [2], 0))
      encoder.encode(list(range(S + 1)), [0] * (S + 1), [], [], 0)
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("write_input_mask", [False, True])
def test_fast_encode_equals_generic_encoding(write_input_mask):
  encoder = writer.ExampleEncoder(S, P, write_input_mask, max_value=30000)
  rng = random.Random(2)
  for _ in range(200):
    inst = _random_instance(rng)
    assert encoder.encode(**inst) == encoder.encode_features(encoder.padded_features(**inst))


def _random_unmasked_instance(rng, vocab_size=30000):
  n = rng.randint(3, S)
  return dict(input_ids=[rng.randrange(vocab_size) for _ in range(n)],
              segment_ids=[rng.randint(0, 1) for _ in range(n)],
              word_starts=[rng.choice([schema.WORD_CONTINUES, schema.WORD_BEGINS,
                                       schema.NEVER_MASKED]) for _ in range(n)],
              next_sentence_label=rng.randint(0, 1))


def test_unmasked_encoder_equals_tf_train_example_and_generic_encoding(tf):
  encoder = writer.UnmaskedExampleEncoder(S, max_value=30000)
  assert [s.name for s in encoder.specs] == [s.name for s in schema.dynamic_feature_specs(S)]
  rng = random.Random(3)
  for _ in range(100):
    inst = _random_unmasked_instance(rng)
    data = encoder.encode(**inst)
    features = encoder.padded_features(**inst)
    assert data == encoder.encode_features(features)
    assert tf.train.Example.FromString(data) == _reference_example(tf, features, encoder.specs)
  parsed = tf.io.parse_single_example(data, schema.tf_feature_spec(encoder.specs))
  assert list(parsed[schema.WORD_STARTS].numpy()) == features[schema.WORD_STARTS]
  layout = schema.layout_of_example(data, allow_dynamic=True)
  assert layout.dynamic_masking and layout.max_seq_length == S
  assert layout.max_predictions_per_seq is None and not layout.max_sequences_per_pack
  with pytest.raises(ValueError, match="dynamic-masking records"):
    schema.layout_of_example(data)  # readers that expect masks say what the records are
