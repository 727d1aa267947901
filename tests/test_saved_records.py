"""io_utils.read_saved, the one reader of the records a run wrote earlier (finetuned.py's
classifier_config.json and optimizer.json, the stream's data_order.json): the default when the file
is absent, parse(text) when it reads, and a bad file refused with the caller's one-line message,
chained to the parse error."""
import json

import pytest

from bert_fin import io_utils
from bert_fin.finetune import finetuned


def test_read_saved_gives_the_default_the_parsed_text_or_the_callers_refusal(tmp_path):
  path = str(tmp_path / "record.json")
  refuse = lambda e: ValueError("%s: not a record (%s)" % (path, e))  # noqa: E731
  assert io_utils.read_saved(path, json.loads, refuse) is None
  assert io_utils.read_saved(path, json.loads, refuse, default="before") == "before"
  (tmp_path / "record.json").write_text('{"k": 3}', encoding="utf-8")
  assert io_utils.read_saved(path, lambda text: json.loads(text)["k"], refuse) == 3
  with pytest.raises(ValueError, match="record.json: not a record") as error:
    io_utils.read_saved(path, lambda text: json.loads(text)["missing"], refuse)
  assert isinstance(error.value.__cause__, KeyError)
  (tmp_path / "record.json").write_bytes(b"\xff\xfe{")  # not UTF-8: refused, not a traceback
  with pytest.raises(ValueError, match="not a record"):
    io_utils.read_saved(path, json.loads, refuse)


def test_a_bad_pooling_or_optimizer_record_is_refused_naming_the_file(tmp_path):
  assert finetuned.read_pooling(str(tmp_path)) is None
  (tmp_path / finetuned.CONFIG_FILE).write_text('{"pool": "mean"}', encoding="utf-8")
  with pytest.raises(ValueError, match="classifier_config.json: not a run_classifier config"):
    finetuned.read_pooling(str(tmp_path))
  (tmp_path / finetuned.CONFIG_FILE).write_text('{"pooling": "mean"}', encoding="utf-8")
  assert finetuned.read_pooling(str(tmp_path)) == "mean"
  # a checkpoint in the directory: its optimizer is the record's, else adamweightdecay
  (tmp_path / "model.ckpt-1.index").write_bytes(b"")
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-1"\n')
  finetuned.check_optimizer(str(tmp_path), finetuned.OPTIMIZER_BEFORE_THE_FILE)
  with pytest.raises(ValueError, match="--optimizer=adamweightdecay, this run asks for "
                     "--optimizer=lamb"):
    finetuned.check_optimizer(str(tmp_path), "lamb")
  (tmp_path / finetuned.OPTIMIZER_FILE).write_text("not json", encoding="utf-8")
  with pytest.raises(ValueError, match="optimizer.json: not an optimizer record"):
    finetuned.check_optimizer(str(tmp_path), "lamb")
  (tmp_path / finetuned.OPTIMIZER_FILE).write_text('{"optimizer": "lamb"}', encoding="utf-8")
  finetuned.check_optimizer(str(tmp_path), "lamb")
