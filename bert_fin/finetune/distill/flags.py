"""run_distill's settings table and flags: run_classifier's table (classify/flags.py: the data,
the optimizer, the output, ...) plus its `distill` group: the teacher (--teacher_dir;
--ensemble_dirs: more teachers whose soft targets are averaged with its), the student
(--student_layers taken from the teacher's encoder by --layer_selection or --layer_map,
or --student_config with --student_init) and the losses (--temperature, --alpha; TinyBERT's
--hidden_weight and --attention_weight). Every flag is generated from the table
(bert_fin/flag_table.py).

--bert_config_file is the teacher's config (the one it was fine-tuned with), --vocab_file the
vocab both read. --task_name and --data_dir as run_classifier's, or run_ner's (auto, chars,
cluener) for a run_ner teacher; the labels, --pooling, --multi_label and the long-text flags are
the teacher's (its labels.txt and classifier_config.json), and a tagger's tags and CRF are too.
"""
import dataclasses
import typing


from bert_fin import flag_table
from bert_fin.flag_table import option
from bert_fin.finetune import settings as finetune_settings
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.classify import tasks
from bert_fin.finetune.ner import data as ner_data

SKIP, BOTTOM = "skip", "bottom"
LAYER_SELECTIONS = (SKIP, BOTTOM)


@dataclasses.dataclass(frozen=True)
class Distill:
  """The teacher, the student and the distillation losses."""
  teacher_dir: typing.Optional[str] = option(
      None, "The teacher: a run_classifier --output_dir with a trained classifier head "
      "(single-label, or --multi_label: the student is one too), or a run_ner --output_dir "
      "(its emission scores are distilled; the student keeps its CRF). Its labels.txt and "
      "classifier_config.json (pooling, long texts, multi-label) are the student's.",
      origin=finetune_settings.BERT_FIN, required=True)
  ensemble_dirs: typing.Optional[typing.List[str]] = option(
      None, "More teachers, comma-separated: fine-tuned directories of --teacher_dir's kind, "
      "labels and model shape (e.g. the same recipe at other seeds). The soft targets are then "
      "the ensemble's: the mean of every teacher's probabilities at --temperature (Hinton et al. "
      "2015); the student's first layers, its head and a matching loss stay --teacher_dir's. "
      "Needs --alpha > 0.", origin=finetune_settings.BERT_FIN)
  student_layers: int = option(
      3, "The student's encoder layers, taken from the teacher's (--layer_selection, or "
      "--layer_map); the embeddings, pooler and head are the teacher's too.",
      origin=finetune_settings.BERT_FIN, at_least=1)
  layer_selection: str = option(
      SKIP, "Which teacher layers the student starts from: skip = every k-th, the top one "
      "included (12 -> 3: layers 3, 7, 11, counted from 0); bottom = the first N. With "
      "--hidden_weight / --attention_weight also the teacher layers a --student_config student "
      "matches.",
      LAYER_SELECTIONS, origin=finetune_settings.BERT_FIN)
  layer_map: typing.Optional[typing.List[str]] = option(
      None, "The teacher layers (from 0) the student's layers start from, one a student layer, "
      "e.g. 0,5,11 (overrides --layer_selection; with --student_config the widths must be the "
      "teacher's).", origin=finetune_settings.BERT_FIN)
  student_config: typing.Optional[str] = option(
      None, "A student of its own shape: its bert_config.json (the teacher's vocab); starts "
      "from --student_init, else --layer_map's teacher layers, else random.",
      origin=finetune_settings.BERT_FIN)
  student_init: typing.Optional[str] = option(
      None, "With --student_config: the checkpoint the student starts from (a pretrained small "
      "model); none: random init (or --layer_map).", origin=finetune_settings.BERT_FIN)
  unlabeled_file: typing.Optional[str] = option(
      None, "In-domain text without labels (.jsonl: {\"text\": ...} a line, or .txt: one text a "
      "line), labelled by the teacher's soft targets and mixed into the training rows (the "
      "gold-label term reads the labelled rows only; a run_ner teacher's texts are cut into "
      "units and windows as run_ner reads an untagged text, the soft term read at their label "
      "positions). Needs --alpha > 0.",
      origin=finetune_settings.BERT_FIN)
  unlabeled_weight: typing.Optional[float] = option(
      None, "The share of the training rows --unlabeled_file's texts take, drawn as "
      "run_pretraining's --input_source weights mix (every labelled row once an epoch, the texts "
      "cycled to fill their share; e.g. 0.5: as many text rows as labelled ones); none: each "
      "text once, mixed in by row count.", origin=finetune_settings.BERT_FIN, above=0, below=1)
  temperature: float = option(
      2.0, "T: the soft targets are softmax(teacher logits / T); the KL term is scaled by T^2 "
      "(Hinton et al. 2015).", origin=finetune_settings.BERT_FIN, above=0)
  alpha: float = option(
      0.5, "The loss: alpha x T^2 x KL(teacher || student at T) + (1 - alpha) x cross-entropy "
      "on the gold labels (a multi-label teacher: the mean over labels of the binary KL of "
      "sigmoid(logits / T), and run_classifier --multi_label's loss; a tagger: KL of the "
      "emission scores at the label positions, and run_ner's loss, its CRF's with --use_crf); "
      "0: gold labels only (run_classifier's or run_ner's loss).",
      origin=finetune_settings.BERT_FIN, at_least=0, at_most=1)
  hidden_weight: float = option(
      0.0, "TinyBERT's hidden-state matching: adds this weight x the mean over the layer map of "
      "the MSE between the student's hidden states (x a learned projection where the widths "
      "differ) and its teacher layer's, the embedding outputs included, at the real tokens; the "
      "teacher's encoder then runs in every step (frozen). 0: off.",
      origin=finetune_settings.BERT_FIN, at_least=0)
  attention_weight: float = option(
      0.0, "TinyBERT's attention matching: adds this weight x the mean over the layer map of the "
      "MSE between the student's attention scores (before the softmax) and its teacher layer's, "
      "where query and key are real tokens; needs the teacher's head count. The teacher's "
      "encoder then runs in every step (frozen). 0: off.",
      origin=finetune_settings.BERT_FIN, at_least=0)


