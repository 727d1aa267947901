"""The masking config of dynamic-masking records: the contract between the data tool that writes
them and the training that masks them.

create_pretraining_data --masking=dynamic writes it into its stats JSON (key "dynamic_masking",
config_to_json); training finds it there (masking_source.py) and masks in the graph with it
(input/dynamic_masking.py). data/create/masking.py builds one from a vocab.
"""
import collections

# What masking needs besides the sequence: the [MASK] id, the ids a random replacement draws from
# (sorted), google's masked_lm_prob and the max_predictions_per_seq cap.
MaskingConfig = collections.namedtuple("MaskingConfig", [
    "mask_id", "random_ids", "masked_lm_prob", "max_predictions_per_seq"])


def config_to_json(config):
  """MaskingConfig -> JSON-able dict; the random ids as sorted [begin, end) ranges."""
  ranges = []
  for i in config.random_ids:
    if ranges and ranges[-1][1] == i:
      ranges[-1][1] = i + 1
    else:
      ranges.append([i, i + 1])
  return {"mask_id": config.mask_id, "random_id_ranges": ranges,
          "masked_lm_prob": config.masked_lm_prob,
          "max_predictions_per_seq": config.max_predictions_per_seq}


def config_from_json(obj):
  """config_to_json's dict -> MaskingConfig.

  Raises:
    KeyError, TypeError, ValueError: obj is not such a dict (masking_source reports them).
  """
  random_ids = [i for begin, end in obj["random_id_ranges"] for i in range(begin, end)]
  return MaskingConfig(obj["mask_id"], random_ids, obj["masked_lm_prob"],
                       obj["max_predictions_per_seq"])
