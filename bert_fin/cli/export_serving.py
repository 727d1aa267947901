"""bert-fin-export-serving: a fine-tuned run_classifier model -> SavedModel + ONNX for serving.

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

PROG = "bert-fin-export-serving"


def build_parser():
  parser = cli.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
  parser.add_argument("--finetuned_dir", required=True,
                      help="run_classifier's --output_dir: its latest checkpoint, labels.txt and "
                           "classifier_config.json")
  parser.add_argument("--bert_config_file", required=True, help="the model's bert_config.json")
  parser.add_argument("--vocab_file", required=True, help="the vocab the model was trained with")
  parser.add_argument("--do_lower_case", type=booleans.argparse_bool, nargs="?", const=True,
                      default=None, help="the fine-tuning's (google's flag); default: as "
                                         "classifier_config.json records it")
  parser.add_argument("--max_seq_length", type=int, default=None,
                      help="the fine-tuning's --max_seq_length: the served sequence length; "
                           "default: as classifier_config.json records it")
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
  request = export.Request(args.finetuned_dir, args.bert_config_file, args.vocab_file,
                           args.do_lower_case, args.max_seq_length, args.export_dir,
                           args.text_pairs, args.onnx)
  try:
    plan = export.check(request)
    export.export(request, plan)
  except (ValueError, OSError) as e:
    return cli.fail(PROG, e)
  spec = plan.spec
  print("%s: %s (%d labels: %s; --pooling=%s, --long_text=%s, seq %d) -> %s" % (
      PROG, plan.checkpoint, len(spec.labels), ",".join(spec.labels), spec.pooling,
      spec.long_text.mode, spec.seq_length, args.export_dir))
  return 0


if __name__ == "__main__":
  sys.exit(main())
