"""Architecture guards: the package order of docs/layout.md (no import runs back up it, no circle
between packages), no import circle inside bert_fin, modeling/ independent of data/, no module
over 500 lines. The import graph is read from the source with ast (every import statement,
including the ones inside functions), so nothing is imported to check it."""
import ast
import functools
import os
import re

import pytest

from helpers import REPO

PACKAGE = "bert_fin"
MAX_LINES = 500
MAX_MODULES_PER_FOLDER = 12  # past that a folder's name no longer tells a newcomer what is inside


def module_files(root, package):
  """{module name: path} of every .py file under root/package (a package is its __init__)."""
  modules = {}
  for directory, _, files in os.walk(os.path.join(root, package)):
    for name in files:
      if not name.endswith(".py"):
        continue
      path = os.path.join(directory, name)
      parts = os.path.relpath(path, root)[:-len(".py")].split(os.sep)
      if parts[-1] == "__init__":
        parts.pop()
      modules[".".join(parts)] = path
  return modules


def _resolve(name, modules):
  """The longest prefix of dotted `name` that is a module of the package, or None."""
  parts = name.split(".")
  while parts:
    candidate = ".".join(parts)
    if candidate in modules:
      return candidate
    parts.pop()
  return None


def imports_of(module, path, modules):
  """Modules of the package that `module` imports (any import statement anywhere in the file)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  is_package = os.path.basename(path) == "__init__.py"
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        anchor = module.split(".")[:len(module.split(".")) - node.level + (1 if is_package else 0)]
        base = ".".join(anchor + ([base] if base else []))
      # `from a.b import c` depends on the module a.b.c when c is one, else on a.b (a name there)
      names = [base + "." + alias.name if base + "." + alias.name in modules else base
               for alias in node.names]
    else:
      continue
    for name in names:
      target = _resolve(name, modules)
      if target and target != module:
        found.add(target)
  return found


def import_graph(root, package):
  modules = module_files(root, package)
  return {module: imports_of(module, path, modules) for module, path in modules.items()}


@functools.lru_cache(maxsize=None)
def _repo_graph():
  """import_graph of bert_fin, read once for the tests of this file (none changes it)."""
  return import_graph(REPO, PACKAGE)


def find_cycles(graph):
  """Strongly connected components with more than one module (Tarjan), each sorted."""
  index, low, on_stack, stack, cycles = {}, {}, set(), [], []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for target in sorted(graph.get(node, ())):
      if target not in index:
        visit(target)
        low[node] = min(low[node], low[target])
      elif target in on_stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      if len(component) > 1:
        cycles.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return cycles


def test_no_import_circle_in_the_package():
  graph = _repo_graph()
  assert len(graph) > 40 and graph["bert_fin.data.create.fast"]  # the walk found the package
  assert find_cycles(graph) == []


def test_modeling_imports_nothing_from_data():
  graph = _repo_graph()
  offending = {module: sorted(t for t in targets if t.startswith("bert_fin.data"))
               for module, targets in graph.items() if module.startswith("bert_fin.modeling")}
  assert {m: t for m, t in offending.items() if t} == {}


def test_the_guard_finds_circles_including_lazy_and_relative_imports(tmp_path):
  package = tmp_path / "pkg"
  (package / "sub").mkdir(parents=True)
  (package / "__init__.py").write_text("")
  (package / "a.py").write_text("from pkg import b\n")
  (package / "b.py").write_text("def f():\n  from pkg.sub import c\n")  # lazy import
  (package / "sub" / "__init__.py").write_text("")
  (package / "sub" / "c.py").write_text("from .. import a\nimport os\n")  # relative import
  (package / "d.py").write_text("import pkg.a\n")
  graph = import_graph(str(tmp_path), "pkg")
  assert graph["pkg.sub.c"] == {"pkg.a"} and graph["pkg.d"] == {"pkg.a"}
  assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
  (package / "sub" / "c.py").write_text("import os\n")
  assert find_cycles(import_graph(str(tmp_path), "pkg")) == []


@pytest.mark.parametrize("top", [PACKAGE, "tools", "bench", "tests"])
def test_no_module_over_500_lines(top):
  too_long = {}
  for directory, _, files in os.walk(os.path.join(REPO, top)):
    for name in files:
      if name.endswith((".py", ".c", ".h")):
        path = os.path.join(directory, name)
        with open(path, encoding="utf-8") as f:
          lines = sum(1 for _ in f)
        if lines > MAX_LINES:
          too_long[os.path.relpath(path, REPO)] = lines
  assert too_long == {}


def test_no_package_folder_holds_more_than_12_modules():
  """Every folder of the package holds at most 12 modules (__init__.py not counted): a concern
  that outgrows that becomes a sub-package named for it (text/dedup/, training/graph/)."""
  crowded = {}
  for directory, _, files in os.walk(os.path.join(REPO, PACKAGE)):
    modules = [name for name in files if name.endswith(".py") and name != "__init__.py"]
    if len(modules) > MAX_MODULES_PER_FOLDER:
      crowded[os.path.relpath(directory, REPO)] = len(modules)
  assert crowded == {}


def test_the_layout_page_names_every_module():
  """docs/layout.md's map (its second fenced block) names each module of the package (as `name`
  or `name.py`); README.md's Layout names each package folder."""
  import re  # pylint: disable=import-outside-toplevel
  with open(os.path.join(REPO, "docs", "layout.md"), encoding="utf-8") as f:
    page = f.read()
  fences = [m.start() for m in re.finditer("```", page)]
  layout = page[fences[2]:fences[3]]
  words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", layout))
  modules = module_files(REPO, PACKAGE)
  missing = sorted(name for name in modules
                   if name.count(".") > 0 and name.rsplit(".", 1)[1] not in words)
  assert missing == []
  with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
    readme = f.read()
  readme_layout = readme[readme.index("## Layout"):readme.index("## The pipeline")]
  folders = sorted({name.split(".")[1] for name in modules if name.count(".") > 1})
  assert [folder for folder in folders if folder + "/" not in readme_layout] == []


