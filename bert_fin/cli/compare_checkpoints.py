"""bert-fin-compare-checkpoints / tools/compare_checkpoints.py: does pretraining pay? Fine-tunes N
checkpoints (plus random init, the floor) on M tasks with K seeds, the same way, and tabulates.

  python tools/compare_checkpoints.py --output_dir=cmp \\
      --checkpoint=ours=out/model --bert_config_file=bert_config.json --vocab_file=vocab.txt \\
      --checkpoint=google=chinese_L-12_H-768_A-12/bert_model.ckpt \\
      --task=sentiment=samples/sentiment --seeds=1,2,3 --learning_rates=2e-5,3e-5,5e-5

--checkpoint NAME=PATH[,config=FILE][,vocab=FILE][,lower=true|false]: PATH is a checkpoint prefix
or a directory (its latest checkpoint), a transformers folder (config.json + model.safetensors /
pytorch_model.bin: imported into OUTPUT_DIR/imported/NAME, with its config, vocab and case), or
`none` for random init. Its config and vocab: the
options, else bert_config.json / vocab.txt beside the checkpoint (google's release layout), else
--bert_config_file / --vocab_file. A random-init row (`random-init`, the first checkpoint's config
and vocab unless --bert_config_file / --vocab_file say otherwise) is added unless
--no_random_init. --task NAME=DATA_DIR[,format=F][,kind=K][,OPTION=VALUE...]: run_classifier's
--task_name formats (jsonl default, tsv, cola, mnli, mrpc, xnli); kind classification (default),
ner (run_ner.py: format auto, chars or cluener; entity micro-F1 / macro-F1, chosen on dev
micro-F1) or qa (run_squad.py: DATA_DIR/{train,dev,test}.json in SQuAD's schema, format auto,
v1.1 or v2.0; F1 / EM, chosen on dev F1). A classification task's options are run_classifier's
long-text flags, passed to its cells: long_text=head|tail|head_tail|chunks, head_tokens=N,
doc_stride=N, chunk_pooling=mean|max (the same data under two names and modes compares them in
one table). format=cfleb|clue reads a public benchmark folder as downloaded (BBT-CFLEB's finfe,
finnl, finre, finnsp, finese; CLUE's classification tasks; cfleb_task=NAME, entities=markers|pair:
docs/yardstick.md "Judging on public benchmarks"), converted into OUTPUT_DIR/benchmarks/NAME.
--optimizer, --layerwise_lr_decay, --reinit_top_layers: every cell's (run_classifier / run_ner's:
the names of bert_fin/optimization/names.py; the fine-tuning recipes of docs/finetune.md).

Writes OUTPUT_DIR/cells/... (one run_classifier output per cell; finished cells are skipped when
the command is run again), results.md, results.csv and results.png. Everything is checked before
the first cell trains; a bad checkpoint, vocab or task stops with one line and exit status 2.
"""
import os
import shlex
import shutil
import sys
import tempfile

from bert_fin import booleans
from bert_fin import cli
from bert_fin import flag_table
from bert_fin.finetune.classify import flags as classify_flags  # no TensorFlow: before configure()
from bert_fin.interop import init_checkpoint as init_lib

PROG = "compare_checkpoints"
CONFIG_NAME, VOCAB_NAME = cli.CONFIG_NAME, cli.VOCAB_NAME
IMPORT_DIR = "imported"  # OUTPUT_DIR/imported/NAME: the import of a transformers folder
CELL_FLAGS = ("num_train_epochs", "max_seq_length", "train_batch_size", "eval_batch_size",
              "warmup_proportion", "optimizer", "layerwise_lr_decay", "reinit_top_layers",
              "pooling")
EVAL_BATCH_SIZE = 64


def _floats(text):
  return [float(x) for x in text.split(",") if x.strip()]


def _ints(text):
  return [int(x) for x in text.split(",") if x.strip()]


