"""Small pure building blocks of the BERT graph, with google-research/bert's maths and names.

Every weight is created with tf.get_variable under the caller's variable scope, so the names are
google's: a dense layer is `<scope>/kernel` [in, out] and `<scope>/bias` [out]; a layer norm is
`<scope>/LayerNorm/beta|gamma` [width]. Weights are requested in the dtype of the input they
multiply, so a float16 custom getter (precision.py) can keep float32 storage.
"""
import math

import tensorflow.compat.v1 as tf

LAYER_NORM_EPSILON = 1e-12  # tf.contrib.layers.layer_norm's variance_epsilon, used by google


def get_shape_list(tensor, expected_rank=None, name=None):
  """Returns the shape of `tensor` as a list, preferring static dimensions.

  Args:
    tensor: the tf.Tensor.
    expected_rank: optional int or list of ints, the rank(s) `tensor` must have.
    name: optional name of the tensor for the error message.

  Returns:
    list: python ints for static dims, scalar int32 tensors for dynamic ones.

  Raises:
    ValueError: `expected_rank` does not match the static rank.
  """
  if expected_rank is not None:
    assert_rank(tensor, expected_rank, name)
  shape = tensor.shape.as_list()
  dynamic = [i for i, dim in enumerate(shape) if dim is None]
  if not dynamic:
    return shape
  dyn_shape = tf.shape(tensor)
  for index in dynamic:
    shape[index] = dyn_shape[index]
  return shape


def assert_rank(tensor, expected_rank, name=None):
  """Checks the static rank of `tensor`.

  Args:
    tensor: the tf.Tensor.
    expected_rank: int or list of ints.
    name: optional name of the tensor for the error message (default tensor.name).

  Raises:
    ValueError: the static rank of `tensor` is not `expected_rank`.
  """
  expected = {expected_rank} if isinstance(expected_rank, int) else set(expected_rank)
  actual = tensor.shape.ndims
  if actual not in expected:
    raise ValueError("Tensor %s (%s) has rank %s, expected rank %s" % (
        name or tensor.name, tensor.shape, actual, sorted(expected)))


def reshape_to_matrix(input_tensor):
  """Reshapes [..., width] -> [rows, width] (a rank-2 input is returned unchanged).

  Raises:
    ValueError: the last dimension is not static.
  """
  if input_tensor.shape.ndims == 2:
    return input_tensor
  width = input_tensor.shape[-1]
  if width is None:
    raise ValueError("reshape_to_matrix needs a static last dimension: %s" % input_tensor)
  return tf.reshape(input_tensor, [-1, int(width)])


def reshape_from_matrix(output_tensor, orig_shape_list):
  """Reshapes [rows, width] -> orig_shape_list[:-1] + [width] (reverses reshape_to_matrix).

  Args:
    output_tensor: [rows, width].
    orig_shape_list: the get_shape_list of the tensor before reshape_to_matrix.

  Returns:
    output_tensor unchanged when orig_shape_list has rank 2, else reshaped.
  """
  if len(orig_shape_list) == 2:
    return output_tensor
  width = get_shape_list(output_tensor)[-1]
  return tf.reshape(output_tensor, orig_shape_list[:-1] + [width])


def gelu(x):
  """Gaussian Error Linear Unit, tanh approximation (google's `gelu`).

  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))). x^3 is written as x * x * x, not
  tf.pow(x, 3) as google does: the same maths, but Pow is on grappler's auto-mixed-precision deny
  list, which would keep GELU in fp32 between fp16 matmuls.

  Args:
    x: float tensor.

  Returns:
    `x` with the activation applied, same shape and dtype.
  """
  cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))))
  return x * cdf


def gelu_erf(x):
  """The exact Gaussian Error Linear Unit, x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2))).

  transformers' "gelu" (hidden_act "gelu_erf" in a bert_config.json; google's "gelu" is the
  tanh approximation above, up to ~5e-4 away). Imported transformers models use it.

  Args:
    x: float tensor.

  Returns:
    `x` with the activation applied, same shape and dtype.
  """
  return 0.5 * x * (1.0 + tf.math.erf(x * math.sqrt(0.5)))


def get_activation(activation_string):
  """Maps a config's hidden_act string to a function.

  Args:
    activation_string: "gelu" (google's tanh GELU), "gelu_erf" (the exact GELU), "relu", "tanh",
      "linear"/""/None (any case); a non-string (e.g. a function) is returned as it is.

  Returns:
    the activation function, or None for "linear".

  Raises:
    ValueError: an unknown activation string.
  """
  if not isinstance(activation_string, str):
    return activation_string
  if not activation_string:
    return None
  act = activation_string.lower()
  table = {"linear": None, "relu": tf.nn.relu, "gelu": gelu, "gelu_erf": gelu_erf,
           "tanh": tf.tanh}
  if act not in table:
    raise ValueError("Unsupported activation: %s (known: %s)" % (act, sorted(table)))
  return table[act]


