"""The file names of a transformers model folder, and the cheap test for one (no TensorFlow, no
PyTorch: the programs call it while validating their flags)."""
import os

CONFIG_FILE = "config.json"
SAFETENSORS, SAFETENSORS_INDEX = "model.safetensors", "model.safetensors.index.json"
TORCH_BIN, TORCH_BIN_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"
WEIGHT_FILES = (SAFETENSORS, SAFETENSORS_INDEX, TORCH_BIN, TORCH_BIN_INDEX)  # the order read
VOCAB_FILE, TOKENIZER_FILE = "vocab.txt", "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
TF_CHECKPOINT_STATE = "checkpoint"  # what makes a directory a TensorFlow checkpoint directory


def is_transformers_folder(path):
  """True for a directory holding config.json or transformers' weight files and no TensorFlow
  checkpoint state file (the import's own checks, hf_folder.read_folder, say what else is wrong
  with it: a missing config.json, say)."""
  return (bool(path) and os.path.isdir(path)
          and any(os.path.lexists(os.path.join(path, name))  # a FIFO too: the import refuses it
                  for name in (CONFIG_FILE,) + WEIGHT_FILES)
          and not os.path.isfile(os.path.join(path, TF_CHECKPOINT_STATE)))