def build_parser():
  parser = cli.ArgumentParser(prog=PROG, description=__doc__)
  parser.add_argument("--checkpoint", action="append", default=[],
                      help="NAME=PATH[,config=FILE][,vocab=FILE][,lower=BOOL]; repeat for each "
                           "checkpoint; PATH none = random init")
  parser.add_argument("--task", action="append", default=[],
                      help="NAME=DATA_DIR[,format=jsonl|tsv|cola|mnli|mrpc|xnli (ner: "
                           "auto|chars|cluener; qa: auto|v1.1|v2.0)][,kind=classification|ner|qa]"
                           "[,long_text=head|tail|head_tail|chunks][,head_tokens=N][,doc_stride=N]"
                           "[,chunk_pooling=mean|max]; a benchmark folder: format=cfleb|clue"
                           "[,cfleb_task=NAME][,entities=markers|pair]; repeat for each task")
  parser.add_argument("--output_dir", required=True, help="cells and results go here")
  parser.add_argument("--bert_config_file", default=None,
                      help="config of checkpoints that name none and have none beside them")
  parser.add_argument("--vocab_file", default=None,
                      help="vocab of checkpoints that name none and have none beside them")
  parser.add_argument("--do_lower_case", type=booleans.argparse_bool, default=True,
                      help="case of checkpoints that name none (lower=...)")
  parser.add_argument("--no_random_init", action="store_true", default=False,
                      help="leave out the random-init row (the floor)")
  parser.add_argument("--seeds", type=_ints, default=[1, 2, 3],
                      help="fine-tuning seeds, comma-separated (each cell: run_classifier --seed)")
  parser.add_argument("--learning_rates", type=_floats, default=[5e-5],
                      help="comma-separated; several = a grid, chosen on dev per task and "
                           "checkpoint")
  # run_classifier's flags, passed to every cell: its fields (type, help, bounds), one
  # declaration; the cells' eval (and predict) batch is larger than run_classifier's default
  flag_table.add_arguments(parser, classify_flags.Settings, CELL_FLAGS,
                           defaults={"eval_batch_size": EVAL_BATCH_SIZE})
  parser.add_argument("--max_unk_rate", type=float, default=0.1,
                      help="refuse a checkpoint whose vocab makes more of a task's training "
                           "tokens [UNK]")
  parser.add_argument("--keep_models", action="store_true", default=False,
                      help="keep each cell's fine-tuned checkpoint (default: figures only)")
  parser.add_argument("--no_progress", action="store_true", default=False,
                      help="no progress bar: one line per finished cell instead")
  return parser


def _say(line):
  print("[compare] " + line, flush=True)


def checkpoints_from(args, imports=None, say=_say):
  """[grid.Checkpoint] from --checkpoint specs, defaults and --no_random_init. A transformers
  folder's import is appended to `imports` (init_lib.Resolved, perhaps staged: settle them once
  the plan is checked, discard them when it is refused; default: settled here at once)."""
  from bert_fin.yardstick import grid  # pylint: disable=g-import-not-at-top
  result = []
  for spec in args.checkpoint:
    name, path, options = grid.parse_spec(spec, "checkpoint", ("config", "vocab", "lower"))
    path = None if path == "none" else path
    imported = init_lib.resolve(path, os.path.join(args.output_dir, IMPORT_DIR, name),
                                options.get("config"), options.get("vocab"),
                                flag="--checkpoint %s=" % name)
    if imported:  # a transformers folder: its import, config and vocab
      for line in imported.lines:
        say(line)
      if imports is None:
        imported = init_lib.settle(imported)
      else:
        imports.append(imported)
      path = imported.checkpoint
      options = dict(options, config=imported.bert_config_file, vocab=imported.vocab_file)
      if "lower" not in options and imported.do_lower_case is not None:
        options["lower"] = str(imported.do_lower_case)
    config = options.get("config") or cli.beside(path, CONFIG_NAME) or args.bert_config_file
    vocab = options.get("vocab") or cli.beside(path, VOCAB_NAME) or args.vocab_file
    if not config or not vocab:
      raise ValueError("--checkpoint %s: no %s: add ,%s=FILE, put %s beside the checkpoint, or "
                       "pass --%s" % (name, "config" if not config else "vocab",
                                      "config" if not config else "vocab",
                                      CONFIG_NAME if not config else VOCAB_NAME,
                                      "bert_config_file" if not config else "vocab_file"))
    try:
      lower = booleans.parse_bool(options.get("lower", args.do_lower_case))
    except ValueError as e:
      raise ValueError("--checkpoint %s: lower=: %s" % (name, e)) from None
    result.append(grid.Checkpoint(name, path, config, vocab, lower))
  if not args.no_random_init and not any(c.path is None for c in result):
    config = args.bert_config_file or (result[0].bert_config_file if result else None)
    vocab = args.vocab_file or (result[0].vocab_file if result else None)
    if not config or not vocab:
      raise ValueError("random init needs a config and a vocab: pass --bert_config_file and "
                       "--vocab_file (or a --checkpoint)")
    lower = result[0].do_lower_case if result and not args.vocab_file else args.do_lower_case
    result.append(grid.Checkpoint(grid.RANDOM_INIT, None, config, vocab, lower))
  return result


