"""bert-fin-export-hf: a bert_fin / google-research/bert checkpoint -> a transformers folder.

  bert-fin-export-hf --bert_config_file=bert_config.json --init_checkpoint=out/model.ckpt-1000 \\
      --vocab_file=vocab.txt --output_dir=hf_model [--do_lower_case=true]
  (--bert_config_file, --vocab_file: default the bert_config.json, vocab.txt beside the checkpoint)

then `BertForPreTraining.from_pretrained("hf_model")` (BertForMaskedLM for --objective roberta
checkpoints, BertForSequenceClassification for a run_classifier output, with its labels,
BertForTokenClassification for a run_ner output, with its tags, BertForQuestionAnswering for a
run_squad output) and
`BertTokenizerFast.from_pretrained("hf_model")`. A bad input prints one line and
exits with status 2 before anything is written (bert_fin/export/hf.py).
"""
import logging
import sys

from bert_fin import cli
from bert_fin import flag_table
from bert_fin.finetune import settings as finetune_settings
from bert_fin.interop import hf_names

PROG = "bert-fin-export-hf"


def build_parser():
  parser = cli.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
  parser.add_argument("--bert_config_file", default=None,
                      help="google-format bert_config.json; default: the %s beside "
                           "--init_checkpoint (google's release layout, a run_distill "
                           "--output_dir)" % cli.CONFIG_NAME)
  parser.add_argument("--init_checkpoint", required=True,
                      help="checkpoint prefix (out/model.ckpt-1000) or a directory (its latest)")
  parser.add_argument("--vocab_file", default=None,
                      help="the vocab the model was trained with; default: the %s beside "
                           "--init_checkpoint" % cli.VOCAB_NAME)
  parser.add_argument("--output_dir", required=True, help="folder to write (created)")
  flag_table.add_arguments(parser, finetune_settings.Settings, ("do_lower_case",))
  parser.add_argument("--architecture", choices=hf_names.ARCHITECTURES, default=None,
                      help="default: BertForSequenceClassification for a run_classifier "
                           "output, BertForTokenClassification for a run_ner output, "
                           "BertForQuestionAnswering for a run_squad output, "
                           "BertForPreTraining if the checkpoint has the NSP head, else "
                           "BertForMaskedLM")
  return parser


def main(argv=None):
  args = cli.parse_args(build_parser(), argv)
  logging.basicConfig(level=logging.WARNING, format=PROG + ": %(levelname)s: %(message)s")
  from bert_fin.export import hf  # pylint: disable=g-import-not-at-top  (TensorFlow: slow import)
  try:
    cli.model_files(args, args.init_checkpoint, "--init_checkpoint")
    result = hf.export(args.bert_config_file, args.init_checkpoint, args.vocab_file,
                       args.output_dir, do_lower_case=args.do_lower_case,
                       architecture=args.architecture)
  except (ValueError, OSError) as e:  # hf.ExportError is a ValueError
    return cli.fail(PROG, e)
  print("%s: %s from %s (global_step %s): %d tensors, %d parameters -> %s" % (
      PROG, result.architecture, result.checkpoint, result.global_step, len(result.tensors),
      result.parameters, result.output_dir))
  if result.labels:
    print("%s: id2label %s (from %s)" % (PROG, dict(enumerate(result.labels)), "labels.txt"))
  if result.left_out:
    print("%s: left out (%s has no place for them): %s" % (
        PROG, result.architecture, ", ".join(result.left_out)))
  print("%s: wrote %s" % (PROG, ", ".join(sorted(p.rsplit("/", 1)[-1] for p in result.files))))
  return 0


if __name__ == "__main__":
  sys.exit(main())
