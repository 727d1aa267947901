"""extract_features' outputs: google's JSON-lines record, sentence vectors, and their writers.

google's record (one JSON line an example, json.dumps' default separators and ASCII escapes):
  {"linex_index": i, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [...]},
   ...one a --layers entry, in --layers order]}, ...one a token of the row, padding left out]}
values: the layer's hidden vector at that token, each float rounded to 6 decimals (Python's
round, as google's script).

Sentence vectors (--vectors_file): float32 [examples, H x len(layers)], one row an example in
input order, each layer's vector (pooled_vectors) concatenated in --layers order; written as .npy
with an ids file beside it (ids_path: `linex_index<TAB>input line` a line).

Every file appears whole or not at all: the writers write temporary files beside the targets and
rename them when the run succeeds (io_utils); rows are written as they come (memory: one batch).
"""
import collections
import contextlib
import json

import numpy as np

from bert_fin import io_utils

IDS_SUFFIX = ".ids.tsv"
VALUE_DECIMALS = 6  # google: round(float(x), 6)


def ids_path(vectors_file):
  """The ids file beside a vectors file: x.npy -> x.ids.tsv."""
  return vectors_file[:-len(".npy")] + IDS_SUFFIX


def json_record(linex_index, tokens, layer_values, layer_indexes):
  """google's JSON line (no newline) of one example.

  tokens: its row's tokens ([CLS] ... [SEP]); layer_values: one float array [>= len(tokens), H]
  a requested layer (the row's outputs), in layer_indexes order.
  """
  features = []
  for position, token in enumerate(tokens):
    layers = []
    for values, index in zip(layer_values, layer_indexes):
      layer = collections.OrderedDict()
      layer["index"] = index
      layer["values"] = [round(float(x), VALUE_DECIMALS) for x in values[position]]
      layers.append(layer)
    feature = collections.OrderedDict()
    feature["token"] = token
    feature["layers"] = layers
    features.append(feature)
  record = collections.OrderedDict()
  record["linex_index"] = linex_index
  record["features"] = features
  return json.dumps(record)


def pooled_vectors(layer_outputs, input_len, pooling):
  """float32 [B, H x len(layer_outputs)]: each layer's sentence vector, concatenated.

  layer_outputs: float [B, S, H] a layer; input_len: int [B] real tokens a row; pooling: "cls"
  (the first token's vector) or "mean" (the mean over positions < input_len).
  """
  input_len = np.asarray(input_len)
  vectors = []
  for output in layer_outputs:
    output = np.asarray(output, np.float32)
    if pooling == "cls":
      vectors.append(output[:, 0, :])
    elif pooling == "mean":
      real = (np.arange(output.shape[1])[None, :] < input_len[:, None]).astype(np.float32)
      vectors.append((output * real[:, :, None]).sum(axis=1)
                     / np.maximum(real.sum(axis=1), 1.0)[:, None])
    else:
      raise ValueError("pooling must be cls or mean, got %r" % pooling)
  return np.concatenate(vectors, axis=1).astype(np.float32)


class Writers(object):
  """The run's output files, written incrementally, renamed into place on success.

    with Writers(output_file, vectors_file, num_examples, vector_size) as writers:
      writers.write(first_index, lines, rows, layer_outputs, vectors)   # per batch, in order
  output_file / vectors_file: None for a file not wanted. On an exception inside the block every
  temporary file is removed and no target is touched. ValueError when fewer or more rows than
  num_examples were written.
  """

  def __init__(self, output_file, vectors_file, num_examples, vector_size, layer_indexes):
    self.output_file, self.vectors_file = output_file, vectors_file
    self.num_examples, self.vector_size = num_examples, vector_size
    self.layer_indexes = layer_indexes
    self.written = 0
    self._stack = None
    self._json = self._ids = self._vectors = None

  def __enter__(self):
    self._stack = contextlib.ExitStack().__enter__()
    try:
      if self.output_file:
        self._json = self._stack.enter_context(io_utils.atomic_output(self.output_file))
      if self.vectors_file:
        self._ids = self._stack.enter_context(io_utils.atomic_output(ids_path(self.vectors_file)))
        temp = self._stack.enter_context(io_utils.atomic_path(self.vectors_file))
        self._vectors = np.lib.format.open_memmap(
            temp, mode="w+", dtype=np.float32, shape=(self.num_examples, self.vector_size))
    except BaseException:
      self._stack.__exit__(None, None, None)
      raise
    return self

  def write(self, first_index, lines, tokens, layer_outputs, vectors):
    """One batch: lines (its input lines), tokens (one list a row), layer_outputs (float
    [B, S, H] a requested layer) and vectors (float32 [B, D] or None), rows first_index..."""
    if first_index != self.written:
      raise ValueError("batch of line %d after %d lines: batches must come in order" % (
          first_index, self.written))
    for row, line in enumerate(lines):
      index = first_index + row
      if self._json is not None:
        self._json.write(json_record(index, tokens[row], [out[row] for out in layer_outputs],
                                     self.layer_indexes) + "\n")
      if self._ids is not None:
        self._ids.write("%d\t%s\n" % (index, line.rstrip("\r\n")))
    if self._vectors is not None:
      self._vectors[first_index:first_index + len(lines)] = vectors
    self.written += len(lines)

  def __exit__(self, exc_type, exc, traceback):
    if self._vectors is not None:
      self._vectors.flush()
      self._vectors = None  # the memmap closes before its file is renamed or removed
    if exc_type is None and self.written != self.num_examples:
      error = ValueError("wrote %d of %d examples" % (self.written, self.num_examples))
      self._stack.__exit__(ValueError, error, None)  # removes the temporary files
      raise error
    self._stack.__exit__(exc_type, exc, traceback)
    return False
