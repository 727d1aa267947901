"""bert-fin-import-hf: a transformers BERT folder -> a google-named checkpoint for bert_fin.

  bert-fin-import-hf --hf_dir=bert-base-chinese --output_dir=base_ckpt

writes base_ckpt/model.ckpt (google's variable names: --init_checkpoint of run_pretraining,
run_classifier, run_ner and google's own code), base_ckpt/bert_config.json and base_ckpt/vocab.txt,
and prints what it found: the heads, the vocab size, the stored dtype, the GELU used, and the
google variables it could not fill. Reads model.safetensors (also sharded) and pytorch_model.bin
(without PyTorch: only tensors are rebuilt from the pickle). A folder that cannot be imported
exactly prints one line and exits with status 2, writing nothing (bert_fin/interop/). Every file
of the folder is read as untrusted input, within what its config.json justifies; a model larger
than --max_parameters or --max_layers is refused before anything else is read (raise them for a
bigger model: memory is then a small multiple of its float32 size).
"""
import sys

from bert_fin import cli
from bert_fin.interop import hf_config

PROG = "bert-fin-import-hf"


def _positive(text):
  value = int(text)
  if value < 1:
    raise ValueError(text)
  return value


def build_parser():
  ceilings = hf_config.DEFAULT_CEILINGS
  parser = cli.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
  parser.add_argument("--hf_dir", required=True,
                      help="transformers folder: config.json, model.safetensors (or "
                           "pytorch_model.bin, or sharded with an index.json), vocab.txt")
  parser.add_argument("--output_dir", required=True, help="folder to write (new or empty)")
  parser.add_argument("--max_parameters", type=_positive, default=ceilings.max_parameters,
                      help="largest model accepted, in parameters (what config.json's sizes "
                           "imply, with the pretraining heads)")
  parser.add_argument("--max_layers", type=_positive, default=ceilings.max_layers,
                      help="largest num_hidden_layers accepted")
  return parser


def main(argv=None):
  args = cli.parse_args(build_parser(), argv)
  from bert_fin.interop import hf_import  # pylint: disable=g-import-not-at-top  (TensorFlow later)
  try:
    imported = hf_import.import_folder(
        args.hf_dir, args.output_dir,
        ceilings=hf_config.Ceilings(args.max_parameters, args.max_layers))
  except (ValueError, OSError) as e:
    return cli.fail(PROG, e)
  for line in hf_import.describe(imported):
    print("%s: %s" % (PROG, line))
  print("%s: wrote %s, %s, %s" % (PROG, imported.checkpoint, imported.config_file,
                                   imported.vocab_file))
  return 0


if __name__ == "__main__":
  sys.exit(main())
