"""extract_features: a checkpoint's encoder layers for every line of a file, streamed.

  run(settings)   settings: flags.Settings (checked by flags.settings_of)

Before anything is written, and before TensorFlow is imported for the input's and paths' checks
(one-line ValueError / inputs.InputError): the output paths (writable, distinct, not the input),
the input file (readable, not empty, UTF-8, at most one ||| a line: inputs' first pass, which also
counts the examples); then the model (encoder.check_model; a transformers folder imported into a
temporary directory for the run, discarded after it). Then the input is read again chunk by
chunk (CHUNK_BATCHES batches of lines at a time), each batch run through the model and written at
once (outputs.Writers): memory holds one chunk, whatever the input's size. A progress bar over
the input's bytes shows rate and ETA (--progress).
"""
import os
import tempfile

from bert_fin import io_utils
from bert_fin import progress
from bert_fin import tokenization
from bert_fin.finetune.features import inputs
from bert_fin.finetune.features import outputs
from bert_fin.interop import init_checkpoint as init_lib

CHUNK_BATCHES = 8  # batches of lines read, tokenized and held at a time


def say(line):
  print("[extract_features] " + line, flush=True)


def check_paths(settings):
  """The input readable, every output writable, none the same file as another or the input."""
  data, vectors_file = settings.data, settings.vectors.vectors_file
  io_utils.check_input_files([data.input_file], "--input_file")
  targets = [(flag, path) for flag, path in (
      ("--output_file", data.output_file), ("--vectors_file", vectors_file),
      ("--vectors_file's ids file", vectors_file and outputs.ids_path(vectors_file))) if path]
  seen = {os.path.abspath(data.input_file): "--input_file"}
  for flag, path in targets:
    if os.path.abspath(path) in seen:
      raise ValueError("%s %s is also %s: give each output its own file" % (
          flag, path, seen[os.path.abspath(path)]))
    seen[os.path.abspath(path)] = flag
    io_utils.check_output_files([path], flag)


def _resolve_model(settings):
  """(init_lib.Resolved or None, checkpoint, config file, vocab file): a transformers folder
  --init_checkpoint imported (staged in a temporary directory, discarded after the run)."""
  model = settings.model
  resolved = init_lib.resolve(model.init_checkpoint, os.path.join(
      tempfile.gettempdir(), "bert_fin_extract_features_import"), model.bert_config_file,
                              model.vocab_file)
  if resolved is None:
    return None, model.init_checkpoint, model.bert_config_file, model.vocab_file
  for line in resolved.lines:
    say(line.replace("(once the run's checks pass)", "(for this run)"))
  return resolved, resolved.checkpoint, resolved.bert_config_file, resolved.vocab_file


def extract(input_file, tokenizer, encoder, writers, settings, counter=None):
  """Reads the input chunk by chunk and writes every batch as it is computed (writers:
  outputs.Writers, entered; encoder: run(rows) -> layer outputs, as encoder.Encoder). counter: a
  progress.ByteProgress counter (None: no progress)."""
  batch_size, max_seq_length = settings.data.batch_size, settings.data.max_seq_length
  pooling = settings.vectors.pooling if settings.vectors.vectors_file else None
  for chunk in inputs.read_chunks(input_file, CHUNK_BATCHES * batch_size):
    rows = inputs.encode(chunk.lines, tokenizer, max_seq_length)
    for start in range(0, len(chunk.lines), batch_size):
      batch = inputs.Rows(rows.tokens[start:start + batch_size],
                          *(array[start:start + batch_size] for array in rows[1:]))
      layer_outputs = encoder.run(batch)
      vectors = (outputs.pooled_vectors(layer_outputs, batch.input_len, pooling)
                 if pooling else None)
      writers.write(chunk.first_index + start, chunk.lines[start:start + batch_size],
                    batch.tokens, layer_outputs, vectors)
    progress.add(counter, chunk.num_bytes)


def run(settings):
  """Checks everything, then writes --output_file and / or --vectors_file (+ ids); returns the
  number of examples."""
  check_paths(settings)
  num_examples = inputs.check_input(settings.data.input_file)
  # TensorFlow only now: a bad input or path was refused in a second
  from bert_fin.finetune.features import encoder as encoder_lib  # pylint: disable=g-import-not-at-top
  resolved, checkpoint, config_file, vocab_file = _resolve_model(settings)
  try:
    config, layers = encoder_lib.check_model(settings, checkpoint, config_file, vocab_file, say)
    tokenizer = tokenization.make_tokenizer(vocab_file, do_lower_case=settings.model.do_lower_case)
    encoder = encoder_lib.Encoder(config, checkpoint, layers, settings.data.max_seq_length)
    try:
      say("%d examples from %s, layers %s, max_seq_length %d" % (
          num_examples, settings.data.input_file, ",".join(map(str, layers)),
          settings.data.max_seq_length))
      vector_size = config.hidden_size * len(layers)
      bar = progress.ByteProgress(os.path.getsize(settings.data.input_file), "extract_features",
                                  settings.vectors.progress)
      with outputs.Writers(settings.data.output_file, settings.vectors.vectors_file,
                           num_examples, vector_size, layers) as writers, bar:
        extract(settings.data.input_file, tokenizer, encoder, writers, settings, bar.counter)
    finally:
      encoder.close()
  finally:
    init_lib.discard(resolved)
  if settings.data.output_file:
    say("wrote %s (google's JSON lines)" % settings.data.output_file)
  if settings.vectors.vectors_file:
    say("wrote %s (float32 [%d, %d], --pooling=%s) and %s" % (
        settings.vectors.vectors_file, num_examples, vector_size, settings.vectors.pooling,
        outputs.ids_path(settings.vectors.vectors_file)))
  return num_examples
