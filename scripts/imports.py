"""Which code running a module can execute: the repository's one import resolver.

`import_slices("bench.scaling")` follows the imports of `bench/scaling.py` through the
packages of `CODE` and returns, for each file reached, what of it can run: the whole file
(`None`), or, for a module reached only by `from module import a, b`, the names `a` and `b`,
whose code is `code_slice(tree, {"a", "b"})`: every top-level statement that does something
on import (imports, calls, assignments that call; not `if __name__ == "__main__":`), the
definitions named (functions, classes, assignments that call nothing), each decorated one (a
decorator can register it on import) and every definition those reach by name. So a change to
a function that a benchmark never runs (another benchmark's entry point in a shared module,
say) leaves that benchmark's result fresh (`scripts/fresh.py`).

A module counts when a file names it in an `import`, in a string (`python -m course_lib`:
a package's `__main__` too, where bench or scripts start it; the library only writes such
command lines out for people; not a folder of a path, `ROOT / "bench"`) or as the literal
start of an f-string. The closure is read from the code as it is now: a module that stopped
importing another has itself changed.
"""

from __future__ import annotations

import ast
from pathlib import Path

if __package__:          # imported as scripts.imports
    from scripts.provenance import CODE, ROOT
else:                    # imported by a script run as a file
    from provenance import CODE, ROOT

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def module_paths(root: Path) -> dict[str, str]:
    """{dotted module name: path} of every .py file under `CODE` in the working tree."""
    found = {}
    for folder in CODE:
        for file in (root / folder).rglob("*.py"):
            if "__pycache__" not in file.parts:
                parts = file.relative_to(root).with_suffix("").parts
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = \
                    str(file.relative_to(root))
    return found


def imported(node: ast.AST, package: str) -> set[str]:
    """The dotted names an import statement may load (`from a import b`: a and a.b), a
    relative import resolved against `package` (the package the importing file is in); empty
    for any other node. tests/test_structure.py uses it too."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    return {_base(node, package)} | {f"{_base(node, package)}.{a.name}" for a in node.names}


def _base(node: ast.ImportFrom, package: str) -> str:
    base = node.module or ""
    if node.level:
        head = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(head + ([base] if base else []))
    return base


def code_slice(tree: ast.Module, wanted: frozenset[str] | None) -> ast.Module:
    """The part of a module's code that `from module import <wanted>` can run (the module
    docstring says which); the whole tree when `wanted` is None."""
    if wanted is None:
        return tree
    units = [n for n in tree.body if not _runs_as_main(n)]
    named = {id(n): _defines(n) for n in units}
    todo = set(wanted)
    for node in units:
        if named[id(node)] is None or getattr(node, "decorator_list", None):
            todo |= _names_used(node)         # runs on import (a decorator can register it)
    reached: set[str] = set()
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        for node in units:
            if named[id(node)] and name in named[id(node)]:
                todo |= _names_used(node)
    return ast.Module(body=[n for n in units if named[id(n)] is None or named[id(n)] & reached
                            or getattr(n, "decorator_list", None)], type_ignores=[])


def _defines(node: ast.AST) -> set[str] | None:
    """The names a top-level statement only defines (a function, a class, an assignment that
    calls nothing): None for one that does something on import (an import, a call)."""
    if isinstance(node, DEFINITIONS):
        return {node.name}
    if isinstance(node, ast.Assign | ast.AnnAssign) and not any(
            isinstance(n, ast.Call) for n in ast.walk(node)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return None


def _runs_as_main(node: ast.AST) -> bool:
    """`if __name__ == "__main__":`, which an import does not run."""
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__"
                    for c in node.test.comparators))


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _imports_of(tree: ast.Module, path: str, module: str,
                modules: dict[str, str]) -> dict[str, frozenset[str] | None]:
    """{module: the names of it this code imports, or None for all of it}."""
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    runs_processes = not path.startswith("course_lib/")
    found: dict[str, frozenset[str] | None] = {}
    paths = {id(side) for node in ast.walk(tree)       # `ROOT / "bench" / "results"`: a folder
             if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
             for side in (node.left, node.right)}

    def add(name: str, names: frozenset[str] | None) -> None:
        if name not in found or found[name] is not None:
            found[name] = None if names is None else (found.get(name) or frozenset()) | names

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _base(node, package)
            for alias in node.names:
                if alias.name == "*" or f"{base}.{alias.name}" in modules:
                    add(f"{base}.{alias.name}" if alias.name != "*" else base, None)
                else:
                    add(base, frozenset({alias.name}))
        elif isinstance(node, ast.Import):
            for name in imported(node, package):
                add(name, None)
        elif isinstance(node, ast.Constant) and node.value in modules and id(node) not in paths:
            add(node.value, None)
            if runs_processes:
                add(f"{node.value}.__main__", None)               # `python -m package`
        elif (isinstance(node, ast.JoinedStr) and node.values
              and isinstance(node.values[0], ast.Constant)
              and str(node.values[0].value).startswith(CODE)):
            for name in modules:
                if name.startswith(node.values[0].value):
                    add(name, None)
    return found


def import_slices(module: str, root: Path = ROOT) -> dict[str, frozenset[str] | None] | None:
    """{path: the names of it that running `module` can reach, None for the whole file} for
    `module`, every module it imports through `CODE`'s packages, and each one's parent packages
    (their `__init__` runs first, whole). None when `module` is not there."""
    modules = module_paths(root)
    if module not in modules:
        return None
    wanted: dict[str, frozenset[str] | None] = {}
    todo: list[tuple[str, frozenset[str] | None]] = [(module, None)]
    while todo:
        name, names = todo.pop()
        while name and name not in modules:       # `from pkg import function`: pkg itself
            name = name.rpartition(".")[0]
        if not name:
            continue
        before = wanted.get(name, frozenset())
        now = None if names is None or before is None else before | names
        if name in wanted and now == before:
            continue
        wanted[name] = now
        parts = name.split(".")
        todo += [(".".join(parts[:i]), None) for i in range(1, len(parts))]
        tree = code_slice(ast.parse((root / modules[name]).read_text()), now)
        todo += list(_imports_of(tree, modules[name], name, modules).items())
    return {modules[name]: names for name, names in wanted.items()}


def import_closure(module: str, root: Path = ROOT) -> frozenset[str] | None:
    """The .py paths that running `module` can execute (`import_slices`' files)."""
    slices = import_slices(module, root)
    return None if slices is None else frozenset(slices)
