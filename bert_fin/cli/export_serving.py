"""bert-fin-export-serving: a fine-tuned run_classifier or run_ner model -> SavedModel + ONNX.

  bert-fin-export-serving --finetuned_dir=cls_out --bert_config_file=bert_config.json \\
      --vocab_file=vocab.txt --export_dir=serving/cls [--text_pairs]
      [--max_seq_length=128 --do_lower_case=true: needed for a directory that does not record them]

writes the SavedModel (TF Serving, Triton, tf.saved_model.load: raw-text and ids signatures),
model.onnx with the tokenizer files and a Python client for onnxruntime, and the deployment files
(docs/serving.md). A bad input prints one line and exits with status 2 before anything is written;
the export appears whole or not at all (bert_fin/serving/export.py).
"""
import sys

from bert_fin import booleans
from bert_fin import cli
from bert_fin import flag_table
from bert_fin.finetune.classify import flags as classify_flags

PROG = "bert-fin-export-serving"


def build_parser():
  parser = cli.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
  parser.add_argument("--finetuned_dir", required=True,
                      help="run_classifier's --output_dir (its latest checkpoint, labels.txt and "
                           "classifier_config.json) or run_ner's (checkpoint, labels.txt)")
  parser.add_argument("--bert_config_file", required=True, help="the model's bert_config.json")
  parser.add_argument("--vocab_file", required=True, help="the vocab the model was trained with")
  # the fine-tuning's flags (the served sequence length): run_classifier's fields; unset, they
  # are read from classifier_config.json (an older directory that does not record them needs both)
  flag_table.add_arguments(parser, classify_flags.Settings, ("do_lower_case", "max_seq_length"),
                           defaults={"do_lower_case": None, "max_seq_length": None})
  parser.add_argument("--export_dir", required=True,
                      help="directory to create (missing or empty)")
  parser.add_argument("--text_pairs", action="store_true",
                      help="the raw-text signature takes text and text_b (a pair task)")
  parser.add_argument("--onnx", type=booleans.argparse_bool, nargs="?", const=True, default=True,
                      help="also write model.onnx (tf2onnx) for onnxruntime")
  return parser


def main(argv=None):
  args = cli.parse_args(build_parser(), argv)
  from bert_fin.serving import export  # pylint: disable=import-outside-toplevel  (TensorFlow)
  from bert_fin.serving import ner  # pylint: disable=import-outside-toplevel
  request = export.Request(args.finetuned_dir, args.bert_config_file, args.vocab_file,
                           args.do_lower_case, args.max_seq_length, args.export_dir,
                           args.text_pairs, args.onnx)
  kind = ((ner.check, ner.export_tagger, ner.describe) if ner.is_tagger(args.finetuned_dir)
          else (export.check, export.export, export.describe))
  try:
    plan = kind[0](request)
    kind[1](request, plan)
  except (ValueError, OSError) as e:
    return cli.fail(PROG, e)
  print("%s: %s -> %s" % (PROG, kind[2](plan), args.export_dir))
  return 0

if __name__ == "__main__":
  sys.exit(main())
