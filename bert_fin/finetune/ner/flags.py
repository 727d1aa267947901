"""Every run_ner flag: the shared ones (finetune/flags.py), with NER's --task_name and --labels.

  task_name  auto (default: the format whose files --data_dir holds), chars or cluener
             (data.py);
  labels     the tag list (O, B-X, I-X, ...), in the order of the tagger's rows (default: the
             sorted tags of the training set).
  use_crf    a CRF layer over the units (crf.py).
No --pooling: the tagger reads every token of the last layer.
"""
from absl import flags

from bert_fin.finetune import flags as finetune_flags
from bert_fin.finetune.ner import data as ner_data


def _define_google_flags(fv):
  flags.DEFINE_string("task_name", ner_data.AUTO, "The data format of --data_dir: chars "
                      "({train,dev,test}.txt, `char TAG` a line, a blank line between sentences, "
                      "BIO or BIOES), cluener ({train,dev,test}.json, CLUENER2020 JSON lines), or "
                      "auto (whichever of the two --data_dir holds).", flag_values=fv)
  finetune_flags.define_shared_google_flags(fv)


def _define_bert_fin_flags(fv):
  flags.DEFINE_list("labels", None, "The tag list (O,B-PER,I-PER,...), in the order of the "
                    "tagger's outputs (default: the sorted tags of the training set; a training "
                    "run saves it as labels.txt).", flag_values=fv)
  flags.DEFINE_bool("use_crf", False, "A linear-chain CRF over the units (transition matrix, "
                    "Viterbi decoding, in the graph) instead of a softmax per unit. Saved with the "
                    "model (ner/transitions): eval/predict runs use the saved choice.",
                    flag_values=fv)
  finetune_flags.define_shared_bert_fin_flags(fv)


def define_flags(flag_values=flags.FLAGS):
  """Defines every run_ner flag on flag_values (a fresh absl FlagValues in tests)."""
  return finetune_flags.define_program_flags(_define_google_flags, _define_bert_fin_flags,
                                             flag_values)


def flag_groups():
  """[(title, [flag names])] for --help: google's run_classifier.py flags, then bert_fin's."""
  return finetune_flags.program_flag_groups(
      "google-research/bert run_classifier.py (as run_ner reads them)", _define_google_flags,
      _define_bert_fin_flags)


def validate_flags(values):
  """Raises ValueError naming the flag for combinations that cannot run; lower-cases
  --task_name."""
  finetune_flags.validate_shared_flags(values)
  if values.task_name.lower() not in ner_data.FORMATS:
    raise ValueError("--task_name must be one of %s (the format of the files in --data_dir), "
                     "got %r" % (", ".join(ner_data.FORMATS), values.task_name))
  values.task_name = values.task_name.lower()
