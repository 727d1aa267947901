"""TFRecord shards of repeated records, shared by the bench scripts that time readers of them.

A bench that reads many megabytes of records need not serialize as many distinct examples: a few
hundred, written over and over in a different order per file, exercise the same reading path.
(Not a bench script itself: the leading underscore keeps it out of tests/test_bench_quick.py and
`make bench`.)
"""
import os


def write_shards(directory, serialized, num_files, records_per_file, stride):
  """Writes num_files TFRecord files directory/part-00000.tfrecord, ... of records_per_file
  records each: record i of file f is serialized[(i * stride + f) % len(serialized)] (bytes of
  serialized tf.train.Examples). Returns the paths, in file order."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  paths = []
  for index in range(num_files):
    path = os.path.join(directory, "part-%05d.tfrecord" % index)
    with tf.io.TFRecordWriter(path) as writer:
      for i in range(records_per_file):
        writer.write(serialized[(i * stride + index) % len(serialized)])
    paths.append(path)
  return paths
