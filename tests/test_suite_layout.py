"""The suite's own layout: tests/ holds test modules and conftest.py only; what several share
lives in tests/helpers (modules named for what they hold); no test or helper module imports a test
module; and the repository's path comes from helpers.REPO (defined once, in helpers/__init__.py)
instead of each module computing it and editing sys.path (conftest.py does that once). Read with
ast, nothing imported. No module is excepted."""
import ast
import os

from helpers import REPO, TESTS

HELPERS = os.path.join(TESTS, "helpers")


def _test_modules():
  return sorted(name[:-3] for name in os.listdir(TESTS)
                if name.startswith("test_") and name.endswith(".py"))


def _helper_modules():
  """helpers/<name>.py as "helpers/<name>", but __init__ (where REPO is defined)."""
  return sorted("helpers/" + name[:-3] for name in os.listdir(HELPERS)
                if name.endswith(".py") and name != "__init__.py")


def _tree(module):
  with open(os.path.join(TESTS, module + ".py"), encoding="utf-8") as f:
    return ast.parse(f.read())


def imported_test_modules(tree):
  """Names of the test_* modules a module's source imports (at top level or in functions, by an
  import statement or by pytest.importorskip("name"))."""
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      names.add(node.module)
    elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
          and isinstance(node.args[0].value, str)
          and getattr(node.func, "attr", getattr(node.func, "id", None)) == "importorskip"):
      names.add(node.args[0].value)
  return {name.split(".")[0] for name in names if name.split(".")[0].startswith("test_")}


def computes_repo_or_edits_sys_path(tree):
  """True when a module assigns REPO itself or calls sys.path.insert/append."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "REPO" for t in node.targets):
      return True
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("insert", "append")
        and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "path"
        and isinstance(node.func.value.value, ast.Name) and node.func.value.value.id == "sys"):
      return True
  return False


def test_tests_directory_holds_only_test_modules_and_conftest():
  loose = sorted(name for name in os.listdir(TESTS) if name.endswith(".py")
                 and not name.startswith("test_") and name != "conftest.py")
  assert loose == [], "shared test code goes to tests/helpers/ (a module named for what it holds)"
  assert _helper_modules(), "tests/helpers/ has no module"


def test_no_test_module_imports_another():
  found = {}
  for module in _test_modules() + _helper_modules():
    imported = imported_test_modules(_tree(module))
    if imported:
      found[module] = imported
  assert found == {}, (
      "a test module imports another: move what it takes to tests/helpers (a module named for "
      "what it holds) and import it from there")


def test_repo_path_and_sys_path_come_from_helpers_and_conftest():
  found = {module for module in _test_modules() + _helper_modules()
           if computes_repo_or_edits_sys_path(_tree(module))}
  assert found == set(), (
      "use `from helpers import REPO` (or TESTS, FIXTURES, ...) and leave sys.path to conftest.py")
  assert os.path.isfile(os.path.join(REPO, "run_pretraining.py"))


def test_the_checks_see_imports_and_path_edits_anywhere_in_a_module():
  source = ("import os\nimport test_a\ndef f():\n  from test_b.sub import x\n"
            "  from . import test_c\n  sys.path.insert(0, 'x')\n"
            "  pytest.importorskip('test_d')\n  pytest.importorskip('nvidia.dali')\n")
  tree = ast.parse(source)
  assert imported_test_modules(tree) == {"test_a", "test_b", "test_d"}
  assert computes_repo_or_edits_sys_path(tree)
  assert computes_repo_or_edits_sys_path(ast.parse("REPO = 'x'\n"))
  assert not computes_repo_or_edits_sys_path(ast.parse("from helpers import REPO\nx = [REPO]\n"))
