"""training/settings.py: the one table run_pretraining's flags are generated from (bert_fin/flag_table.py).

Every leaf field is exactly one flag (same name, default, help, choices), every flag is a field,
--help lists the flags it listed before the table existed (google-research/bert's with google's
names and defaults among them), and parsed flags land in their concern's field."""
import dataclasses
import re
import typing

import pytest
from absl import flags

from helpers import settings_tables

from bert_fin import flag_table
from bert_fin.training import flags as train_flags
from bert_fin.training import settings as settings_lib

# google-research/bert run_pretraining.py: every flag, with its default
GOOGLE_RUN_PRETRAINING_DEFAULTS = {
    "bert_config_file": None, "input_file": None, "output_dir": None, "init_checkpoint": None,
    "max_seq_length": 128, "max_predictions_per_seq": 20, "do_train": False, "do_eval": False,
    "train_batch_size": 32, "eval_batch_size": 8, "learning_rate": 5e-5,
    "num_train_steps": 100000, "num_warmup_steps": 10000, "save_checkpoints_steps": 1000,
    "iterations_per_loop": 1000, "max_eval_steps": 100, "use_tpu": False, "tpu_name": None,
    "tpu_zone": None, "gcp_project": None, "master": None, "num_tpu_cores": 8}
# --help's groups before the settings table (training/flags.py of issue 32), by origin
FLAGS_BEFORE = {
    "NVIDIA DeepLearningExamples BERT (TF1)": [
        "horovod", "use_xla", "amp", "num_accumulation_steps", "allreduce_post_accumulation",
        "optimizer_type", "init_loss_scale"],
    "bert_fin": [
        "input_pipeline", "index_dir", "data_order", "sparse_as_dense", "fp16_allreduce",
        "scale_lr_by_workers", "objective", "recompute", "log_every_n_steps", "peak_tflops",
        "eval_input_file", "dynamic_masking_config", "head_warmup_steps", "legacy_input_mask",
        "seed", "deterministic", "cpu_bf16", "eval_continuous", "eval_timeout_secs",
        "save_summaries_steps", "intra_op_parallelism_threads", "inter_op_parallelism_threads",
        # added since (issue 40): L2 / EWC toward --init_checkpoint
        "init_regularizer", "init_regularizer_weight", "fisher_file"]}
FLAGS_BEFORE["google-research/bert run_pretraining.py"] = list(GOOGLE_RUN_PRETRAINING_DEFAULTS)
# flags added to the table since, by group: mixing corpora and per-source eval
FLAGS_ADDED = {"bert_fin": ["input_source", "eval_source", "best_eval_source"]}


def _defined():
  values = train_flags.define_flags(flags.FlagValues())
  return values, [name for name in values if values[name].name == name]


def test_every_settings_field_is_exactly_one_flag_and_every_flag_a_field():
  values, names = _defined()
  settings_tables.assert_every_field_is_exactly_one_flag(settings_lib.Settings, values, names)


def test_help_groups_list_the_same_flags_as_before_with_googles_names_and_defaults():
  groups = dict(train_flags.flag_groups())
  assert list(groups) == list(settings_lib.ORIGIN_TITLES.values())
  assert {title: sorted(names) for title, names in groups.items()} == {
      title: sorted(names + FLAGS_ADDED.get(title, [])) for title, names in FLAGS_BEFORE.items()}
  values, _ = _defined()
  for name, default in GOOGLE_RUN_PRETRAINING_DEFAULTS.items():
    assert values[name].default == default, name


def test_run_config_flags_of_the_fine_tuning_programs_come_from_the_same_table():
  from bert_fin.finetune import settings as finetune_settings  # pylint: disable=import-outside-toplevel
  values = flag_table.define_flags(finetune_settings.Settings, flags.FlagValues())
  assert set(settings_lib.RUN_CONFIG_FLAGS) <= set(values)
  table, _ = _defined()
  for name in settings_lib.RUN_CONFIG_FLAGS:
    assert (values[name].help, values[name].default) == (table[name].help, table[name].default)


def test_parsed_flags_land_in_their_concern_and_the_settings_are_frozen():
  values, _ = _defined()
  values(["run_pretraining.py", "--learning_rate=0.5", "--input_pipeline=dali", "--amp=yes",
          "--seed=7", "--output_dir=out", "--num_tpu_cores=2"])
  settings = settings_lib.from_flags(values)
  assert settings.optimizer.learning_rate == 0.5 and settings.data.input_pipeline == "dali"
  assert settings.execution.amp is True and settings.execution.seed == 7
  assert settings.output.output_dir == "out" and settings.tpu.num_tpu_cores == 2
  assert settings.optimizer.num_train_steps == 100000  # not given: google's default
  assert flag_table.values_by_name(settings)["learning_rate"] == 0.5
  with pytest.raises(dataclasses.FrozenInstanceError):
    settings.optimizer.learning_rate = 1.0


