"""Extract pre-computed feature vectors from BERT: google-research/bert's extract_features.py
command line on bert_fin's model and tokenizer, streamed over large inputs.

  python extract_features.py --input_file=input.txt --output_file=output.jsonl \\
    --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
    --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8
  python extract_features.py --input_file=input.txt --vectors_file=vectors.npy --pooling=mean \\
    --layers=-1 --init_checkpoint=hf_folder/ ...   (sentence vectors; + vectors.ids.tsv)

input.txt: one example a line, `text_a` or `text_a ||| text_b`. Thin on purpose: flags in
bert_fin/finetune/features/flags.py, the work in bert_fin/finetune/features/extract.py. Flag, model
and input errors print one line and exit with status 2 before any output is written.
"""
from absl import app

from bert_fin import command_line
from bert_fin import console_log
from bert_fin.finetune.features import flags as features_flags

PROGRAM = "extract_features.py"
FLAGS = command_line.define_flags(features_flags, __doc__)


def main(_):
  console_log.configure(FLAGS.verbose)  # before TensorFlow is imported
  with command_line.refusals(PROGRAM):  # flag, model and input errors: one line, exit 2
    settings = features_flags.settings_of(FLAGS)  # before TensorFlow: instant
    from bert_fin.finetune.features import extract  # pylint: disable=g-import-not-at-top
    extract.run(settings)  # paths and input checked before TensorFlow, then streamed


def console_main():
  """Entry point of the bert-fin-extract-features console script."""
  app.run(main, flags_parser=command_line.flags_parser(PROGRAM))


if __name__ == "__main__":
  console_main()
