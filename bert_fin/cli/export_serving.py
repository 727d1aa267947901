"""bert-fin-export-serving: a fine-tuned model (or a pretrained encoder) -> SavedModel + ONNX.

  bert-fin-export-serving --finetuned_dir=cls_out --bert_config_file=bert_config.json \\
      --vocab_file=vocab.txt --export_dir=serving/cls [--text_pairs]
      [--max_seq_length=128 --do_lower_case=true: needed for a directory that does not record them]
  bert-fin-export-serving --finetuned_dir=ner_out ... --max_seq_length=128 --do_lower_case=true
  bert-fin-export-serving --kind=features --init_checkpoint=model.ckpt --layers=-1,-2 ...
  bert-fin-export-serving --kind=squad --finetuned_dir=squad_out --max_seq_length=384 \\
      --doc_stride=128 --max_query_length=64 ...   (run_squad's flags, as fine-tuned)

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
from bert_fin.finetune.squad import flags as squad_flags

PROG = "bert-fin-export-serving"
KINDS = ("classifier", "features", "squad")  # export.KINDS (this module imports no TensorFlow)
QA_FLAGS = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length",
            "version_2_with_negative", "null_score_diff_threshold")  # question_answering.Options


def build_parser():
  parser = cli.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
  parser.add_argument("--kind", choices=KINDS, default=KINDS[0],
                      help="classifier: a run_classifier or run_ner --output_dir (which one is "
                           "read from its checkpoint); features: a pretrained checkpoint served "
                           "as extract_features (--init_checkpoint, --layers); squad: a run_squad "
                           "--output_dir")
  parser.add_argument("--finetuned_dir",
                      help="run_classifier's --output_dir (its latest checkpoint, labels.txt and "
                           "classifier_config.json), run_ner's (checkpoint, labels.txt) or, "
                           "--kind=squad, run_squad's")
  parser.add_argument("--init_checkpoint",
                      help="--kind=features: the pretrained checkpoint (a prefix or a directory)")
  parser.add_argument("--layers", default="-1",
                      help="--kind=features: the encoder layers served, comma-separated (-1: the "
                           "last), as extract_features' --layers")
  parser.add_argument("--bert_config_file", default=None,
                      help="the model's bert_config.json; default: the %s in --finetuned_dir "
                           "(a run_distill --output_dir holds it) or beside --init_checkpoint"
                           % cli.CONFIG_NAME)
  parser.add_argument("--vocab_file", default=None,
                      help="the vocab the model was trained with; default: the %s in "
                           "--finetuned_dir or beside --init_checkpoint" % cli.VOCAB_NAME)
  # the fine-tuning's flags (the served sequence length): run_classifier's fields; unset, they
  # are read from classifier_config.json (an older directory or run_ner's needs both) or, for
  # features and squad, are extract_features' / run_squad's defaults
  flag_table.add_arguments(parser, classify_flags.Settings, ("do_lower_case", "max_seq_length"),
                           defaults={"do_lower_case": None, "max_seq_length": None})
  qa = parser.add_argument_group("--kind=squad: run_squad's flags of the fine-tuning (the "
                                 "served windows and span choice use them)")
  flag_table.add_arguments(qa, squad_flags.Settings, QA_FLAGS,  # unset: run_squad's default
                           defaults=dict.fromkeys(QA_FLAGS))
  parser.add_argument("--export_dir", required=True,
                      help="directory to create (missing or empty)")
  parser.add_argument("--text_pairs", action="store_true",
                      help="the raw-text signature takes text and text_b (a pair task)")
  parser.add_argument("--onnx", type=booleans.argparse_bool, nargs="?", const=True, default=True,
                      help="also write model.onnx (tf2onnx) for onnxruntime")
  return parser


def _qa_options(args):
  """question_answering.Options of the flags (run_squad's defaults for those not given);
  ValueError naming a flag outside run_squad's bounds for it."""
  from bert_fin.serving import question_answering  # pylint: disable=import-outside-toplevel
  flag_table.check_arguments(squad_flags.Settings, args, QA_FLAGS)
  given = {name: getattr(args, name) for name in QA_FLAGS if getattr(args, name) is not None}
  defaults = question_answering.default_options()
  return defaults._replace(**{field: given[name] for field, name in zip(defaults._fields, QA_FLAGS)
                              if name in given})


def main(argv=None):
  args = cli.parse_args(build_parser(), argv)
  source = args.init_checkpoint if args.kind == "features" else args.finetuned_dir
  if not source:
    return cli.fail(PROG, ValueError("--kind=%s needs %s" % (
        args.kind, "--init_checkpoint" if args.kind == "features" else "--finetuned_dir")))
  from bert_fin.serving import export  # pylint: disable=import-outside-toplevel  (TensorFlow)
  from bert_fin.serving import ner  # pylint: disable=import-outside-toplevel
  try:
    cli.model_files(args, source, "--init_checkpoint" if args.kind == "features" else
                    "--finetuned_dir")
    request = export.Request(source, args.bert_config_file, args.vocab_file,
                             args.do_lower_case, args.max_seq_length, args.export_dir,
                             args.text_pairs, args.onnx, args.kind, args.layers,
                             _qa_options(args) if args.kind == "squad" else None)
    tagger = args.kind == export.CLASSIFIER and ner.is_tagger(source)
    kind = ((ner.check, ner.export_tagger, ner.describe) if tagger
            else (export.check, export.export, export.describe))
    plan = kind[0](request)
    kind[1](request, plan)
  except (ValueError, OSError) as e:
    return cli.fail(PROG, e)
  print("%s: %s -> %s" % (PROG, kind[2](plan), args.export_dir))
  return 0

if __name__ == "__main__":
  sys.exit(main())