def test_a_boolean_flag_is_read_by_the_one_boolean_parser():
  values, _ = _defined()
  with pytest.raises(flags.IllegalFlagValueError, match="expected true or false"):
    values(["run_pretraining.py", "--do_train=ture"])


def test_upper_bounds_are_declared_on_the_field_beside_the_lower_ones():
  @dataclasses.dataclass(frozen=True)
  class Table:
    share: float = flag_table.option(0.5, "in [0, 1)", at_least=0, below=1)
    decay: float = flag_table.option(1.0, "in (0, 1]", above=0, at_most=1)
    window: int = flag_table.option(8, "at most 64", at_most=64)
    prob: float = flag_table.option(0.1, "below 1", below=1)

  flag_table.check_bounds(Table())
  flag_table.check_bounds(Table(share=0.0, decay=1.0, window=64))  # the closed ends are in
  for bad, message in [({"share": 1.0}, r"^--share must be in \[0, 1\), got 1$"),
                       ({"share": -0.5}, r"^--share must be in \[0, 1\), got -0.5$"),
                       ({"decay": 0.0}, r"^--decay must be in \(0, 1\], got 0$"),
                       ({"decay": 1.5}, r"^--decay must be in \(0, 1\], got 1.5$"),
                       ({"window": 65}, r"^--window must be <= 64, got 65$"),
                       ({"prob": 1.0}, r"^--prob must be < 1, got 1$")]:
    with pytest.raises(ValueError, match=message):
      flag_table.check_bounds(Table(**bad))
  with pytest.raises(ValueError, match=r"^--decay must be in \(0, 1\], got 2$"):
    flag_table.check_value(Table, "decay", 2.0)  # one value: an argparse tool's argument
  flag_table.check_value(Table, "decay", 0.5)
  shared = flag_table.option_of(Table, "decay")  # a shared flag keeps both its bounds
  assert (shared.metadata["above"], shared.metadata["at_most"]) == (0, 1)


def test_required_flags_and_refusals_are_declared_on_the_field():
  @dataclasses.dataclass(frozen=True)
  class Table:
    refused_flag: bool = flag_table.option(False, "refused", refused="--refused_flag: no")
    config: typing.Optional[str] = flag_table.option(
        None, "needed unless the folder has one", required=True,
        unless=lambda table: table.folder == "has_config")
    output: typing.Optional[str] = flag_table.option(
        None, "needed unless --vectors", required=True, unless="vectors")
    vectors: typing.Optional[str] = flag_table.option(None, "stands in for --output")
    folder: typing.Optional[str] = flag_table.option(None, "where a config may be")
    steps: int = flag_table.option(1, "steps", at_least=1)
    kind: typing.Optional[str] = flag_table.option(None, "a or b", ("a", "b"))

  assert flag_table.required_names(Table) == ["config", "output"]
  with pytest.raises(ValueError, match=r"^missing required flag\(s\): --config, "
                                       r"--output \(or --vectors\)$"):
    flag_table.check_fields(Table(steps=0))  # every missing one, then (later) the bounds
  flag_table.check_fields(Table(config="c", vectors="v"))
  flag_table.check_fields(Table(folder="has_config", output="o"))
  with pytest.raises(ValueError, match=r"^--refused_flag: no$"):  # refusals come first
    flag_table.check_fields(Table(refused_flag=True))
  with pytest.raises(ValueError, match=r"^--steps must be >= 1, got 0$"):
    flag_table.check_fields(Table(config="c", output="o", steps=0))
  with pytest.raises(ValueError, match=r"^--kind must be one of \('a', 'b'\)$"):
    flag_table.check_fields(Table(config="c", output="o", kind="c"))  # built in code, not absl
  flag_table.check_fields(Table(config="c", output="o", kind="b"))
  shared = flag_table.option_of(Table, "output")  # a shared flag keeps what it requires
  assert (shared.metadata["required"], shared.metadata["unless"]) == (True, "vectors")


