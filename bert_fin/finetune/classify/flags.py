"""Every run_classifier flag: the shared ones (finetune/flags.py) with classification's
--task_name (the data format: jsonl, tsv, or google's cola, mnli, mrpc, xnli), --labels (the
label list, the order of test_results.tsv's columns) and --pooling (the text vector the
classifier reads).
"""
from absl import flags

from bert_fin.finetune import flags as finetune_flags
from bert_fin.finetune.classify import tasks


def _define_google_flags(fv):
  flags.DEFINE_string("task_name", None, "The data format of --data_dir: jsonl or tsv "
                      "({train,dev,test}.jsonl / .tsv), or google's task %s (google's files and "
                      "columns)." % ", ".join(tasks.FORMATS[len(tasks.OWN_FORMATS):]),
                      flag_values=fv)
  finetune_flags.define_shared_google_flags(fv)


def _define_bert_fin_flags(fv):
  flags.DEFINE_list("labels", None, "The label list, in the order of test_results.tsv's columns "
                    "(default: the sorted labels of the training set).", flag_values=fv)
  flags.DEFINE_enum("pooling", "first", ["first", "mean", "max"], "The text vector the classifier "
                    "reads: first = google's pooled [CLS]; mean / max = over the real tokens of "
                    "the last layer, then the same pooler dense + tanh (UER-py's --pooling). "
                    "Saved with the model; eval/predict runs use the saved one.", flag_values=fv)
  finetune_flags.define_shared_bert_fin_flags(fv)


def define_flags(flag_values=flags.FLAGS):
  """Defines every run_classifier flag on flag_values (a fresh absl FlagValues in tests)."""
  return finetune_flags.define_program_flags(_define_google_flags, _define_bert_fin_flags,
                                             flag_values)


def flag_groups():
  """[(title, [flag names])] for --help: google's run_classifier.py flags, then bert_fin's."""
  return finetune_flags.program_flag_groups("google-research/bert run_classifier.py",
                                            _define_google_flags, _define_bert_fin_flags)


def validate_flags(values):
  """Raises ValueError naming the flag for combinations that cannot run."""
  finetune_flags.validate_shared_flags(values)
  if values.task_name.lower() not in tasks.FORMATS:
    raise ValueError("--task_name must be one of %s (the format of the files in --data_dir), "
                     "got %r" % (", ".join(tasks.FORMATS), values.task_name))
