"""Every tool's --help: exit 0, every option has help text and shows its default."""
import os
import subprocess
import sys

import pytest

from bert_fin.cli import build_vocab
from bert_fin.cli import clean_corpus
from bert_fin.cli import shard_corpus

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = sorted(name for name in os.listdir(os.path.join(REPO, "tools")) if name.endswith(".py"))


@pytest.mark.parametrize("parser_module", [build_vocab, clean_corpus, shard_corpus])
def test_every_option_has_help_and_its_default_is_shown(parser_module):
  parser = parser_module.build_parser()
  text = parser.format_help()
  for action in parser._actions:  # pylint: disable=protected-access
    assert action.help, action.dest
    if action.option_strings and action.default is not None and action.dest != "help":
      assert "(default: %s)" % action.default in " ".join(text.split()), action.dest


@pytest.mark.parametrize("tool", TOOLS)
def test_help_exits_zero_and_lists_every_option(tool):
  proc = subprocess.run([sys.executable, os.path.join(REPO, "tools", tool), "--help"],
                        capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "usage:" in proc.stdout and "(default: " in proc.stdout
