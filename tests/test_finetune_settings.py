"""finetune/settings.py and the program tables (classify/flags.py, ner/flags.py): the one table
each fine-tuning program's flags are generated from (bert_fin/flag_table.py).

Every leaf field is exactly one flag (same name, default, help, choices), every flag is a field,
--help lists the flags it listed before the tables existed (google-research/bert run_classifier's
with google's names and defaults among them), the flags run_pretraining shares are its own, and
parsed flags land in their concern's field of a frozen settings object."""
import dataclasses

import pytest
from absl import flags

from helpers import settings_tables

from bert_fin import flag_table
from bert_fin.finetune import label_lists
from bert_fin.finetune import settings as finetune_settings
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.ner import flags as ner_flags
from bert_fin.training import flags as train_flags
from bert_fin.training import settings as train_settings

PROGRAMS = {"run_classifier": classify_flags, "run_ner": ner_flags}
# google-research/bert run_classifier.py: every flag, with its default (task_name: run_ner's own)
GOOGLE_RUN_CLASSIFIER_DEFAULTS = {
    "data_dir": None, "bert_config_file": None, "vocab_file": None, "output_dir": None,
    "init_checkpoint": None, "do_lower_case": True, "max_seq_length": 128, "do_train": False,
    "do_eval": False, "do_predict": False, "train_batch_size": 32, "eval_batch_size": 8,
    "predict_batch_size": 8, "learning_rate": 5e-5, "num_train_epochs": 3.0,
    "warmup_proportion": 0.1, "save_checkpoints_steps": 1000, "iterations_per_loop": 1000,
    "use_tpu": False, "tpu_name": None, "tpu_zone": None, "gcp_project": None, "master": None,
    "num_tpu_cores": 8}
# google's TPU flags the fine-tuning programs took with run_pretraining's tpu group (issue 33
# part 3); --help listed only iterations_per_loop and use_tpu of them before
TPU_FLAGS_ADDED = ("tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores")
# the flags of the same meaning run_pretraining declares (training/settings.py) and the
# fine-tuning tables take from it
SHARED_WITH_RUN_PRETRAINING = train_settings.RUN_CONFIG_FLAGS + (
    "do_train", "do_eval", "save_checkpoints_steps", "horovod", "use_xla", "amp") + tuple(
        flag_table.flag_names(train_settings.Tpu))
BERT_FIN_DEFAULTS = {
    "labels": None, "horovod": False, "use_xla": False, "amp": False, "num_train_steps": 0,
    "seed": 12345, "log_every_n_steps": 100, "optimizer": "adam",
    "save_summaries_steps": None, "intra_op_parallelism_threads": 0,
    "inter_op_parallelism_threads": 0,
    "layerwise_lr_decay": 1.0, "reinit_top_layers": 0}  # the recipes, added since (issue 40)
# run_classifier's long-text flags (classify/flags.py's documents group, issue 39 part 2)
LONG_TEXT_FLAGS = ["long_text", "head_tokens", "doc_stride", "chunk_pooling"]
# --help's groups before the settings tables (finetune/flags.py of issue 33 part 2), by program,
# with the flags added since
GOOGLE_FLAGS_BEFORE = ["task_name"] + [name for name in GOOGLE_RUN_CLASSIFIER_DEFAULTS
                                       if name not in TPU_FLAGS_ADDED]
FLAGS_BEFORE = {
    "run_classifier": {
        "google-research/bert run_classifier.py": GOOGLE_FLAGS_BEFORE,
        finetune_settings.BERT_FIN_TITLE: list(BERT_FIN_DEFAULTS) + ["pooling"]
                                          + LONG_TEXT_FLAGS
                                          + ["multi_label", "entity_markers"]},  # issue 47
    "run_ner": {
        "google-research/bert run_classifier.py (as run_ner reads them)": GOOGLE_FLAGS_BEFORE,
        finetune_settings.BERT_FIN_TITLE: list(BERT_FIN_DEFAULTS) + ["use_crf"]}}
OWN_DEFAULTS = {"run_classifier": {"task_name": None, "pooling": "first", "multi_label": False,
                                   "entity_markers": 0,
                                   "long_text": "head",
                                   "head_tokens": None, "doc_stride": None,
                                   "chunk_pooling": "mean"},
                "run_ner": {"task_name": "auto", "use_crf": False}}


