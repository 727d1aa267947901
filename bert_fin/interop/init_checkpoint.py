"""--init_checkpoint=<a transformers folder> for run_pretraining, run_classifier and run_ner (and
compare_checkpoints' --checkpoint): the folder is imported on the fly, by the same code as
tools/import_hf.py, into <output_dir>/imported_init/ and the run starts from that checkpoint.

  resolved = resolve(path, os.path.join(output_dir, IMPORT_DIR), bert_config_file, vocab_file)
  # None: not a folder. A new import is STAGED in a private temporary directory (TMPDIR), not
  # in the output directory: the run checks everything else against resolved.checkpoint, then
  resolved = settle(resolved)    # moved into import_dir; paths there
  # or, when a check refuses the run, discard(resolved): nothing was written to the output dir.
  # A process that exits with imports neither settled nor discarded removes them at exit; one
  # that is killed leaves bert_fin_import_<host>-<pid>+* behind, which the next import on that
  # host removes (remove_stale_stages: the owning process is gone).

An import made from the same files (import_hf.json's stamp: sizes and mtimes) is reused, so a
restarted run does not convert again. --bert_config_file / --vocab_file may then be left out: the
import's bert_config.json / vocab.txt are used. A --bert_config_file that is given must describe
the same model (MODEL_FIELDS: a google bert_config.json with hidden_act "gelu" for a folder whose
transformers config says the exact "gelu" would silently compute something else): refused
otherwise, naming the fields. A folder that cannot be imported raises ValueError (one line) before
anything is written.
"""
import atexit
import collections
import errno
import json
import os
import shutil
import stat
import tempfile

from bert_fin import io_utils
from bert_fin.interop import hf_files

IMPORT_DIR = "imported_init"
STAGE_PREFIX = "bert_fin_import_"  # + io_utils.owner_tag() + "+" + mkdtemp's letters
# BertConfig fields that change what the model computes (dropout, initializer_range do not).
MODEL_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "hidden_act", "max_position_embeddings", "type_vocab_size")

is_transformers_folder = hf_files.is_transformers_folder
# this process's staged imports not yet settled or discarded: removed at exit (a refused run)
_STAGED = set()


@atexit.register
def _discard_left_over():
  for staged_in in sorted(_STAGED):
    shutil.rmtree(staged_in, ignore_errors=True)

Resolved = collections.namedtuple("Resolved", [
    "checkpoint", "bert_config_file", "vocab_file", "do_lower_case", "lines", "staged_in",
    "import_dir"])
Resolved.__doc__ = """resolve's result: the imported checkpoint prefix, the config and vocab files
to use (given ones kept), the tokenizer's do_lower_case (None when the folder does not say), the
lines to print (what was imported, or that the import was reused); staged_in: the temporary
directory holding a new import until settle / discard (None: the paths are in import_dir
already, an earlier import reused); import_dir: where settle moves it."""


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


def _paths(directory):
  """(checkpoint prefix, config file, vocab file) of an import in directory."""
  from bert_fin.interop import hf_import  # pylint: disable=import-outside-toplevel  (TensorFlow)
  return (os.path.join(directory, hf_import.CHECKPOINT_NAME),
          os.path.join(directory, hf_import.CONFIG_NAME),
          os.path.join(directory, hf_import.VOCAB_NAME))


def import_into(hf_dir, target, flag):
  """(directory, staged_in, do_lower_case, lines): hf_dir's up-to-date earlier import in target
  (staged_in None), else a new import staged in a new temporary directory (TMPDIR) that
  settle() moves to target. Raises ValueError naming flag; nothing is left behind then."""
  from bert_fin.interop import hf_import  # pylint: disable=import-outside-toplevel  (TensorFlow)
  report = _reusable(hf_dir, target)
  if report is not None:
    return target, None, report.get("do_lower_case"), [
        "%s %s: a transformers folder; using its import in %s (made from the same files)"
        % (flag, hf_dir, target)]
  staged_in = _new_stage()
  _STAGED.add(staged_in)
  directory = os.path.join(staged_in, IMPORT_DIR)
  try:
    imported = hf_import.import_folder(hf_dir, directory)
  except OSError as e:
    _remove_staged(staged_in)
    raise ValueError("%s %s: importing into %s failed: %s" % (flag, hf_dir, staged_in, e))
  except ValueError as e:
    _remove_staged(staged_in)
    raise ValueError("%s %s: %s" % (flag, hf_dir, e))
  lines = ["%s %s: a transformers folder, imported into %s (once the run's checks pass)"
           % (flag, hf_dir, target)]
  lines += ["  " + line for line in hf_import.describe(imported)]
  return directory, staged_in, imported.do_lower_case, lines


