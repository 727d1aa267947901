"""TFRecords -> batches for the Estimator (tf.data or NVIDIA DALI)."""