def _defined(program):
  values = PROGRAMS[program].define_flags(flags.FlagValues())
  return values, [name for name in values if values[name].name == name]


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_every_settings_field_is_exactly_one_flag_and_every_flag_a_field(program):
  values, names = _defined(program)
  table = PROGRAMS[program].Settings
  settings_tables.assert_every_field_is_exactly_one_flag(table, values, names)
  fields = flag_table.leaf_fields(table)
  shared = [path for path, _ in flag_table.leaf_fields(finetune_settings.Settings)]
  own_groups = ("task", "documents")  # the program's own (documents: run_classifier's)
  assert [path for path, _ in fields if path[0] not in own_groups] == shared  # declared once


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_help_groups_list_the_same_flags_with_the_same_defaults_as_before(program):
  """... and google's TPU flags added to google's group."""
  groups = dict(PROGRAMS[program].flag_groups())
  assert list(groups) == list(FLAGS_BEFORE[program])
  google_title = list(FLAGS_BEFORE[program])[0]
  assert {title: sorted(names) for title, names in groups.items()} == {
      title: sorted(names + list(TPU_FLAGS_ADDED) * (title == google_title))
      for title, names in FLAGS_BEFORE[program].items()}
  values, _ = _defined(program)
  expected = dict(GOOGLE_RUN_CLASSIFIER_DEFAULTS, **BERT_FIN_DEFAULTS, **OWN_DEFAULTS[program])
  assert {name: values[name].default for name in expected} == expected
  assert values["labels"].parser.flag_type() == "comma separated list of strings"  # as before


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_flags_run_pretraining_shares_are_its_own(program):
  values, _ = _defined(program)
  table = train_flags.define_flags(flags.FlagValues())
  for name in SHARED_WITH_RUN_PRETRAINING:
    assert (values[name].help, values[name].default, values[name].flag_type()) == (
        table[name].help, table[name].default, table[name].flag_type()), name
  tpu_group = [names for title, names in PROGRAMS[program].flag_groups()
               if title.startswith("google-research/bert")][0]
  assert set(flag_table.flag_names(train_settings.Tpu)) <= set(tpu_group)


def _parsed(program, *argv):
  values, _ = _defined(program)
  values([program, "--data_dir=d", "--bert_config_file=c", "--vocab_file=v",
          "--output_dir=o"] + list(argv))
  return PROGRAMS[program].settings_of(values)


def test_parsed_flags_land_in_their_concern_and_the_settings_are_frozen():
  settings = _parsed("run_classifier", "--task_name=jsonl", "--do_train=yes",
                     "--learning_rate=0.5", "--labels=b,a", "--pooling=mean", "--seed=7",
                     "--intra_op_parallelism_threads=2")
  assert settings.mode.do_train is True and settings.optimizer.learning_rate == 0.5
  assert settings.task.labels == ["b", "a"] and settings.task.pooling == "mean"
  assert settings.data.data_dir == "d" and settings.model.vocab_file == "v"
  assert settings.output.output_dir == "o" and settings.execution.seed == 7
  assert settings.optimizer.num_train_epochs == 3.0  # not given: google's default
  assert {"pooling", "labels", "do_train"} <= settings.given and "use_tpu" not in settings.given
  with pytest.raises(dataclasses.FrozenInstanceError):
    settings.optimizer.learning_rate = 1.0
  estimator = finetune_settings.estimator_settings(settings)
  assert (estimator.seed, estimator.intra_op_parallelism_threads,
          estimator.log_every_n_steps) == (7, 2, 100)


@pytest.mark.parametrize("program,task_name", [("run_ner", "cluener"),
                                               ("run_classifier", "jsonl")])
def test_each_program_lower_cases_its_task_name_and_refuses_an_unknown_one(program, task_name):
  given = "--task_name=" + task_name.upper()
  assert _parsed(program, given, "--do_eval").task.task_name == task_name
  with pytest.raises(ValueError, match="--task_name must be one of"):
    _parsed(program, "--task_name=conll", "--do_eval")


@pytest.mark.parametrize("argv,words", [
    (["--task_name=jsonl"], "At least one of `do_train`"),
    (["--task_name=jsonl", "--do_train", "--use_tpu"], "--use_tpu is not supported"),
    (["--task_name=jsonl", "--do_train", "--warmup_proportion=1"], "--warmup_proportion"),
    (["--task_name=jsonl", "--do_train", "--max_seq_length=2"], "--max_seq_length must be >= 3"),
    (["--task_name=yaml", "--do_train"], "--task_name must be one of")])
def test_settings_that_cannot_run_are_refused_naming_the_flag(argv, words):
  with pytest.raises(ValueError, match=words):
    _parsed("run_classifier", *argv)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_a_boolean_flag_is_read_by_the_one_boolean_parser(program):
  values, _ = _defined(program)
  with pytest.raises(flags.IllegalFlagValueError, match="expected true or false"):
    values([program, "--do_train=ture"])


@pytest.mark.parametrize("argv,splits", [
    (["--do_train"], ["train"]), (["--do_predict", "--do_eval"], ["dev", "test"]),
    (["--do_train", "--do_eval", "--do_predict"], ["train", "dev", "test"])])
def test_a_run_reads_the_splits_its_mode_flags_ask_for_in_file_order(argv, splits):
  settings = _parsed("run_classifier", "--task_name=jsonl", *argv)
  assert label_lists.wanted_splits(settings.mode) == splits
