"""run_ner's settings table and flags: the shared table (finetune/settings.py) plus its `task`
group:

  task_name  auto (default: the format whose files --data_dir holds), chars or cluener
             (data.py);
  labels     the tag list (O, B-X, I-X, ...), in the order of the tagger's rows (default: the
             sorted tags of the training set).
  use_crf    a CRF layer over the units (crf.py).
No --pooling: the tagger reads every token of the last layer. Every flag is generated from the
table (bert_fin/flag_table.py): define_flags, flag_groups and settings_of (the shared checks of
finetune/settings.py, then --task_name one of the formats).
"""
import dataclasses
import typing


from bert_fin import flag_table
from bert_fin.flag_table import option
from bert_fin.finetune import settings as finetune_settings
from bert_fin.finetune.ner import data as ner_data

GOOGLE_TITLE = "google-research/bert run_classifier.py (as run_ner reads them)"


@dataclasses.dataclass(frozen=True)
class Task:
  """What is tagged: the data format, the tags, CRF or softmax."""
  task_name: str = option(
      ner_data.AUTO, "The data format of --data_dir: chars ({train,dev,test}.txt, `char TAG` a "
      "line, a blank line between sentences, BIO or BIOES), cluener ({train,dev,test}.json, "
      "CLUENER2020 JSON lines), or auto (whichever of the two --data_dir holds).",
      origin=finetune_settings.GOOGLE, required=True)
  labels: typing.Optional[typing.List[str]] = option(
      None, "The tag list (O,B-PER,I-PER,...), in the order of the tagger's outputs (default: "
      "the sorted tags of the training set; a training run saves it as labels.txt).",
      origin=finetune_settings.BERT_FIN)
  use_crf: bool = option(
      False, "A linear-chain CRF over the units (transition matrix, Viterbi decoding, in the "
      "graph) instead of a softmax per unit. Saved with the model (ner/transitions): "
      "eval/predict runs use the saved choice.", origin=finetune_settings.BERT_FIN)


@dataclasses.dataclass(frozen=True)
class Settings(finetune_settings.Settings):
  """Every run_ner setting: the shared concerns and settings.task."""
  task: Task = dataclasses.field(default_factory=Task)


# every flag of the table on absl's FLAGS (or a fresh FlagValues); --help: google's
# run_classifier.py flags, then bert_fin's
define_flags, flag_groups = flag_table.program_flags(Settings,
                                                     finetune_settings.titles(GOOGLE_TITLE))


def settings_of(flag_values):
  """The checked, frozen Settings of parsed flags (finetune/settings.py's checks, --task_name
  one of data.FORMATS); ValueError naming the flag."""
  return finetune_settings.checked_settings(Settings, flag_values, ner_data.FORMATS)
