"""A transformers BERT folder -> a google-named checkpoint bert_fin and google's modeling.py load.

  result = import_folder(hf_dir, output_dir)

writes output_dir/ (atomically: built in a temp directory beside it, then renamed; nothing is
written when the folder is refused):
  model.ckpt.{index,data-00000-of-00001}, checkpoint   float32 weights under google's names;
  bert_config.json   google's fields (hf_folder.py: hidden_act "gelu_erf" for transformers' exact
                     "gelu", "gelu" for its tanh forms);
  vocab.txt          the folder's vocab (vocab_size may exceed its lines: padding rows);
  import_hf.json     where it came from and what was found (the report below).

TensorFlow is imported only once the folder has been read and checked (hf_folder.read_files):
a refused folder is refused without it, in the time it takes to read the files.

Names: the state dict is first brought to transformers' current BertForPreTraining names
(`bert.` prefix added to a BertModel's embeddings / encoder / pooler, legacy LayerNorm.gamma /
beta -> weight / bias, position_ids buffers dropped); then each variable of google's pretraining
model (BertModel + MLM + NSP heads, modeling/heads.py's listing) takes the tensor hf_names.hf_name gives
its name (nn.Linear weights transposed back to [in, out]). cls.predictions.decoder.weight, tied to
the word embeddings, must equal them (refused otherwise: google's MLM output weights ARE the
embedding table); cls.predictions.decoder.bias must equal cls.predictions.bias when both are
there (-> cls/predictions/output_bias). The whole encoder (embeddings and every layer) must be
there; the heads (pooler, MLM, NSP) are imported when present and reported when not. Tensors no
google variable takes (a fine-tuning classifier ...) are reported, not imported.
"""
import collections
import datetime
import json
import os
import shutil

import numpy as np

from bert_fin import io_utils
from bert_fin.interop import hf_names
from bert_fin.interop import hf_config
from bert_fin.interop import hf_folder
from bert_fin.guard import untrusted

CHECKPOINT_NAME = "model.ckpt"
CONFIG_NAME, VOCAB_NAME, REPORT_NAME = "bert_config.json", "vocab.txt", "import_hf.json"
ImportRefused = hf_folder.ImportRefused
DECODER_WEIGHT, DECODER_BIAS = "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"
MLM_BIAS, WORD_EMBEDDINGS = "cls.predictions.bias", "bert.embeddings.word_embeddings.weight"
ENCODER_PREFIXES = ("bert/embeddings/", "bert/encoder/")
HEADS = collections.OrderedDict([("pooler", "bert/pooler/"), ("masked LM", "cls/predictions/"),
                                 ("next sentence", "cls/seq_relationship/")])
GELU_NAMES = {"gelu": "google's tanh-approximate GELU", "gelu_erf": "the exact erf GELU"}

Imported = collections.namedtuple("Imported", [
    "output_dir", "checkpoint", "config_file", "vocab_file", "config", "heads", "unfilled",
    "not_imported", "dropped", "renamed", "vocab_lines", "dtypes", "weight_files",
    "do_lower_case", "parameters"])
Imported.__doc__ = """import_folder's result: the written paths (checkpoint prefix, config, vocab),
the BertConfig, heads (names of HEADS found), unfilled (google variables of the pretraining model
the folder has no tensor for), not_imported (its tensors no google variable takes), dropped
(position_ids buffers), renamed (legacy names), vocab_lines, dtypes (stored), weight_files,
do_lower_case (the tokenizer's, or None), parameters (values written)."""


def current_names(tensors, where):
  """(tensors under transformers' current BertForPreTraining names, dropped names, renamed
  count): module docstring. Raises ImportRefused for RoBERTa weights."""
  result, dropped, renamed = {}, [], 0
  for name, value in tensors.items():
    if name.startswith("roberta."):
      raise ImportRefused("%s holds RoBERTa weights (%s): not supported, only BERT (positions "
                          "offset by padding_idx + 1)" % (where, untrusted.quote(name)))
    if name.endswith("position_ids"):
      dropped.append(name)
      continue
    new = name
    if new.split(".")[0] in ("embeddings", "encoder", "pooler"):
      new = "bert." + new
    if ".LayerNorm.gamma" in new or ".LayerNorm.beta" in new:
      new = new.replace(".LayerNorm.gamma", ".LayerNorm.weight").replace(
          ".LayerNorm.beta", ".LayerNorm.bias")
      renamed += 1
    if new in result:
      raise ImportRefused("%s holds %s twice (under two spellings)" % (where, untrusted.quote(new)))
    result[new] = value
  return result, sorted(dropped), renamed


