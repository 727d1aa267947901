# coding=utf-8
"""Creates masked-LM (+ next-sentence) TFRecords for run_pretraining.py.

google-research/bert's flags with the same defaults, plus bert_fin's (sharding, whole-word masking
with jieba/rjieba and a user dictionary, RoBERTa objective, multiprocess fast mode, faithful mode).
This file only maps flags to bert_fin.data.pipeline.Options; see that module for the contract.
"""
import logging

from absl import app
from absl import flags

from bert_fin.data import pipeline

FLAGS = flags.FLAGS

# google-research/bert's flags (same names, same defaults).
flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated list of files / "
                    "globs): google's text format or the corpus tool's JSON Lines.")
flags.DEFINE_string("output_file", None, "Output TF example file (or comma-separated list of "
                    "files); with --num_output_files N > 1 the prefix of N shards.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
flags.DEFINE_bool("do_whole_word_mask", False, "Whether to use whole word masking rather than "
                  "per-WordPiece masking (fast mode: jieba words + ## pieces; faithful: ## only).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per "
                     "sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with "
                     "different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences which are shorter "
                   "than the maximum length.")

# bert_fin's flags.
flags.DEFINE_enum("input_format", "auto", ["auto", "jsonl", "text"], "Input format; auto: "
                  "*.jsonl/*.json are JSON Lines, anything else google's text format.")
flags.DEFINE_integer("num_output_files", 1, "Write N shards prefix-0000i-of-0000N.tfrecord "
                     "(training requires N % workers == 0).")
flags.DEFINE_bool("write_input_mask", False, "Also write google's input_mask feature so google's "
                  "run_pretraining.py can read the records.")
flags.DEFINE_enum("objective", "bert", ["bert", "roberta"], "bert: google's NSP pairs; roberta: "
                  "contiguous full sentences, no NSP.")
flags.DEFINE_enum("segmenter", "rjieba", ["jieba", "rjieba"], "Chinese word segmenter for whole "
                  "word masking (rjieba falls back to jieba if it cannot honour --user_dict).")
flags.DEFINE_string("user_dict", None, "jieba-format user dictionary: words masked whole.")
flags.DEFINE_integer("num_workers", 0, "Worker processes for the fast mode (0 = all cores).")
flags.DEFINE_bool("faithful", False, "google's exact algorithm and RNG order, single process, all "
                  "in memory: records identical to google's create_pretraining_data.py.")
flags.DEFINE_integer("shuffle_window", 20000, "Fast mode: instances held for the bounded shuffle.")
flags.DEFINE_integer("block_docs", 256, "Fast mode: documents per work unit (random next "
                     "sentences are drawn from the same block).")
flags.DEFINE_bool("fast_tokenizer", True, "Fast mode: use the HF-backed tokenizer.")
flags.DEFINE_enum("kernel", "auto", ["auto", "c", "python"], "Fast mode, objective bert: make "
                  "the records in the compiled C kernel (c), in pure Python (python, ~10x slower, "
                  "same bytes), or C when it was built (auto).")
flags.DEFINE_bool("progress", True, "Show a tqdm progress bar.")


def options_from_flags():
  """Options from the parsed absl flags (every Options field is a flag of the same name)."""
  return pipeline.make_options(**{name: FLAGS[name].value for name in pipeline.Options._fields})


def main(_):
  logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
  try:
    pipeline.run(options_from_flags())
  except (ValueError, FileNotFoundError, RuntimeError) as e:
    raise SystemExit("create_pretraining_data: error: %s" % e) from e


def console_main():
  flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])
  app.run(main)


if __name__ == "__main__":
  console_main()
