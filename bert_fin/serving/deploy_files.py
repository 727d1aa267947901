"""The files a deployment reads beside the models: TF Serving's batching parameters and warm-up
records, Triton's config.pbtxt (SavedModel and ONNX), each as text or bytes (written by export.py).

TF Serving (tensorflow_model_server --enable_batching --batching_parameters_file=...):
  batching_parameters(max_batch_size)  text-format BatchingParameters: batches up to
      max_batch_size rows, waiting at most BATCH_TIMEOUT_MICROS for them;
  warmup_records(signature, inputs)  assets.extra/tf_serving_warmup_requests: TFRecord payloads,
      each a serialized tensorflow.serving.PredictionLog holding one PredictRequest (written
      with TensorFlow's TensorProto and the proto wire format: no tensorflow-serving-api needed),
      so the server runs every signature once before it answers.
Triton (model repository: NAME/config.pbtxt, NAME/1/model.savedmodel or NAME/1/model.onnx):
  triton_config(name, platform, inputs, outputs, max_batch_size, signature)  with dynamic batching;
  inputs / outputs: [(name, Triton type, dims without the batch)]; dims [] is a [batch] tensor
  (written as dims [1] reshaped to []).
"""
import tensorflow as tf

from bert_fin.data import writer

BATCH_TIMEOUT_MICROS = 2000
MAX_BATCH_SIZE = 32
# tensorflow_serving protos' field numbers (apis/prediction_log.proto, predict.proto, model.proto)
PREDICTION_LOG_PREDICT_LOG = 6
PREDICT_LOG_REQUEST = 1
REQUEST_MODEL_SPEC, REQUEST_INPUTS = 1, 2
MODEL_SPEC_NAME, MODEL_SPEC_SIGNATURE = 1, 3
MAP_KEY, MAP_VALUE = 1, 2


def batching_parameters(max_batch_size=MAX_BATCH_SIZE):
  """TF Serving's --batching_parameters_file text."""
  return ("max_batch_size { value: %d }\nbatch_timeout_micros { value: %d }\n"
          "num_batch_threads { value: 1 }\nmax_enqueued_batches { value: 100 }\n"
          "pad_variable_length_inputs: true\n" % (max_batch_size, BATCH_TIMEOUT_MICROS))


def _field(number, payload):
  """A length-delimited protobuf field of bytes or str (UTF-8)."""
  if isinstance(payload, str):
    payload = payload.encode("utf-8")
  return writer.length_delimited(number, payload)


def prediction_log(model_name, signature, inputs):
  """A serialized PredictionLog{predict_log{request{model_spec, inputs}}}.

  Args:
    model_name: the servable's name (TF Serving --model_name).
    signature: the signature the request calls.
    inputs: {input name: numpy array or list}.
  """
  spec = _field(MODEL_SPEC_NAME, model_name) + _field(MODEL_SPEC_SIGNATURE, signature)
  request = _field(REQUEST_MODEL_SPEC, spec)
  for name in sorted(inputs):
    tensor = tf.make_tensor_proto(inputs[name]).SerializeToString()
    request += _field(REQUEST_INPUTS, _field(MAP_KEY, name) + _field(MAP_VALUE, tensor))
  return _field(PREDICTION_LOG_PREDICT_LOG, _field(PREDICT_LOG_REQUEST, request))


def write_warmup(path, model_name, requests):
  """Writes the warm-up TFRecord file at `path`: requests [(signature, inputs)]."""
  with tf.io.TFRecordWriter(path) as writer:
    for signature, inputs in requests:
      writer.write(prediction_log(model_name, signature, inputs))


def _tensor_entries(kind, tensors):
  entries = []
  for name, data_type, dims in tensors:
    shape = ", ".join(str(d) for d in dims) if dims else "1"
    reshape = "" if dims else "\n    reshape: { shape: [ ] }"
    entries.append('  {\n    name: "%s"\n    data_type: %s\n    dims: [ %s ]%s\n  }' % (
        name, data_type, shape, reshape))
  return "%s [\n%s\n]\n" % (kind, ",\n".join(entries))


def triton_config(name, platform, inputs, outputs, max_batch_size=MAX_BATCH_SIZE,
                  signature=None):
  """config.pbtxt text of one Triton model with dynamic batching (module docstring)."""
  text = 'name: "%s"\nplatform: "%s"\nmax_batch_size: %d\n' % (name, platform, max_batch_size)
  text += _tensor_entries("input", inputs) + _tensor_entries("output", outputs)
  text += ("dynamic_batching {\n  preferred_batch_size: [ %d, %d ]\n"
           "  max_queue_delay_microseconds: %d\n}\n" % (
               max(1, max_batch_size // 4), max_batch_size, BATCH_TIMEOUT_MICROS))
  if signature:
    text += ('parameters: {\n  key: "TF_SIGNATURE_DEF"\n  value: { string_value: "%s" }\n}\n' %
             signature)
  return text
