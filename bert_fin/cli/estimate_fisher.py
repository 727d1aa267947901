"""bert-fin-estimate-fisher / tools/estimate_fisher.py: the diagonal Fisher estimate of a base
checkpoint over general-corpus records, for run_pretraining --init_regularizer=ewc.

  python tools/estimate_fisher.py --init_checkpoint=chinese_L-12_H-768_A-12/bert_model.ckpt \\
      --bert_config_file=chinese_L-12_H-768_A-12/bert_config.json \\
      --input_file='general/records-*.tfrecord' --max_seq_length=128 \\
      --max_predictions_per_seq=20 --output_dir=chinese_L-12_H-768_A-12/fisher

Squares the gradients of the pretraining loss (masked LM + next sentence; --objective=roberta:
masked LM) over the first --fisher_batches full batches of the records, in file order (give a
sample spread over the general text), and writes OUTPUT_DIR whole: the estimate as a checkpoint
(fisher.*, the encoder's variable names) and manifest.json naming the base (path and fingerprint)
and the records (docs/continue.md). The base must hold its pretraining heads. Everything is
checked before the first batch; a bad input prints one line and exits with status 2, nothing
written.
"""
import datetime
import os
import sys

from bert_fin import cli
from bert_fin import flag_table
from bert_fin.training import settings as settings_lib  # no TensorFlow: before configure()

PROG = "estimate_fisher"
CONFIG_NAME = "bert_config.json"
RUN_FLAGS = ("max_seq_length", "max_predictions_per_seq", "objective", "legacy_input_mask",
             "dynamic_masking_config")  # run_pretraining's, as the run reads them


def build_parser():
  parser = cli.ArgumentParser(prog=PROG, description=__doc__)
  parser.add_argument("--init_checkpoint", required=True,
                      help="the base checkpoint (prefix, or a directory: its latest) that "
                           "run_pretraining --init_checkpoint will continue")
  parser.add_argument("--bert_config_file", default=None,
                      help="its config (default: bert_config.json beside the checkpoint)")
  parser.add_argument("--input_file", required=True,
                      help="general-corpus records (glob or comma separated), as "
                           "run_pretraining's --input_file")
  parser.add_argument("--output_dir", required=True,
                      help="the Fisher directory to write (new or empty); run_pretraining "
                           "--fisher_file names it")
  # run_pretraining's flags of the records and the loss: its fields, one declaration
  flag_table.add_arguments(parser, settings_lib.Settings, RUN_FLAGS[:3])
  parser.add_argument("--batch_size", type=int, default=8,
                      help="examples a gradient (1: the per-example Fisher, slower)")
  parser.add_argument("--fisher_batches", type=int, default=100,
                      help="full batches averaged (fewer when the records run out first)")
  flag_table.add_arguments(parser, settings_lib.Settings, RUN_FLAGS[3:])
  return parser


def _config_file(args):
  if args.bert_config_file:
    return args.bert_config_file
  directory = args.init_checkpoint if os.path.isdir(args.init_checkpoint) else os.path.dirname(
      args.init_checkpoint)
  candidate = os.path.join(directory, CONFIG_NAME)
  if not os.path.isfile(candidate):
    raise ValueError("--bert_config_file: none given and no %s beside --init_checkpoint %s"
                     % (CONFIG_NAME, args.init_checkpoint))
  return candidate


