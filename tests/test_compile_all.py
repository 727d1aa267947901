"""Every Python file of the repository compiles and every shell script parses: bench/, tools/,
samples/ and the CLIs included, which nothing else imports (an IndentationError in a bench script
once went unnoticed until `make bench` stopped on it)."""
import os
import subprocess

import pytest

from helpers import REPO

SKIP_DIRS = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache"}


def repository_files(suffix):
  """Paths (relative to REPO) of the repository's files ending in suffix: git's tracked and
  not-ignored untracked files, or a walk that skips SKIP_DIRS where there is no git checkout."""
  try:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "-z", "--", "*" + suffix], cwd=REPO, capture_output=True, check=True,
                            timeout=60).stdout.decode("utf-8").split("\0")
    return sorted(path for path in listed if path and os.path.isfile(os.path.join(REPO, path)))
  except (OSError, subprocess.CalledProcessError):
    paths = []
    for directory, subdirs, files in os.walk(REPO):
      subdirs[:] = [d for d in subdirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
      paths += [os.path.relpath(os.path.join(directory, f), REPO) for f in files
                if f.endswith(suffix)]
    return sorted(paths)


def test_every_python_file_compiles():
  paths = repository_files(".py")
  assert {"run_pretraining.py", "bench/bench_modeling.py", "tools/build_vocab.py",
          "samples/make_sentiment.py", "bert_fin/modeling/__init__.py"} <= set(paths), paths
  failures = []
  for path in paths:
    with open(os.path.join(REPO, path), "rb") as f:
      source = f.read()
    try:
      compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:  # IndentationError is a SyntaxError; ValueError: NUL
      failures.append("%s:%s: %s: %s" % (path, getattr(e, "lineno", "?"), type(e).__name__,
                                         getattr(e, "msg", e)))
  assert not failures, "%d file(s) do not compile:\n%s" % (len(failures), "\n".join(failures))


@pytest.mark.parametrize("path", repository_files(".sh"))
def test_shell_script_parses(path):
  proc = subprocess.run(["bash", "-n", os.path.join(REPO, path)], capture_output=True, text=True,
                        timeout=60)
  assert proc.returncode == 0, "%s: %s" % (path, proc.stderr.strip())
