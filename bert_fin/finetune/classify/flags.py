"""run_classifier's settings table and flags: the shared table (finetune/settings.py) plus its
`task` group: --task_name (the data format: jsonl, tsv, or google's cola, mnli, mrpc, xnli),
--labels (the label list, the order of test_results.tsv's columns) and --pooling (the text vector
the classifier reads). Every flag is generated from the table (bert_fin/flag_table.py);
define_flags, flag_groups and settings_of are finetune/settings.py ProgramFlags' of this table.
"""
import dataclasses
import typing

from bert_fin import flag_table
from bert_fin.flag_table import option
from bert_fin.finetune import settings as finetune_settings
from bert_fin.finetune.classify import tasks

GOOGLE_TITLE = "google-research/bert run_classifier.py"


@dataclasses.dataclass(frozen=True)
class Task:
  """What is classified: the data format, the labels, the text vector read."""
  task_name: typing.Optional[str] = option(
      None, "The data format of --data_dir: jsonl or tsv ({train,dev,test}.jsonl / .tsv), or "
      "google's task %s (google's files and columns)." % ", ".join(
          tasks.FORMATS[len(tasks.OWN_FORMATS):]), origin=finetune_settings.GOOGLE)
  labels: typing.Optional[typing.List[str]] = option(
      None, "The label list, in the order of test_results.tsv's columns (default: the sorted "
      "labels of the training set).", origin=finetune_settings.BERT_FIN)
  pooling: str = option(
      "first", "The text vector the classifier reads: first = google's pooled [CLS]; mean / max "
      "= over the real tokens of the last layer, then the same pooler dense + tanh (UER-py's "
      "--pooling). Saved with the model; eval/predict runs use the saved one.",
      ("first", "mean", "max"), origin=finetune_settings.BERT_FIN)


@dataclasses.dataclass(frozen=True)
class Settings(finetune_settings.Settings):
  """Every run_classifier setting: the shared concerns and settings.task."""
  task: Task = dataclasses.field(default_factory=Task)


PROGRAM_FLAGS = finetune_settings.ProgramFlags(Settings, GOOGLE_TITLE, tasks.FORMATS)
# what bert_fin/finetune/program.py calls (and the tests, bench/)
define_flags = PROGRAM_FLAGS.define_flags  # pylint: disable=invalid-name
flag_groups = PROGRAM_FLAGS.flag_groups  # pylint: disable=invalid-name
settings_of = PROGRAM_FLAGS.settings_of  # pylint: disable=invalid-name
