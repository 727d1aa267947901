"""Checks the serving-export tests share: a script run where some packages cannot be imported,
and a refusal of bert-fin-export-serving (one line, exit 2)."""
import json
import os
import subprocess
import sys

from bert_fin.cli import export_serving as cli

BLOCKER = ("import sys\nclass _Block:\n  def find_spec(self, name, path=None, target=None):\n"
           "    if name.split('.')[0] in BLOCKED: raise ImportError('blocked: ' + name)\n"
           "sys.meta_path.insert(0, _Block())\n")


def run_blocked(blocked, script, cwd):
  """The JSON the script prints last, run by a fresh Python in `cwd` where the top-level
  packages `blocked` (list of str) cannot be imported and PYTHONPATH is empty."""
  code = "BLOCKED = %r\n%s%s" % (blocked, BLOCKER, script)
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd,
                        timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                              PYTHONPATH="", OMP_NUM_THREADS="1"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def refused(capsys, argv, *words):
  """The one error line of bert-fin-export-serving `argv`, which must exit 2 naming `words`."""
  assert cli.main(argv) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and err.startswith(cli.PROG + ": error: ")
  for word in words:
    assert word in err, err
  return err
