"""run_classifier's settings table and flags: the shared table (finetune/settings.py) plus its
`task` group: --task_name (the data format: jsonl, tsv, or google's cola, mnli, mrpc, xnli),
--labels (the label list, the order of test_results.tsv's columns), --multi_label (label sets),
--entity_markers (marked entities read beside [CLS]) and --pooling (the text vector the
classifier reads), and its `documents` group: how texts longer than --max_seq_length are read
(--long_text, --head_tokens, --doc_stride, --chunk_pooling; long_text.py). Every flag is
generated from the table (bert_fin/flag_table.py): define_flags, flag_groups and settings_of
(the shared checks of finetune/settings.py, --task_name one of the formats, then the documents
checks).
"""
import dataclasses
import typing


from bert_fin import flag_table
from bert_fin.flag_table import option
from bert_fin.finetune import settings as finetune_settings
from bert_fin.finetune.classify import long_text as long_text_lib
from bert_fin.finetune.classify import tasks

GOOGLE_TITLE = "google-research/bert run_classifier.py"


@dataclasses.dataclass(frozen=True)
class Task:
  """What is classified: the data format, the labels, the text vector read."""
  task_name: typing.Optional[str] = option(
      None, "The data format of --data_dir: jsonl or tsv ({train,dev,test}.jsonl / .tsv), or "
      "google's task %s (google's files and columns)." % ", ".join(
          tasks.FORMATS[len(tasks.OWN_FORMATS):]), origin=finetune_settings.GOOGLE,
      required=True)
  labels: typing.Optional[typing.List[str]] = option(
      None, "The label list, in the order of test_results.tsv's columns (default: the sorted "
      "labels of the training set).", origin=finetune_settings.BERT_FIN)
  multi_label: bool = option(
      False, "Each example carries a set of labels (its label: names separated by spaces): one "
      "sigmoid a label, binary cross-entropy, thresholds chosen on dev (multi_label.json); "
      "eval_results.txt has micro-, macro- and example-F1, test_results.tsv one probability a "
      "label.", origin=finetune_settings.BERT_FIN)
  entity_markers: int = option(
      0, "K > 0: the texts mark K named entities with the reserved [unused1]..[unused4] tokens "
      "(entity_markers.py) and the classifier reads the last layer's state at each entity's "
      "start marker beside [CLS] (relation and entity-level tasks; K at most 2); 0: off.",
      origin=finetune_settings.BERT_FIN, at_least=0)
  pooling: str = option(
      "first", "The text vector the classifier reads: first = google's pooled [CLS]; mean / max "
      "= over the real tokens of the last layer, then the same pooler dense + tanh (UER-py's "
      "--pooling). Saved with the model; eval/predict runs use the saved one.",
      ("first", "mean", "max"), origin=finetune_settings.BERT_FIN)


@dataclasses.dataclass(frozen=True)
class Documents:
  """Texts longer than --max_seq_length: which tokens the classifier reads (long_text.py)."""
  long_text: str = option(
      long_text_lib.HEAD, "How a text longer than --max_seq_length is read: head = its first "
      "tokens (google's); tail = its last; head_tail = its first --head_tokens and its last (Sun et al. "
      "2019); chunks = windows every --doc_stride tokens, each trained with the text's label, a "
      "text predicted from its windows' pooled logits (--chunk_pooling; single texts only). "
      "Every run says how many examples were longer. Saved with the model: eval/predict runs "
      "use the saved one unless the flag is given.", long_text_lib.MODES,
      origin=finetune_settings.BERT_FIN)
  head_tokens: typing.Optional[int] = option(
      None, "head_tail: tokens taken from the head at --max_seq_length (the rest from the tail; "
      "a pair's side keeps the same share of its own). Default: 128/510 of max_seq_length - 2 "
      "(Sun et al.'s 128 + 382 at 512).", origin=finetune_settings.BERT_FIN)
  doc_stride: typing.Optional[int] = option(
      None, "chunks: tokens between the starts of a text's windows (each window holds "
      "max_seq_length - 2 tokens). Default: half of that.", origin=finetune_settings.BERT_FIN)
  chunk_pooling: str = option(
      long_text_lib.MEAN, "chunks: a text's logits from its windows' logits: mean or max (element-"
      "wise).", long_text_lib.CHUNK_POOLINGS, origin=finetune_settings.BERT_FIN)


def options_of(documents, mode=None):
  """long_text_lib.Options of the `documents` settings (mode: another --long_text, e.g. a saved
  model's)."""
  return long_text_lib.Options(mode or documents.long_text, documents.head_tokens,
                           documents.doc_stride, documents.chunk_pooling)


def check_documents(settings):
  """ValueError naming the flag: --head_tokens / --doc_stride out of range for
  --max_seq_length."""
  documents, cap = settings.documents, long_text_lib.capacity(settings.data.max_seq_length)
  if documents.head_tokens is not None and not 0 <= documents.head_tokens <= cap:
    raise ValueError("--head_tokens must be in [0, %d] (max_seq_length - 2), got %d" % (
        cap, documents.head_tokens))
  if documents.doc_stride is not None and not 1 <= documents.doc_stride <= cap:
    raise ValueError("--doc_stride must be in [1, %d] (a window: max_seq_length - 2 tokens; a "
                     "larger stride would skip text), got %d" % (cap, documents.doc_stride))


@dataclasses.dataclass(frozen=True)
class Settings(finetune_settings.Settings):
  """Every run_classifier setting: the shared concerns, settings.task and settings.documents."""
  task: Task = dataclasses.field(default_factory=Task)
  documents: Documents = dataclasses.field(default_factory=Documents)


# every flag of the table on absl's FLAGS (or a fresh FlagValues); --help: google's
# run_classifier.py flags, then bert_fin's
define_flags, flag_groups = flag_table.program_flags(Settings,
                                                     finetune_settings.titles(GOOGLE_TITLE))


def settings_of(flag_values):
  """The checked, frozen Settings of parsed flags (finetune/settings.py's checks, then
  check_documents)."""
  settings = finetune_settings.checked_settings(Settings, flag_values, tasks.FORMATS)
  check_documents(settings)
  return settings