def test_the_library_imports_nothing_from_the_command_line_tools():
  graph = _repo_graph()
  offending = {module: sorted(t for t in targets if t.startswith("bert_fin.cli"))
               for module, targets in graph.items() if not module.startswith("bert_fin.cli")}
  assert {m: t for m, t in offending.items() if t} == {}


def package_order(page):
  """{package or top module: its line number} of the "## Package order" list of docs/layout.md
  (lines `N. `name` `name/`: what they are`)."""
  section = page[page.index("## Package order"):]
  section = section[:section.index("\n## ", 1)]
  order = {}
  for line in section.splitlines():
    item = re.match(r"(\d+)\. (.*?):", line)
    if item:
      for name in re.findall(r"`([A-Za-z_]+)/?`", item.group(2)):
        if name in order:
          raise ValueError("%s is on lines %d and %s of the package order" % (
              name, order[name], item.group(1)))
        order[name] = int(item.group(1))
  return order


def package_of(module):
  """The package or top module of bert_fin a dotted module name belongs to (None: bert_fin)."""
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else None


def imports_against(graph, order):
  """Sorted (importer, imported) module pairs whose packages differ and where the imported one's
  package is not on a lower line of `order` than the importer's."""
  wrong = []
  for module, targets in graph.items():
    for target in targets:
      here, there = package_of(module), package_of(target)
      if here and there and here != there and order[there] >= order[here]:
        wrong.append((module, target))
  return sorted(wrong)


def package_graph(graph):
  """{package: packages its modules import}: the module graph with each module as its package."""
  packages = {}
  for module, targets in graph.items():
    here = package_of(module)
    if here:
      packages.setdefault(here, set()).update(
          package_of(t) for t in targets if package_of(t) not in (None, here))
  return packages


def _layout_order():
  with open(os.path.join(REPO, "docs", "layout.md"), encoding="utf-8") as f:
    return package_order(f.read())


def test_the_package_order_names_every_package_once_and_only_packages_that_exist():
  order = _layout_order()
  present = {package_of(module) for module in module_files(REPO, PACKAGE)} - {None}
  assert len(order) > 10 and sorted(set(order) - present) == []
  assert sorted(present - set(order)) == []  # a new package or top module takes a line


def test_no_import_runs_back_up_the_package_order():
  """Every import of bert_fin goes to its own package or to one on a lower line of
  docs/layout.md's package order (imports inside functions count: ast reads them all)."""
  graph = _repo_graph()
  assert imports_against(graph, _layout_order()) == []


def test_no_circle_between_packages():
  assert find_cycles(package_graph(_repo_graph())) == []


def test_the_order_guard_finds_an_import_back_up_and_a_circle(tmp_path):
  page = ("## Package order\n\n1. `low` `base/`: below\n2. `mid/`: the middle\n"
          "3. `top/`: above\n\n## Next\n")
  order = package_order(page)
  assert order == {"low": 1, "base": 1, "mid": 2, "top": 3}
  with pytest.raises(ValueError, match="mid is on lines 2 and 3"):
    package_order(page.replace("`top/`", "`mid/`"))
  package = tmp_path / "pkg"
  for folder in ("base", "mid", "top"):
    (package / folder).mkdir(parents=True)
    (package / folder / "__init__.py").write_text("")
  (package / "__init__.py").write_text("")
  (package / "low.py").write_text("import os\n")
  (package / "base" / "files.py").write_text("from pkg import low\n")  # same line: refused
  (package / "mid" / "a.py").write_text("from pkg.base import files\nfrom pkg.mid import b\n")
  (package / "mid" / "b.py").write_text("def f():\n  from pkg.top import c\n")  # lazy, back up
  (package / "top" / "c.py").write_text("from ..mid import a\n")
  graph = {module.replace("pkg.", "bert_fin.", 1): {t.replace("pkg.", "bert_fin.", 1)
                                                    for t in targets}
           for module, targets in import_graph(str(tmp_path), "pkg").items()}
  assert imports_against(graph, order) == [("bert_fin.base.files", "bert_fin.low"),
                                           ("bert_fin.mid.b", "bert_fin.top.c")]
  assert find_cycles(package_graph(graph)) == [["mid", "top"]]