def untie_decoder(tensors, where):
  """Checks and removes the tied decoder tensors; the decoder bias becomes cls.predictions.bias
  when that is absent. Raises ImportRefused when a tie does not hold."""
  tensors = dict(tensors)
  decoder = tensors.pop(DECODER_WEIGHT, None)
  if decoder is not None:
    embeddings = tensors.get(WORD_EMBEDDINGS)
    if embeddings is None or not np.array_equal(decoder, embeddings):
      raise ImportRefused("%s: %s differs from the word embeddings (an untied output layer); "
                          "google's masked-LM head uses the embedding table itself, so it "
                          "cannot be imported exactly" % (where, DECODER_WEIGHT))
  bias = tensors.pop(DECODER_BIAS, None)
  if bias is not None:
    if MLM_BIAS in tensors and not np.array_equal(bias, tensors[MLM_BIAS]):
      raise ImportRefused("%s: %s differs from %s (they are one tensor in transformers)" % (
          where, DECODER_BIAS, MLM_BIAS))
    tensors.setdefault(MLM_BIAS, bias)
  return tensors


def google_tensors(tensors, shapes, where):
  """({google name: float32 array}, unfilled google names, not-imported transformers names).
  Raises ImportRefused for shape mismatches and an incomplete encoder."""
  values, mismatched, used = {}, [], set()
  for name, shape in sorted(shapes.items()):
    source, transpose = hf_names.hf_name(name)
    if source not in tensors:
      continue
    value = tensors[source].T if transpose else tensors[source]
    used.add(source)
    if list(value.shape) != list(shape):
      mismatched.append("%s %s (config.json needs %s)" % (source, list(tensors[source].shape),
                                                          list(reversed(shape)) if transpose
                                                          else shape))
    values[name] = np.ascontiguousarray(value, dtype=np.float32)
  if mismatched:
    raise ImportRefused("%s: %d tensor(s) do not fit config.json: %s" % (
        where, len(mismatched), "; ".join(mismatched[:4])))
  unfilled = sorted(set(shapes) - set(values))
  missing_encoder = [name for name in unfilled if name.startswith(ENCODER_PREFIXES)]
  if missing_encoder:
    raise ImportRefused("%s lacks %d encoder weight(s) (e.g. %s): not a complete BERT "
                        "encoder for config.json" % (where, len(missing_encoder),
                                                     hf_names.hf_name(missing_encoder[0])[0]))
  return values, unfilled, sorted(set(tensors) - used)


def check_output_dir(output_dir, flag="--output_dir"):
  """Raises ValueError unless output_dir is new (or empty) and can be created."""
  io_utils.check_output_dir(output_dir, flag)
  if os.path.isdir(output_dir) and os.listdir(output_dir):
    raise ValueError("%s %s exists and is not empty: pass a new directory" % (flag, output_dir))


def _write(output_dir, folder, values, report):
  """Everything into a temp dir beside output_dir, then one rename."""
  parent = os.path.dirname(os.path.abspath(output_dir))
  os.makedirs(parent, exist_ok=True)
  with io_utils.work_dir(parent, prefix="import-") as work:
    from bert_fin.modeling import checkpoint  # pylint: disable=import-outside-toplevel
    checkpoint.write_checkpoint(os.path.join(work, CHECKPOINT_NAME), values)
    with open(os.path.join(work, CONFIG_NAME), "w", encoding="utf-8") as f:
      f.write(folder.config.to_json_string())
    with open(os.path.join(work, VOCAB_NAME), "w", encoding="utf-8") as f:
      f.write("".join(token + "\n" for token in folder.vocab))
    with open(os.path.join(work, REPORT_NAME), "w", encoding="utf-8") as f:
      json.dump(report, f, indent=2, sort_keys=True, ensure_ascii=False)
      f.write("\n")
    if os.path.isdir(output_dir):
      os.rmdir(output_dir)  # empty (checked)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(work, 0o777 & ~umask)  # mkdtemp made it owner-only
    os.rename(work, os.path.abspath(output_dir))


def source_stamp(hf_dir):
  """{file: [size, mtime_ns]} of the folder's config, vocab and weight files: an import made
  from the same stamp is up to date."""
  stamp = {}
  for name in sorted(os.listdir(hf_dir)):
    path = os.path.join(hf_dir, name)
    if os.path.isfile(path) and (name.endswith((".json", ".txt", ".bin", ".safetensors"))):
      status = os.stat(path)
      stamp[name] = [status.st_size, status.st_mtime_ns]
  return stamp


