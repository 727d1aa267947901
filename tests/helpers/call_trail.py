"""A program's calls followed by reading its source, as a reader follows them: from a function,
every call `module.f(...)` of a bert_fin module the file imports (at the top or inside a
function), `f(...)` of a function or class of the same module or imported by name, including the
functions nested in it (a model_fn built and returned). A call of a parameter (a callback) or of
a name bound to an object's method is not followed: there a reader loses the trail.

  found = follow(REPO, "run_ner.py")        {(module, function): the caller it was reached from}
  path(found, "optimization", "make_optimizer")   [(module, function), ...] from main, or None
"""
import ast
import collections
import os

SCRIPT = "<script>"


class _Source:
  """The modules of one repository, parsed once each: their import aliases and top-level
  functions / classes."""

  def __init__(self, repo, script):
    self.repo, self.script, self.parsed = repo, script, {}

  def path(self, module):
    if module == SCRIPT:
      return os.path.join(self.repo, self.script)
    base = os.path.join(self.repo, *module.split("."))
    return os.path.join(base, "__init__.py") if os.path.isdir(base) else base + ".py"

  def is_module(self, module):
    return os.path.exists(self.path(module))

  def read(self, module):
    """(aliases {name: ("module", dotted) | ("name", module, name)}, {function name: node})."""
    if module not in self.parsed:
      with open(self.path(module), encoding="utf-8") as f:
        tree = ast.parse(f.read())
      aliases = {}
      for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bert_fin"):
          for alias in node.names:
            dotted = node.module + "." + alias.name
            aliases[alias.asname or alias.name] = (
                ("module", dotted) if self.is_module(dotted) else ("name", node.module, alias.name))
        elif isinstance(node, ast.Import):
          for alias in node.names:
            if alias.name.startswith("bert_fin"):
              aliases[alias.asname or alias.name] = ("module", alias.name)
      functions = {node.name: node for node in tree.body
                   if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
      self.parsed[module] = aliases, functions
    return self.parsed[module]


def _callees(source, module, node):
  """The (module, function) of every call in node that the source names."""
  aliases, functions = source.read(module)
  found = []
  for call in ast.walk(node):
    if not isinstance(call, ast.Call):
      continue
    func = call.func
    if isinstance(func, ast.Name):
      if func.id in functions:
        found.append((module, func.id))
      elif aliases.get(func.id, ("",))[0] == "name":
        found.append(aliases[func.id][1:])
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
      alias = aliases.get(func.value.id)
      if alias and alias[0] == "module":
        found.append((alias[1], func.attr))
  return found


def follow(repo, script, function="main"):
  """{(module, function): caller} of everything reached from `function` of the script `script`
  (a path under repo), breadth first: each entry's caller is on a shortest trail."""
  source = _Source(repo, script)
  caller = {(SCRIPT, function): None}
  queue = collections.deque([(SCRIPT, function)])
  while queue:
    module, name = queue.popleft()
    if not source.is_module(module):
      continue
    node = source.read(module)[1].get(name)
    if node is None:
      continue
    for callee in _callees(source, module, node):
      if callee not in caller:
        caller[callee] = (module, name)
        queue.append(callee)
  return caller


def path(found, module_suffix, function):
  """The trail [(module, function), ...] from the start to `function` of the module whose name
  ends in module_suffix, or None when it is not reached."""
  hits = [key for key in found if key[0].endswith(module_suffix) and key[1] == function]
  if not hits:
    return None
  trail, key = [], hits[0]
  while key is not None:
    trail.append(key)
    key = found[key]
  return trail[::-1]


def modules_on(trail):
  """How many modules a trail passes through (the script counted as one)."""
  return len(set(module for module, _ in trail))