def create_initializer(initializer_range=0.02):
  """google's weight initializer: truncated normal with stddev `initializer_range`."""
  return tf.truncated_normal_initializer(stddev=initializer_range)


def dense(input_tensor, units, kernel_initializer, activation=None):
  """A dense layer like tf.layers.dense on a matrix.

  Creates `kernel` [in, units] and `bias` [units] (zeros) in the current variable scope, in the
  input's dtype (a float16 custom getter keeps float32 storage).

  Args:
    input_tensor: float [rows, in].
    units: output width.
    kernel_initializer: the kernel's initializer (create_initializer).
    activation: optional function applied to the output.

  Returns:
    [rows, units] in the input's dtype.

  Raises:
    ValueError: input_tensor is not rank 2.
  """
  assert_rank(input_tensor, 2)
  in_width = int(input_tensor.shape[-1])
  kernel = tf.get_variable("kernel", [in_width, units], dtype=input_tensor.dtype,
                           initializer=kernel_initializer)
  bias = tf.get_variable("bias", [units], dtype=input_tensor.dtype,
                         initializer=tf.zeros_initializer())
  output = tf.nn.bias_add(tf.matmul(input_tensor, kernel), bias)
  if activation is not None:
    output = activation(output)
  return output


def dense_in_scope(input_tensor, units, kernel_initializer, scope, activation=None):
  """`dense` under `tf.variable_scope(scope)` (google's `tf.layers.dense(..., name=scope)`)."""
  with tf.variable_scope(scope):
    return dense(input_tensor, units, kernel_initializer, activation)


def layer_norm(input_tensor, name="LayerNorm"):
  """Layer normalization over the last axis, eps 1e-12, computed in float32.

  Creates `<name>/beta` and `<name>/gamma` [width] (float32, zeros / ones) like
  tf.contrib.layers.layer_norm(begin_norm_axis=-1, begin_params_axis=-1).

  Args:
    input_tensor: float [..., width] with a static width.
    name: the variable scope of beta and gamma.

  Returns:
    the normalized tensor, same shape and dtype (a float16 input is normalized in float32 and
    the result cast back to float16).
  """
  dtype = input_tensor.dtype
  x = tf.cast(input_tensor, tf.float32)
  width = int(x.shape[-1])
  with tf.variable_scope(name):
    beta = tf.get_variable("beta", [width], dtype=tf.float32, initializer=tf.zeros_initializer())
    gamma = tf.get_variable("gamma", [width], dtype=tf.float32, initializer=tf.ones_initializer())
    mean, variance = tf.nn.moments(x, [-1], keepdims=True)
    inv = tf.rsqrt(variance + LAYER_NORM_EPSILON) * gamma
    output = x * inv + (beta - mean * inv)
  return tf.cast(output, dtype)


def dropout(input_tensor, dropout_prob, seed=None):
  """Drops each element with probability `dropout_prob`, scaling the rest by 1/(1-p).

  Args:
    input_tensor: float tensor.
    dropout_prob: the probability of dropping; None or 0.0 returns input_tensor itself.
    seed: None (google's stateful tf.nn.dropout) or an int32/int64 tensor [2]: a stateless mask
      that is identical every time the op is recomputed (needed under tf.recompute_grad).

  Returns:
    a tensor of input_tensor's shape and dtype.
  """
  if dropout_prob is None or dropout_prob == 0.0:
    return input_tensor
  if seed is None:
    return tf.nn.dropout(input_tensor, rate=dropout_prob)
  # The control dependency keeps the mask from being computed before its input exists (constant
  # folding of the static shape would otherwise let every layer's mask be drawn at step start and
  # CSE share it between the forward and the recomputation, holding it for the whole step).
  with tf.control_dependencies([input_tensor]):
    uniform = tf.random.stateless_uniform(tf.shape(input_tensor), seed=seed, dtype=tf.float32)
  keep = tf.cast(uniform >= dropout_prob, input_tensor.dtype)
  return input_tensor * keep * tf.cast(1.0 / (1.0 - dropout_prob), input_tensor.dtype)


def layer_norm_and_dropout(input_tensor, dropout_prob, name="LayerNorm", seed=None):
  """layer_norm then dropout (google's embedding post-processing)."""
  return dropout(layer_norm(input_tensor, name), dropout_prob, seed)


def inverse_sqrt(size):
  """1/sqrt(size) as a python float (the attention score scale)."""
  return 1.0 / math.sqrt(float(size))
