"""create_pretraining_data's options: one typed table, the source of the absl flags and their defaults.

`Options` is a frozen dataclass; each field's default, type, help text and choices are stated here
once. create_pretraining_data.py defines one absl flag per field from it (`define_flags`, by
bert_fin/flag_table.py, shared with run_pretraining), with the same name, default and help;
library callers (bench, tests) build `make_options(**overrides)`.
The first block is google-research/bert's flags with google's names and defaults; the rest are
bert_fin's. `validate_options` checks a combination before anything is read or written.
"""
import dataclasses
import typing

from bert_fin import flag_table
from bert_fin.flag_table import option
from bert_fin import objectives
from bert_fin.data.kernel import dispatch as kernel_dispatch
from bert_fin.text import corpus_format
from bert_fin.text import segment


MASKINGS = ("static", "dynamic")
DYNAMIC_DUPE_FACTOR = 1  # --masking=dynamic without --dupe_factor: each document paired once


@dataclasses.dataclass(frozen=True)
class Options:
  """Every option of create_pretraining_data (see each field's help)."""
  # google-research/bert's flags (same names, same defaults).
  input_file: typing.Optional[str] = option(
      None, "Input raw text file (or comma-separated list of files / globs): google's text "
      "format or the corpus tool's JSON Lines.", required=True)
  output_file: typing.Optional[str] = option(
      None, "Output TF example file (or comma-separated list of files); with --num_output_files "
      "N > 1 the prefix of N shards.", required=True)
  vocab_file: typing.Optional[str] = option(
      None, "The vocabulary file that the BERT model was trained on.", required=True)
  do_lower_case: bool = option(True, "Whether to lower case the input text.")
  do_whole_word_mask: bool = option(
      False, "Whether to use whole word masking rather than per-WordPiece masking (fast mode: "
      "jieba words + ## pieces; faithful: ## only).")
  max_seq_length: int = option(128, "Maximum sequence length.")
  max_predictions_per_seq: int = option(
      20, "Maximum number of masked LM predictions per sequence.")
  random_seed: int = option(12345, "Random seed for data generation.")
  dupe_factor: int = option(
      10, "Number of times to duplicate the input data (with different masks). With "
      "--masking=dynamic: the number of different pairings written (default 1 there).",
      at_least=1)
  masked_lm_prob: float = option(0.15, "Masked LM probability.", above=0, below=1)
  short_seq_prob: float = option(
      0.1, "Probability of creating sequences which are shorter than the maximum length.",
      at_least=0, at_most=1)
  # bert_fin's options.
  input_format: str = option(
      "auto", "Input format; " + corpus_format.AUTO_HELP + ".", corpus_format.INPUT_FORMATS)
  num_output_files: int = option(
      1, "Write N shards prefix-0000i-of-0000N.tfrecord (training requires N % workers == 0).")
  write_input_mask: bool = option(
      False, "Also write google's input_mask feature so google's run_pretraining.py can read the "
      "records.")
  objective: str = option(
      "bert", "bert: google's NSP pairs; roberta: contiguous full sentences, no NSP.",
      objectives.OBJECTIVES)
  masking: str = option(
      "static", "static: google's records, masks drawn here dupe_factor times; dynamic: each "
      "sequence written once, unmasked, with its word boundaries (word_starts), masks drawn "
      "anew every epoch while training.", MASKINGS)
  segmenter: str = option(
      "rjieba", "Chinese word segmenter for whole word masking (rjieba falls back to jieba if it "
      "cannot honour --user_dict).", segment.SEGMENTERS)
  user_dict: typing.Optional[str] = option(
      None, "jieba-format user dictionary: words masked whole.")
  num_workers: int = option(
      0, "Worker processes for the fast mode (0 = all cores; under mpirun: per rank).")
  faithful: bool = option(
      False, "google's exact algorithm and RNG order, single process, all in memory: records "
      "identical to google's create_pretraining_data.py.")
  shuffle_window: int = option(20000, "Fast mode: instances held for the bounded shuffle.",
                               at_least=1)
  block_docs: int = option(
      256, "Fast mode: documents per work unit (random next sentences are drawn from the same "
      "block).", at_least=1)
  fast_tokenizer: bool = option(True, "Fast mode: use the HF-backed tokenizer.")
  kernel: str = option(
      "auto", "Fast mode: make the records in the compiled C kernel (c), in the pure-Python "
      "reference path (python, ~15-20x slower per instance, same bytes), or C when it was built "
      "(auto).", kernel_dispatch.KERNELS)
  progress: bool = option(True, "Show a tqdm progress bar.")


FIELDS = dataclasses.fields(Options)
NAMES = tuple(field.name for field in FIELDS)


def make_options(**overrides):
  """Options with google's defaults plus ours; unknown names are a TypeError. With
  masking="dynamic" and no dupe_factor given, dupe_factor is DYNAMIC_DUPE_FACTOR (the masks are
  drawn every epoch; more copies would only repeat the pairing)."""
  unknown = set(overrides) - set(NAMES)
  if unknown:
    raise TypeError("unknown options: %s" % sorted(unknown))
  if overrides.get("masking") == "dynamic" and "dupe_factor" not in overrides:
    overrides = dict(overrides, dupe_factor=DYNAMIC_DUPE_FACTOR)
  return Options(**overrides)


def as_dict(options):
  """{name: value} in field order."""
  return dataclasses.asdict(options)


def validate_options(options):
  """Raises ValueError with a clear message for an unusable flag combination."""
  flag_table.check_fields(options)  # the required flags, the choices, the bounds: on the fields
  minimum = 5 if options.objective == "bert" else 4  # room for a short target of 2 tokens
  if options.max_seq_length < minimum:
    raise ValueError("--max_seq_length must be >= %d for objective %s"
                     % (minimum, options.objective))
  if options.faithful and options.objective != "bert":
    raise ValueError("--faithful reproduces google's NSP algorithm; use --objective bert")
  if options.masking == "dynamic" and options.faithful:
    raise ValueError("--faithful reproduces google's records, masks included; --masking=dynamic "
                     "leaves the masks to training: use one or the other")
  if options.masking == "dynamic" and options.write_input_mask:
    raise ValueError("--write_input_mask is for google's run_pretraining.py, which cannot read "
                     "--masking=dynamic records (no masked_lm_* features): drop one of the two")
