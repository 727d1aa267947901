"""--init_checkpoint=<a transformers folder> for run_pretraining, run_classifier and run_ner (and
compare_checkpoints' --checkpoint): the folder is imported on the fly, by the same code as
tools/import_hf.py, into <output_dir>/imported_init/ and the run starts from that checkpoint.

  resolved = resolve(path, os.path.join(output_dir, IMPORT_DIR), bert_config_file, vocab_file)
  # None: not a folder

An import made from the same files (import_hf.json's stamp: sizes and mtimes) is reused, so a
restarted run does not convert again. --bert_config_file / --vocab_file may then be left out: the
import's bert_config.json / vocab.txt are used. A --bert_config_file that is given must describe
the same model (MODEL_FIELDS: a google bert_config.json with hidden_act "gelu" for a folder whose
transformers config says the exact "gelu" would silently compute something else): refused
otherwise, naming the fields. A folder that cannot be imported raises ValueError (one line) before
anything is written.
"""
import collections
import json
import os

from bert_fin.interop import layout

IMPORT_DIR = "imported_init"
# BertConfig fields that change what the model computes (dropout, initializer_range do not).
MODEL_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "hidden_act", "max_position_embeddings", "type_vocab_size")

is_transformers_folder = layout.is_transformers_folder

Resolved = collections.namedtuple("Resolved", [
    "checkpoint", "bert_config_file", "vocab_file", "do_lower_case", "lines"])
Resolved.__doc__ = """resolve's result: the imported checkpoint prefix, the config and vocab files
to use (given ones kept), the tokenizer's do_lower_case (None when the folder does not say) and
the lines to print (what was imported, or that the import was reused)."""


def _reusable(hf_dir, target):
  """The import_hf.json report of target when it is an import of hf_dir's current files."""
  from bert_fin.interop import hf_import  # pylint: disable=import-outside-toplevel  (TensorFlow)
  try:
    with open(os.path.join(target, hf_import.REPORT_NAME), encoding="utf-8") as f:
      report = json.load(f)
  except (OSError, ValueError):
    return None
  if (report.get("hf_dir") == os.path.abspath(hf_dir)
      and report.get("source") == hf_import.source_stamp(hf_dir)
      and os.path.isfile(os.path.join(target, hf_import.CHECKPOINT_NAME + ".index"))):
    return report
  return None


def import_into(hf_dir, target, flag):
  """(checkpoint, config file, vocab file, do_lower_case, lines) of hf_dir imported into target
  (or its up-to-date earlier import). Raises ValueError naming flag."""
  from bert_fin.interop import hf_import  # pylint: disable=import-outside-toplevel  (TensorFlow)
  report = _reusable(hf_dir, target)
  if report is not None:
    do_lower_case = report.get("do_lower_case")
    lines = ["%s %s: a transformers folder; using its import in %s (made from the same files)"
             % (flag, hf_dir, target)]
  else:
    try:
      imported = hf_import.import_folder(hf_dir, target, replace=True)
    except OSError as e:
      raise ValueError("%s %s: importing into %s failed: %s" % (flag, hf_dir, target, e))
    except ValueError as e:
      raise ValueError("%s %s: %s" % (flag, hf_dir, e))
    do_lower_case = imported.do_lower_case
    lines = ["%s %s: a transformers folder, imported into %s" % (flag, hf_dir, target)]
    lines += ["  " + line for line in hf_import.describe(imported)]
  return (os.path.join(target, hf_import.CHECKPOINT_NAME),
          os.path.join(target, hf_import.CONFIG_NAME),
          os.path.join(target, hf_import.VOCAB_NAME), do_lower_case, lines)


def check_same_model(bert_config_file, imported_config_file, hf_dir):
  """Raises ValueError when bert_config_file's MODEL_FIELDS differ from the imported config's."""
  try:
    with open(bert_config_file, encoding="utf-8") as f:
      given = json.load(f)
  except (OSError, ValueError) as e:
    raise ValueError("--bert_config_file %s: %s" % (bert_config_file, e))
  with open(imported_config_file, encoding="utf-8") as f:
    imported = json.load(f)
  differ = ["%s %r (the folder's: %r)" % (name, given.get(name), imported[name])
            for name in MODEL_FIELDS if given.get(name) != imported[name]]
  if differ:
    raise ValueError("--bert_config_file %s does not describe the model of --init_checkpoint %s: "
                     "%s; leave the flag out (or pass %s)" % (
                         bert_config_file, hf_dir, ", ".join(differ), imported_config_file))


def resolve(path, import_dir, bert_config_file=None, vocab_file=None, flag="--init_checkpoint"):
  """Resolved for a transformers folder `path` imported into import_dir (the programs:
  <output_dir>/IMPORT_DIR); None when path is anything else (a checkpoint prefix or directory:
  used as it is). Raises ValueError (one line)."""
  if not is_transformers_folder(path):
    return None
  if "://" in import_dir:
    raise ValueError("%s %s is a transformers folder, imported into the output directory, which "
                     "must be local (got %s): import it first with tools/import_hf.py" % (
                         flag, path, import_dir))
  checkpoint, config_file, imported_vocab, do_lower_case, lines = import_into(
      path, import_dir, flag)
  if bert_config_file:
    check_same_model(bert_config_file, config_file, path)
  return Resolved(checkpoint, bert_config_file or config_file, vocab_file or imported_vocab,
                  do_lower_case, lines)
