"""run_squad's settings table and flags: the shared fine-tuning table (finetune/settings.py) with
google run_squad.py's own data, mode and task groups.

  data  train_file, predict_file, max_seq_length (384), doc_stride (128), max_query_length (64),
        train_batch_size (32, per worker), predict_batch_size (8): google's names and defaults;
        max_context_chars (bert_fin): the longest context accepted;
  mode  do_train, do_predict (google's); do_eval (bert_fin): the predictions of --predict_file
        scored against its answers, refused before training when it has none (a --do_predict run
        scores a fully answered --predict_file by itself);
  task  n_best_size (20), max_answer_length (30), version_2_with_negative,
        null_score_diff_threshold (0.0), verbose_logging: google's; eval_metric (bert_fin):
        squad | cmrc | auto.
The model, optimizer, output, distribution, execution and tpu groups are run_classifier's (the
same flags: --optimizer, --amp, --use_xla, --horovod, --seed, --num_train_steps, ...). Every flag
is generated from the table (bert_fin/flag_table.py). No TensorFlow here: the flags are checked
before it is imported.
"""
import dataclasses
import typing

from bert_fin import flag_table
from bert_fin.flag_table import option
from bert_fin.finetune import settings as finetune_settings
from bert_fin.finetune.squad import data as squad_data

GOOGLE, BERT_FIN = finetune_settings.GOOGLE, finetune_settings.BERT_FIN
GOOGLE_TITLE = "google-research/bert run_squad.py"
SQUAD, CMRC, AUTO = "squad", "cmrc", "auto"
EVAL_METRICS = (AUTO, SQUAD, CMRC)


@dataclasses.dataclass(frozen=True)
class Data:
  """The SQuAD-schema JSON files, the windows cut from them and the batch sizes."""
  train_file: typing.Optional[str] = option(
      None, "SQuAD json for training. E.g., train-v1.1.json (CMRC 2018 / DRCD files have the "
      "same schema).", origin=GOOGLE)
  predict_file: typing.Optional[str] = option(
      None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json. When every "
      "question has answers, the predictions are also scored (eval_results.txt).", origin=GOOGLE)
  max_seq_length: int = option(
      384, "The maximum total input sequence length after WordPiece tokenization. Sequences "
      "longer than this will be cut into windows, and sequences shorter than this will be "
      "padded.", origin=GOOGLE, at_least=1)
  doc_stride: int = option(
      128, "When splitting up a long document into chunks, how much stride to take between "
      "chunks.", origin=GOOGLE, at_least=1)
  max_query_length: int = option(
      64, "The maximum number of tokens for the question. Questions longer than this will be "
      "truncated to this length.", origin=GOOGLE, at_least=1)
  max_context_chars: int = option(
      squad_data.DEFAULT_MAX_CONTEXT_CHARS, "The longest context (characters) a file may "
      "hold; a longer one is refused before it is tokenized (memory and time grow with it: "
      "split it into paragraphs).",
      origin=BERT_FIN, at_least=1)
  train_batch_size: int = option(
      32, "Batch size for training, per worker (google's total batch size on one worker).",
      origin=GOOGLE, at_least=1)
  predict_batch_size: int = option(
      8, "Total batch size for predictions.", origin=GOOGLE, at_least=1)


@dataclasses.dataclass(frozen=True)
class Mode:
  """What the run does: train, predict, score the predictions."""
  do_train: bool = flag_table.option_of(finetune_settings.Settings, "do_train", GOOGLE)
  do_predict: bool = option(
      False, "Whether to run the model on --predict_file (predictions.json, "
      "nbest_predictions.json, null_odds.json with --version_2_with_negative).", origin=GOOGLE)
  do_eval: bool = option(
      False, "Predict --predict_file and score the predictions against its answers (EM / F1 -> "
      "eval_results.txt); refused before training unless every question there has answers.",
      origin=BERT_FIN)


@dataclasses.dataclass(frozen=True)
class Task:
  """How answers are read off the logits and scored."""
  n_best_size: int = option(
      20, "The total number of n-best predictions to generate in the nbest_predictions.json "
      "output file.", origin=GOOGLE, at_least=1)
  max_answer_length: int = option(
      30, "The maximum length of an answer that can be generated (in WordPiece tokens). This is "
      "needed because the start and end predictions are not conditioned on one another.",
      origin=GOOGLE, at_least=1)
  version_2_with_negative: bool = option(
      False, "If true, the SQuAD examples contain some that do not have an answer.",
      origin=GOOGLE)
  null_score_diff_threshold: float = option(
      0.0, "If null_score - best_non_null is greater than the threshold predict null.",
      origin=GOOGLE)
  verbose_logging: bool = option(
      False, "If true, all of the warnings related to data processing will be printed (answers "
      "whose text cannot be projected back to the context).", origin=GOOGLE)
  eval_metric: str = option(
      AUTO, "How predictions are scored: squad (SQuAD's EM / F1: lower-cased, punctuation and "
      "articles removed, whitespace tokens), cmrc (CMRC 2018's: Chinese characters one by one, "
      "Latin and digit runs as words, punctuation removed, F1 from the longest common "
      "substring), auto (cmrc when the contexts hold Chinese characters, else squad).",
      EVAL_METRICS, origin=BERT_FIN)


@dataclasses.dataclass(frozen=True)
class Settings(finetune_settings.Settings):
  """Every run_squad setting: the shared concerns with run_squad's data, mode and task."""
  data: Data = dataclasses.field(default_factory=Data)
  mode: Mode = dataclasses.field(default_factory=Mode)
  task: Task = dataclasses.field(default_factory=Task)


# every flag of the table on absl's FLAGS (or a fresh FlagValues); --help: google's
# run_squad.py flags, then bert_fin's
define_flags, flag_groups = flag_table.program_flags(Settings,
                                                     finetune_settings.titles(GOOGLE_TITLE))


def settings_of(flag_values):
  """The checked, frozen Settings of parsed flags; ValueError naming the flag (google's
  validate_flags_or_throw and the shared checks)."""
  settings = finetune_settings.from_flags(Settings, flag_values)
  finetune_settings.validate(settings)
  data, mode = settings.data, settings.mode
  if mode.do_train and not data.train_file:
    raise ValueError("If `do_train` is True, then `train_file` must be specified.")
  if (mode.do_predict or mode.do_eval) and not data.predict_file:
    raise ValueError("If `do_predict` (or --do_eval) is True, then `predict_file` must be "
                     "specified.")
  if data.max_seq_length <= data.max_query_length + 3:
    raise ValueError("The max_seq_length (%d) must be greater than max_query_length (%d) + 3" % (
        data.max_seq_length, data.max_query_length))
  return settings
