"""Where training finds the masking_config.MaskingConfig of dynamic-masking records: one resolved place.

create_pretraining_data --masking=dynamic writes the config into its stats JSON
(`<output prefix>.stats.json`, key "dynamic_masking": masking_config.config_to_json), beside the records,
with every record file it wrote under "output_files"; tools/pack_records.py copies the block of
its inputs' stats JSON into its own. A run reads it:

  explicit (--dynamic_masking_config=PATH): the "dynamic_masking" block of that JSON file (a
    stats JSON, or any JSON holding the block), for every file;
  otherwise: for each record file, the `*.stats.json` in its directory whose "output_files" lists
    the file's name and that holds a "dynamic_masking" block; every file needs one and all of
    them must be the same config.

Every failure is a ValueError of one line naming the file and what to pass. No TensorFlow here.
"""
import glob
import json
import os

from bert_fin.records import masking_config

BLOCK = "dynamic_masking"
FLAG = "--dynamic_masking_config"
STATS_SUFFIX = ".stats.json"  # data/writer.py's; repeated here to keep this module light


def _load(path):
  """The JSON object of path, or None when it cannot be read as one."""
  try:
    with open(path, encoding="utf-8") as f:
      obj = json.load(f)
  except (OSError, ValueError):
    return None
  return obj if isinstance(obj, dict) else None


def _config_of(block, where):
  try:
    config = masking_config.config_from_json(block)
  except (KeyError, TypeError, ValueError) as e:
    raise ValueError("%s: its %r block is not a masking config (%s: %s)"
                     % (where, BLOCK, type(e).__name__, e)) from e
  if not config.random_ids or config.max_predictions_per_seq < 1 or \
      not 0 < config.masked_lm_prob <= 1:
    raise ValueError("%s: its %r block is not a usable masking config (%s)" % (where, BLOCK, block))
  return config


def stats_listing(path):
  """Finds the `*.stats.json` beside a record file that lists it in output_files.

  Args:
    path: a record file.

  Returns:
    (stats JSON path, its dict), preferring one with a dynamic_masking block; (None, None) when
    there is none. Unreadable JSON files are passed over.
  """
  directory = os.path.dirname(path) or "."
  name = os.path.basename(path)
  found = (None, None)
  for stats_path in sorted(glob.glob(os.path.join(glob.escape(directory), "*" + STATS_SUFFIX))):
    stats = _load(stats_path)
    if not stats or not isinstance(stats.get("output_files"), dict):
      continue
    if name in {os.path.basename(f) for f in stats["output_files"]}:
      if stats.get(BLOCK):
        return stats_path, stats
      found = (stats_path, stats)
  return found


def block_of(files):
  """The one dynamic_masking block the stats JSONs beside `files` hold (pack_records copies it).

  Args:
    files: record file paths.

  Returns:
    the block (a dict), or None when a file has none or they differ (training then asks for
    the flag).
  """
  blocks = []
  for path in files:
    _, stats = stats_listing(path)
    if not stats or not stats.get(BLOCK):
      return None
    blocks.append(stats[BLOCK])
  if not blocks or any(b != blocks[0] for b in blocks):
    return None
  return blocks[0]


def resolve(files, explicit=None):
  """Finds the masking config of dynamic-masking record files (see the module docstring).

  Args:
    files: the record file paths.
    explicit: the --dynamic_masking_config path, or None.

  Returns:
    (MaskingConfig, where it came from: the explicit path or the stats JSON's path).

  Raises:
    ValueError: one line, naming the fix: no readable block, an unusable config, files with
      different configs, or no files.
  """
  if explicit:
    obj = _load(explicit)
    if obj is None:
      raise ValueError("%s=%s: not a readable JSON file" % (FLAG, explicit))
    if not obj.get(BLOCK):
      raise ValueError("%s=%s: no %r block (pass the stats JSON create_pretraining_data "
                       "--masking=dynamic wrote beside the records)" % (FLAG, explicit, BLOCK))
    return _config_of(obj[BLOCK], "%s=%s" % (FLAG, explicit)), explicit
  config, source = None, None
  for path in files:
    stats_path, stats = stats_listing(path)
    if not stats or not stats.get(BLOCK):
      raise ValueError(
          "%s: dynamic-masking records need their masking config ([MASK] id, random ids, "
          "masked_lm_prob, max_predictions_per_seq), and %s. Keep the stats JSON "
          "create_pretraining_data --masking=dynamic wrote beside them, or pass %s=PATH_TO_IT"
          % (path, "no *.stats.json beside it lists it" if stats is None else
             "%s has no %r block" % (os.path.basename(stats_path), BLOCK), FLAG))
    this = _config_of(stats[BLOCK], stats_path)
    if config is not None and this != config:
      raise ValueError("%s and %s hold different dynamic masking configs: train on records of one "
                       "creation config, or pass %s=PATH to choose one" % (source, stats_path, FLAG))
    config, source = this, stats_path
  if config is None:
    raise ValueError("no dynamic-masking record files to find a masking config for")
  return config, source