@dataclasses.dataclass(frozen=True)
class Settings(classify_flags.Settings):
  """Every run_distill setting: run_classifier's and settings.distill."""
  distill: Distill = dataclasses.field(default_factory=Distill)


# every flag of the table on absl's FLAGS (or a fresh FlagValues); --help: google's
# run_classifier.py flags, then bert_fin's
define_flags, flag_groups = flag_table.program_flags(
    Settings, finetune_settings.titles(classify_flags.GOOGLE_TITLE))


def layer_map_of(distill):
  """[int] of --layer_map, None when not given; ValueError naming the flag for a non-integer."""
  if not distill.layer_map:
    return None
  try:
    return [int(layer) for layer in distill.layer_map]
  except ValueError:
    raise ValueError("--layer_map must be teacher layer numbers separated by commas, got %s" %
                     ",".join(distill.layer_map))


def settings_of(flag_values):
  """The checked, frozen Settings of parsed flags: run_classifier's checks, then run_distill's
  (ValueError naming the flag)."""
  settings = finetune_settings.checked_settings(Settings, flag_values,
                                               tasks.FORMATS + ner_data.FORMATS)
  classify_flags.check_documents(settings)
  distill = settings.distill
  if not settings.mode.do_train:
    raise ValueError("run_distill trains: pass --do_train (evaluate or predict a student with "
                     "run_classifier.py or run_ner.py on its --output_dir)")
  if distill.student_init and not distill.student_config:
    raise ValueError("--student_init needs --student_config (the student's shape)")
  if distill.unlabeled_weight is not None and not distill.unlabeled_file:
    raise ValueError("--unlabeled_weight weighs --unlabeled_file's texts: pass the file, or "
                     "drop the flag")
  if distill.ensemble_dirs and distill.alpha == 0:
    raise ValueError("--ensemble_dirs: the other teachers give soft targets only: pass "
                     "--alpha > 0")
  if distill.unlabeled_file and distill.alpha == 0:
    raise ValueError("--unlabeled_file teaches through the teacher's soft targets only: pass "
                     "--alpha > 0")
  layer_map_of(distill)
  return settings