def remove_stale_stages(root):
  """Removes root's staging directories (STAGE_PREFIX) of dead processes of this host owned by
  this user (imports killed before settle or discard); returns their paths."""
  try:
    names = os.listdir(root)
  except OSError:
    return []
  removed = []
  for name in names:
    tag, plus, _ = name[len(STAGE_PREFIX):].partition("+")
    path = os.path.join(root, name)
    if not (name.startswith(STAGE_PREFIX) and plus and io_utils.is_stale_owner(tag)):
      continue
    try:
      status = os.lstat(path)
    except OSError:
      continue
    if stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid():
      shutil.rmtree(path, ignore_errors=True)
      removed.append(path)
  return removed


def _new_stage():
  """A new staging directory in TMPDIR named for this process, after the stale ones are gone."""
  root = tempfile.gettempdir()
  remove_stale_stages(root)
  return tempfile.mkdtemp(prefix="%s%s+" % (STAGE_PREFIX, io_utils.owner_tag()), dir=root)


def _remove_staged(staged_in):
  _STAGED.discard(staged_in)
  shutil.rmtree(staged_in, ignore_errors=True)


def _move_into(source, target):
  """Moves the directory source to target (replacing a stale target), atomically: a rename, or
  across filesystems a copy into a temp dir beside target, then a rename."""
  parent = os.path.dirname(os.path.abspath(target))
  os.makedirs(parent, exist_ok=True)
  if os.path.isdir(target):
    shutil.rmtree(target)  # an import of other files (an up-to-date one is reused, not staged)
  try:
    os.rename(source, target)
    return
  except OSError as e:
    if e.errno != errno.EXDEV:
      raise
  with io_utils.work_dir(parent, prefix="import-") as work:
    copy = os.path.join(work, IMPORT_DIR)
    shutil.copytree(source, copy)
    os.rename(copy, target)


def settle(resolved):
  """resolved with a staged import moved into its import_dir (the paths there, the given
  config / vocab kept); resolved itself when nothing is staged. Raises ValueError (one line)
  when the move fails."""
  if resolved is None or resolved.staged_in is None:
    return resolved
  source = os.path.join(resolved.staged_in, IMPORT_DIR)
  try:
    _move_into(source, resolved.import_dir)
  except OSError as e:
    raise ValueError("moving the import of --init_checkpoint into %s failed: %s" % (
        resolved.import_dir, e)) from None
  finally:
    _remove_staged(resolved.staged_in)
  def moved(path):  # a path inside the staged import, now inside import_dir; a given one kept
    if not path.startswith(source + os.sep):
      return path
    return os.path.join(resolved.import_dir, os.path.relpath(path, source))
  return resolved._replace(
      staged_in=None, checkpoint=moved(resolved.checkpoint),
      bert_config_file=moved(resolved.bert_config_file), vocab_file=moved(resolved.vocab_file))


def discard(resolved):
  """Removes a staged import (the run was refused); nothing when none is staged. A process
  that exits without settle or discard removes its staged imports at exit."""
  if resolved is not None and resolved.staged_in is not None:
    _remove_staged(resolved.staged_in)


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
  """Resolved for a transformers folder `path` to be imported into import_dir (the programs:
  <output_dir>/IMPORT_DIR): its up-to-date import there, or a new one staged outside it (settle
  or discard it); None when path is anything else (a checkpoint prefix or directory: used as it
  is). Raises ValueError (one line), leaving nothing staged."""
  if not is_transformers_folder(path):
    return None
  if "://" in import_dir:
    raise ValueError("%s %s is a transformers folder, imported into the output directory, which "
                     "must be local (got %s): import it first with tools/import_hf.py" % (
                         flag, path, import_dir))
  directory, staged_in, do_lower_case, lines = import_into(path, import_dir, flag)
  checkpoint, config_file, imported_vocab = _paths(directory)
  resolved = Resolved(checkpoint, bert_config_file or config_file, vocab_file or imported_vocab,
                      do_lower_case, lines, staged_in, import_dir)
  if bert_config_file:
    try:
      check_same_model(bert_config_file, config_file, path)
    except ValueError:
      discard(resolved)
      raise
  return resolved