def tasks_from(args, benchmark_root=None):
  """[TaskSpec] of the --task specs; a benchmark folder (format=cfleb|clue) is read, checked and
  converted (convert.place: staged in benchmark_root until OUTPUT_DIR/benchmarks/NAME exists)."""
  from bert_fin.yardstick import task_kinds  # pylint: disable=g-import-not-at-top
  from bert_fin.yardstick import grid  # pylint: disable=g-import-not-at-top
  from bert_fin.yardstick.benchmarks import convert  # pylint: disable=g-import-not-at-top
  result = []
  program_options = sorted({flag for kind in task_kinds.KINDS.values()
                            for flag in kind.task_options})
  for spec in args.task:
    name, data_dir, options = grid.parse_spec(spec, "task", (
        "format", "kind", "cfleb_task", "entities") + tuple(program_options))
    converted = convert.read_spec(spec, data_dir, options)  # None: not a benchmark format
    kind = task_kinds.get(options.pop("kind", task_kinds.DEFAULT_KIND))
    data_format = options.pop("format", None) or kind.default_format
    wrong = sorted(set(options) - set(kind.task_options))
    if wrong:
      raise ValueError("--task %s: %s is not an option of kind %s (its options: %s)" % (
          spec, ", ".join(wrong), kind.name, ", ".join(kind.task_options) or "none"))
    flags = tuple((flag, options[flag]) for flag in kind.task_options if flag in options)
    try:
      kind.check_options(flags)
    except ValueError as e:
      raise ValueError("--task %s: %s" % (spec, e)) from None
    result.append(task_kinds.TaskSpec(name, data_dir, data_format.lower(), kind.name, flags))
    if converted:
      directory = convert.place(converted, args.output_dir, name, benchmark_root)
      result[-1] = result[-1]._replace(data_dir=directory, notes=tuple(converted.notes))
  return result


def settings_from(args):
  from bert_fin.yardstick import grid  # pylint: disable=g-import-not-at-top
  if not args.seeds or not args.learning_rates or min(args.learning_rates) <= 0:
    raise ValueError("--seeds and --learning_rates need at least one value (rates > 0)")
  if len(set(args.seeds)) != len(args.seeds):
    raise ValueError("--seeds repeats a seed: %s" % args.seeds)
  flag_table.check_arguments(classify_flags.Settings, args, CELL_FLAGS)
  return grid.Settings(
      args.output_dir, args.seeds, args.learning_rates, args.num_train_epochs,
      args.max_seq_length, args.train_batch_size, args.eval_batch_size,
      args.warmup_proportion, args.pooling, args.max_unk_rate, args.keep_models, args.optimizer,
      args.layerwise_lr_decay, args.reinit_top_layers)


def main(argv=None):
  argv = sys.argv[1:] if argv is None else argv
  args = cli.parse_args(build_parser(), argv)  # before TensorFlow; the cells inherit the output
  from bert_fin.yardstick import grid  # pylint: disable=g-import-not-at-top  (TensorFlow)
  from bert_fin.yardstick import report as yardstick_report  # pylint: disable=g-import-not-at-top
  imports, staging = [], tempfile.mkdtemp(prefix="compare-benchmarks-")
  try:
    plan = grid.prepare(checkpoints_from(args, imports), tasks_from(args, staging),
                        settings_from(args))
    if any(imported.staged_in for imported in imports) or os.listdir(staging):
      # checked against the staged imports and benchmark conversions; now moved into
      # --output_dir and planned there
      for imported in imports:
        init_lib.settle(imported)
      plan = grid.prepare(checkpoints_from(args, say=lambda line: None), tasks_from(args),
                          settings_from(args))
  except ValueError as e:
    return cli.fail(PROG, e)
  finally:
    for imported in imports:
      init_lib.discard(imported)
    shutil.rmtree(staging, ignore_errors=True)
  for line in plan.restored:
    print("[compare] checkpoint " + line, flush=True)
  print("[compare] %d cells: %d task(s) x %d checkpoint(s) x %d learning rate(s) x %d seed(s) "
        "-> %s" % (len(plan.cells), len(plan.tasks), len(plan.checkpoints),
                   len(plan.settings.learning_rates), len(plan.settings.seeds),
                   plan.settings.output_dir), flush=True)
  try:
    grid.run(plan, progress=not args.no_progress)
  except grid.CellError as e:
    cli.fail(PROG, e)
    return 1  # a cell failed: not a refusal
  command = " ".join(shlex.quote(part) for part in ["python", "tools/compare_checkpoints.py"]
                     + list(argv))
  text = yardstick_report.write(plan, grid.collect(plan), command)
  print(text, flush=True)
  print("[compare] wrote %s" % ", ".join(os.path.join(plan.settings.output_dir, name) for name in (
      yardstick_report.MARKDOWN_FILE, yardstick_report.CSV_FILE, yardstick_report.PLOT_FILE)))
  return 0