def _plan(args):
  """Everything checked before the first batch: (config, checkpoint prefix, files, layout,
  masking config, penalised shapes). ValueError (one line)."""
  # pylint: disable=import-outside-toplevel  (TensorFlow: after the arguments are parsed)
  from bert_fin.input import stream
  from bert_fin.modeling import checkpoint as checkpoint_lib
  from bert_fin.modeling import config as config_lib
  from bert_fin.training import preflight
  from bert_fin.training import run as run_lib
  from bert_fin.training.init_regularizer import fisher
  from bert_fin.training.init_regularizer import fisher_file
  flag_table.check_arguments(settings_lib.Settings, args, RUN_FLAGS)
  for name in ("batch_size", "fisher_batches"):
    if getattr(args, name) < 1:
      raise ValueError("--%s must be >= 1, got %d" % (name, getattr(args, name)))
  fisher_file.check_output_dir(args.output_dir)
  if os.path.isdir(args.init_checkpoint) and not checkpoint_lib.resolve_checkpoint(
      args.init_checkpoint):
    raise ValueError("--init_checkpoint %s: a directory without a checkpoint (a transformers "
                     "folder: import it first with tools/import_hf.py)" % args.init_checkpoint)
  prefix = checkpoint_lib.resolve_checkpoint(args.init_checkpoint)
  config = config_lib.read_config_for(_config_file(args), args.max_seq_length)
  shapes = fisher.check_base(checkpoint_lib.checkpoint_shapes(prefix), config, args.objective)
  data = settings_lib.Data(input_file=args.input_file, max_seq_length=args.max_seq_length,
                           max_predictions_per_seq=args.max_predictions_per_seq,
                           legacy_input_mask=args.legacy_input_mask,
                           dynamic_masking_config=args.dynamic_masking_config)
  files = stream.expand_input_files(args.input_file)
  preflight.check_not_empty(files, 1, False)
  layout = preflight.check_records(files, args.max_seq_length, args.max_predictions_per_seq,
                                   args.legacy_input_mask, config.vocab_size)
  masking = run_lib.masking_of(data, files, layout, [], None)
  return config, prefix, files, run_lib.dynamic_layout(layout, masking), masking, shapes


def main(argv=None):
  args = cli.parse_args(build_parser(), argv)
  try:
    config, prefix, files, layout, masking, shapes = _plan(args)
  except (ValueError, OSError) as e:
    return cli.fail(PROG, e)
  # pylint: disable=import-outside-toplevel
  import tqdm
  from bert_fin.training.init_regularizer import fisher
  from bert_fin.training.init_regularizer import fisher_file
  print("[%s] base %s: %d encoder variables; %d record file(s), batches of %d, at most %d "
        "batches" % (PROG, prefix, len(shapes), len(files), args.batch_size, args.fisher_batches),
        flush=True)
  start = datetime.datetime.now()
  with tqdm.tqdm(total=args.fisher_batches, desc="fisher batches", unit="batch",
                 dynamic_ncols=True) as bar:
    tensors, batches = fisher.estimate(config, prefix, files, layout, masking, args.objective,
                                       args.batch_size, args.fisher_batches,
                                       progress=lambda done: bar.update(done - bar.n))
  if not batches:
    return cli.fail(PROG, "--input_file %s holds fewer than --batch_size=%d records: no full "
                          "batch to estimate from" % (args.input_file, args.batch_size))
  problems = [problem for problem in (fisher_file.value_problem(name, value)
                                      for name, value in sorted(tensors.items())) if problem]
  if problems:
    return cli.fail(PROG, "the estimate is no Fisher (%s): --init_checkpoint %s holds weights "
                          "whose loss or gradients overflow; nothing written"
                    % (problems[0], args.init_checkpoint))
  manifest = {
      "base": {"checkpoint": os.path.abspath(prefix),
               "fingerprint": fisher_file.fingerprint(prefix)},
      "records": {"input_file": args.input_file, "files": list(files),
                  "records_read": batches * args.batch_size},
      "estimate": {"objective": args.objective, "batch_size": args.batch_size,
                   "batches": batches, "max_seq_length": args.max_seq_length,
                   "method": fisher.METHOD},
  }
  try:
    written = fisher_file.write(args.output_dir, tensors, manifest)
  except OSError as e:
    return cli.fail(PROG, e)
  stats = written["statistics"]
  print("[%s] %d batches (%d records) in %s: %d parameters, mean F %.4g, max F %.4g -> %s" % (
      PROG, batches, batches * args.batch_size,
      str(datetime.datetime.now() - start).split(".")[0], stats["parameters"], stats["mean"],
      stats["max"], args.output_dir), flush=True)
  if batches < args.fisher_batches:
    print("[%s] note: the records gave %d full batches, fewer than --fisher_batches=%d"
          % (PROG, batches, args.fisher_batches), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
