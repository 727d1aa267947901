"""Manual mixed precision (NVIDIA's TF BERT recipe), for when TF's automatic graph rewrite is not
used: variables are stored in float32, read through a cast into the compute dtype (float16);
layer norm, softmax, the pooler and the losses run in float32.
"""
import tensorflow.compat.v1 as tf

_COMPUTE_TYPES = (tf.float32, tf.float16, tf.bfloat16)


def check_compute_type(compute_type):
  """Checks a model's compute dtype.

  Args:
    compute_type: anything tf.as_dtype takes.

  Returns:
    compute_type as a tf.DType.

  Raises:
    ValueError: anything but float32, float16 or bfloat16.
  """
  dtype = tf.as_dtype(compute_type)
  if dtype not in _COMPUTE_TYPES:
    raise ValueError("compute_type must be one of %s, got %s" % (
        [d.name for d in _COMPUTE_TYPES], dtype.name))
  return dtype


def float32_variable_storage_getter(getter, name, *args, **kwargs):
  """A variable_scope custom getter: a variable requested in a reduced precision is created in
  float32 and returned cast to the requested dtype (the gradient flows to the float32 variable)."""
  requested = kwargs.get("dtype")
  if requested is None or tf.as_dtype(requested) == tf.float32 or not kwargs.get("trainable", True):
    return getter(name, *args, **kwargs)
  kwargs["dtype"] = tf.float32
  variable = getter(name, *args, **kwargs)
  return tf.cast(variable, requested, name=name.split("/")[-1] + "_cast")


def custom_getter(compute_type):
  """The variable_scope custom getter for a model computing in `compute_type`.

  Args:
    compute_type: float32, float16 or bfloat16 (check_compute_type).

  Returns:
    None for float32, else float32_variable_storage_getter.

  Raises:
    ValueError: an unsupported compute_type.
  """
  return None if check_compute_type(compute_type) == tf.float32 else float32_variable_storage_getter