def test_every_program_declares_the_tpu_refusal_and_its_required_flags_on_its_table():
  from bert_fin.data.create import options as create_options  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.classify import flags as classify_flags  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.features import flags as features_flags  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.ner import flags as ner_flags  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.squad import flags as squad_flags  # pylint: disable=g-import-not-at-top
  assert flag_table.required_names(settings_lib.Settings) == [
      "bert_config_file", "input_file", "output_dir"]
  assert flag_table.required_names(classify_flags.Settings) == [
      "bert_config_file", "vocab_file", "data_dir", "output_dir", "task_name"]
  assert flag_table.required_names(ner_flags.Settings) == flag_table.required_names(
      classify_flags.Settings)
  assert flag_table.required_names(squad_flags.Settings) == [
      "bert_config_file", "vocab_file", "output_dir"]  # no --data_dir, no --task_name
  assert flag_table.required_names(features_flags.Settings) == [
      "input_file", "output_file", "bert_config_file", "init_checkpoint", "vocab_file"]
  assert flag_table.required_names(create_options.Options) == [
      "input_file", "output_file", "vocab_file"]
  for table in (settings_lib.Settings, classify_flags.Settings, ner_flags.Settings,
                squad_flags.Settings, features_flags.Settings):  # one message, one home
    assert flag_table.field_of(table, "use_tpu").metadata["refused"] == settings_lib.TPU_REFUSAL
  assert not flag_table.required_names(settings_lib.Tpu)
  values = features_flags.define_flags(flags.FlagValues())  # a program refuses it, one line
  values(["extract_features.py", "--use_tpu", "--input_file=in.txt"])
  with pytest.raises(ValueError, match="^%s$" % re.escape(settings_lib.TPU_REFUSAL)):
    features_flags.settings_of(values)


def test_bounds_are_declared_on_the_field_and_checked_in_table_order():
  @dataclasses.dataclass(frozen=True)
  class Inner:
    steps: int = flag_table.option(1, "steps", at_least=1)
    rate: float = flag_table.option(0.1, "rate", above=0)
    cadence: typing.Optional[int] = flag_table.option(None, "unbounded when None", at_least=1)

  @dataclasses.dataclass(frozen=True)
  class Table:
    inner: Inner = Inner()

  flag_table.check_bounds(Table())
  with pytest.raises(ValueError, match=r"^--steps must be >= 1, got 0$"):
    flag_table.check_bounds(Table(Inner(steps=0, rate=-1.0)))  # the first in table order
  with pytest.raises(ValueError, match=r"^--rate must be > 0, got -0.5$"):
    flag_table.check_bounds(Table(Inner(rate=-0.5)))
  with pytest.raises(ValueError, match=r"^--cadence must be >= 1, got 0$"):
    flag_table.check_bounds(Table(Inner(cadence=0)))
  # a flag two tables share keeps its bound (run_pretraining's, declared once)
  shared = flag_table.option_of(settings_lib.Settings, "save_checkpoints_steps")
  assert shared.metadata["at_least"] == 1
  settings = settings_lib.Settings()
  bad = dataclasses.replace(
      settings, mode=dataclasses.replace(settings.mode, do_train=True),
      model=dataclasses.replace(settings.model, bert_config_file="c.json"),
      data=dataclasses.replace(settings.data, input_file="r.tfrecord"),
      output=dataclasses.replace(settings.output, output_dir="out"),
      optimizer=dataclasses.replace(settings.optimizer, num_accumulation_steps=0))
  with pytest.raises(ValueError, match="--num_accumulation_steps must be >= 1, got 0"):
    train_flags.validate(bad)


@pytest.mark.parametrize("argv,message", [
    (["--init_regularizer_weight=1e308"],
     r"^--init_regularizer_weight=1e\+308 is beyond float32's range \(at most 3\.40282e\+38 in "
     r"magnitude\)$"),
    (["--init_regularizer_weight=inf"], r"^--init_regularizer_weight=inf must be a finite number$"),
    (["--learning_rate=nan"], r"^--learning_rate=nan must be a finite number$"),
    (["--learning_rate=1e-320"], r"^--learning_rate=9\.99989e-321 is below float32's smallest "
                                 r"normal number 1\.17549e-38 \(the graph would read 0 or a "
                                 r"denormal\)$"),
    (["--num_train_steps=%d" % 2 ** 70], r"^--num_train_steps=%d is beyond int64's range$"
                                        % 2 ** 70),
])
def test_numbers_the_graph_cannot_hold_are_refused_by_the_table_before_anything_runs(argv,
                                                                                   message):
  """Every float flag of every table: finite, within float32, not below its smallest normal;
  every int flag within int64 (flag_table.check_bounds, run by each program's validate)."""
  values = train_flags.define_flags(flags.FlagValues())
  values(["run_pretraining.py", "--do_train", "--bert_config_file=c.json", "--input_file=r",
          "--output_dir=out", "--init_regularizer=l2", "--init_checkpoint=base"] + argv)
  with pytest.raises(ValueError, match=message):
    train_flags.validate_flags(values)
  assert flag_table.representable_problem(0.0, float) is None  # 0 is exact in float32
  assert flag_table.representable_problem(-3e38, float) is None
  assert flag_table.representable_problem(True, bool) is None