def convert(folder):
  """(google-named values, unfilled, not_imported, dropped, renamed) of a read Folder."""
  tensors, dropped, renamed = current_names(folder.tensors, folder.hf_dir)
  tensors = untie_decoder(tensors, folder.hf_dir)
  from bert_fin.modeling import heads  # pylint: disable=import-outside-toplevel
  shapes = heads.pretraining_variable_shapes(folder.config)
  values, unfilled, not_imported = google_tensors(tensors, shapes, folder.hf_dir)
  return values, unfilled, not_imported, dropped, renamed


def import_folder(hf_dir, output_dir, replace=False, ceilings=hf_config.DEFAULT_CEILINGS):
  """Reads, checks and converts hf_dir, then writes output_dir (module docstring); returns
  Imported. Raises ImportRefused / ValueError (one line) before anything is written; replace:
  an existing output_dir is replaced (the programs' on-the-fly import), else it must be new;
  ceilings: the largest model accepted (hf_config.Ceilings)."""
  if replace:
    io_utils.check_output_dir(output_dir, "--output_dir")
  else:
    check_output_dir(output_dir)
  folder = hf_folder.read_folder(hf_dir, ceilings)
  values, unfilled, not_imported, dropped, renamed = convert(folder)
  heads = [head for head, prefix in HEADS.items() if any(n.startswith(prefix) for n in values)]
  imported = Imported(
      output_dir, os.path.join(output_dir, CHECKPOINT_NAME),
      os.path.join(output_dir, CONFIG_NAME), os.path.join(output_dir, VOCAB_NAME),
      folder.config, heads, unfilled, not_imported, dropped, renamed, len(folder.vocab),
      folder.dtypes, [os.path.basename(p) for p in folder.weight_files], folder.do_lower_case,
      sum(v.size for v in values.values()))
  report = dict(imported._asdict(), config=folder.config.to_dict(),
                hf_dir=os.path.abspath(hf_dir), source=source_stamp(hf_dir),
                created=datetime.datetime.now().isoformat(timespec="seconds"))
  if replace and os.path.isdir(output_dir):
    shutil.rmtree(output_dir)
  _write(output_dir, folder, values, report)
  return imported


def describe(imported):
  """The lines the importer prints: heads, vocab, dtype, gelu, what was not filled / imported."""
  config = imported.config
  lines = ["%s (%d layers, hidden %d, %d heads): %d parameters from %s (stored %s)" % (
      ", ".join(["encoder"] + imported.heads), config.num_hidden_layers, config.hidden_size,
      config.num_attention_heads, imported.parameters, ", ".join(imported.weight_files),
      "/".join(imported.dtypes) + (", upcast to float32" if set(imported.dtypes) & {
          "float16", "bfloat16", "float64"} else ""))]
  lines.append("vocab: %d tokens, vocab_size %d%s" % (
      imported.vocab_lines, config.vocab_size,
      " (rows %d..%d are padding no token uses)" % (imported.vocab_lines, config.vocab_size - 1)
      if imported.vocab_lines < config.vocab_size else ""))
  lines.append("hidden_act %s: %s" % (config.hidden_act, GELU_NAMES.get(
      config.hidden_act, config.hidden_act)) + (
          " (google's own modeling.py knows only \"gelu\", the tanh form: with it the logits "
          "move by ~1e-3)" if config.hidden_act == "gelu_erf" else ""))
  if imported.do_lower_case is not None:
    lines.append("tokenizer: do_lower_case=%s (pass --do_lower_case=%s to "
                 "create_pretraining_data and the fine-tuning programs)" % (
                     str(imported.do_lower_case).lower(), str(imported.do_lower_case).lower()))
  if imported.renamed or imported.dropped:
    lines.append("legacy names renamed: %d; buffers dropped: %s" % (
        imported.renamed, ", ".join(imported.dropped) or "none"))
  groups = collections.OrderedDict()
  for name in imported.unfilled:
    head = next((h for h, p in HEADS.items() if name.startswith(p)), "other")
    groups.setdefault(head, []).append(name)
  for head, names in groups.items():
    lines.append("not filled (no %s in the folder; they start from their initializer): %s" % (
        head, ", ".join(names)))
  if imported.not_imported:
    lines.append("not imported (no google variable takes them): %s" % ", ".join(
        imported.not_imported))
  return lines
