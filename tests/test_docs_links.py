"""README.md and docs/*.md: every link to a repository path resolves (to the file and, for
`page.md#anchor`, to a heading of that page, as GitHub names headings), every docs/ page is
reachable from the README, and no tracked text file names a path of the development machine's
work tree (MACHINE_PATH below): the repository must work wherever it is checked out."""
import os
import re
import subprocess

import pytest

from helpers import REPO

DOCS = os.path.join(REPO, "docs")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
MACHINE_PATH = "/" + "work" + "/"  # spelled in two pieces so this file does not match itself


def markdown_pages():
  return [os.path.join(REPO, "README.md")] + sorted(
      os.path.join(DOCS, name) for name in os.listdir(DOCS) if name.endswith(".md"))


def prose(path):
  """The page without fenced blocks and code spans (what they hold is not a link)."""
  with open(path, encoding="utf-8") as f:
    return CODE_SPAN.sub("", FENCE.sub("", f.read()))


def github_anchors(path):
  """The anchors GitHub gives the page's headings: lower case, punctuation dropped (letters of any
  script, digits, '_' and '-' kept), spaces to '-', repeats numbered -1, -2, ..."""
  with open(path, encoding="utf-8") as f:
    text = FENCE.sub("", f.read())
  anchors, seen = set(), {}
  for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.M):
    slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    anchors.add(slug if count == 0 else "%s-%d" % (slug, count))
  return anchors


def repo_links(path):
  """(target as written, resolved file, anchor or None) of every link that is not a URL."""
  for target in LINK.findall(prose(path)):
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
      continue
    file_part, _, anchor = target.partition("#")
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
    yield target, resolved, anchor or None


def test_the_anchor_rule_matches_github():
  """The slug rule on headings of the shapes these pages use (GitHub's ids, read off github.com)."""
  import tempfile  # pylint: disable=import-outside-toplevel
  with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, encoding="utf-8") as f:
    f.write("# Fine-tune: `run_classifier.py`\n## Resume, epochs, --seed and --deterministic\n"
            "```\n# not a heading\n```\n## What it measured on `samples/sentiment` (H=64)\n## Notes\n"
            "## Notes\n")
  try:
    assert github_anchors(f.name) == {"fine-tune-run_classifierpy",
                                      "resume-epochs---seed-and---deterministic",
                                      "what-it-measured-on-samplessentiment-h64", "notes", "notes-1"}
  finally:
    os.unlink(f.name)


@pytest.mark.parametrize("page", markdown_pages(), ids=lambda p: os.path.relpath(p, REPO))
def test_every_link_to_the_repository_resolves(page):
  broken = []
  for target, resolved, anchor in repo_links(page):
    inside = os.path.commonpath([REPO, os.path.abspath(resolved)]) == REPO
    if not inside or not os.path.exists(resolved):
      broken.append(target)
    elif anchor is not None and (not resolved.endswith(".md")
                                 or anchor not in github_anchors(resolved)):
      broken.append(target)
  assert broken == []


def test_every_docs_page_is_linked_from_the_readme():
  linked = {resolved for _, resolved, _ in repo_links(os.path.join(REPO, "README.md"))}
  pages = [p for p in markdown_pages() if os.path.dirname(p) == DOCS]
  assert pages and [os.path.relpath(p, REPO) for p in pages if p not in linked] == []


def tracked_files():
  try:
    out = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True, check=True)
    names = [n for n in out.stdout.decode("utf-8").split("\0") if n]
  except (OSError, subprocess.CalledProcessError):
    names = []
  if names:
    return [os.path.join(REPO, n) for n in names]
  skip = {".git", ".venv", "build", "dist", "out", "demo_out", "__pycache__", ".pytest_cache"}
  found = []
  for directory, dirs, files in os.walk(REPO):
    dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
    found += [os.path.join(directory, f) for f in files]
  return found


def test_no_tracked_text_file_names_a_path_of_this_machine():
  offending = []
  for path in tracked_files():
    if not os.path.isfile(path):
      continue
    with open(path, "rb") as f:
      data = f.read()
    if b"\0" not in data and MACHINE_PATH.encode() in data:
      offending.append(os.path.relpath(path, REPO))
  assert len(tracked_files()) > 50 and offending == []


HISTORY = re.compile(r"\b(this|last|previous|next) round\b|\.\./shared", re.I)


@pytest.mark.parametrize("page", markdown_pages(), ids=os.path.basename)
def test_docs_speak_to_users_without_history_or_team_paths(page):
  """A user reads the README and docs/ on their own machine: no "this round" history, no path to
  the team's material beside the checkout (../shared); measurements carry a date instead."""
  with open(page, encoding="utf-8") as f:
    found = [line.strip() for line in f if HISTORY.search(line)]
  assert found == []
