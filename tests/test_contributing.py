"""CONTRIBUTING.md's maps are checked, not hand-kept. Its map of the code notebooks and decks
show: every name it lists resolves (import + getattr), and it lists exactly what each notebook's
`show_source(...)` cells and each deck's `{{source ...}}` show, file by file. Its map of
`course_lib`'s three layers (core, teaching, viz): every path it names exists, and it names
every module of the package once, in the layer its folder says."""

import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Code the notebooks and decks show"
LAYERS = "## The three layers of `course_lib`"


def section(title: str) -> str:
    """The text of CONTRIBUTING.md's section `title`, up to the next section."""
    return (ROOT / "CONTRIBUTING.md").read_text().split(title, 1)[1].split("\n## ", 1)[0]


def listed() -> dict[str, set[str]]:
    """{file: names} from the table of CONTRIBUTING.md's section on shown code."""
    rows = {}
    for line in section(SECTION).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`") and "/" in cells[0]:
            rows[cells[0].strip("`")] = set(re.findall(r"`([^`]+)`", cells[1]))
    return rows


def aliases(code: str) -> dict[str, str]:
    """{name in the notebook: dotted name under course_lib} from its imports."""
    out = {}
    for module, names in re.findall(r"^\s*from (course_lib[\w.]*) import ([\w, ]+)", code, re.M):
        prefix = module.removeprefix("course_lib").lstrip(".")
        for name in (n.strip() for n in names.split(",")):
            out[name] = f"{prefix}.{name}" if prefix else name
    return out


def normal(name: str, alias: dict[str, str]) -> str:
    name = name.removeprefix("course_lib.").replace(".__ray_actor_class__", "")
    head, _, rest = name.partition(".")
    head = alias.get(head, head)
    return f"{head}.{rest}" if rest else head


def shown() -> dict[str, set[str]]:
    """{file: names} that notebooks show with show_source and decks with {{source ...}}."""
    out = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                 if c["cell_type"] == "code"]
        alias = aliases("\n".join(cells))
        names = {normal(arg.strip(), alias) for cell in cells
                 for args in re.findall(r"(?<!def )show_source\(([^)]*)\)", cell)
                 for arg in args.split(",") if arg.strip()}
        if names:
            out[f"notebooks/{path.name}"] = names
    for path in sorted((ROOT / "slides").glob("[0-9][0-9]_*.md")):
        names = {normal(n, {}) for args in re.findall(r"\{\{source ([^}]*)\}\}", path.read_text())
                 for n in args.split()}
        if names:
            out[f"slides/{path.name}"] = names
    return out


def resolve(name: str):
    """The object `name`, under course_lib."""
    obj = importlib.import_module("course_lib")
    for part in name.split("."):
        obj = getattr(obj, "__ray_actor_class__", obj)   # a Ray actor: its class's methods
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(f"{obj.__name__}.{part}")   # a submodule not imported
    return obj


def test_the_map_lists_exactly_what_each_notebook_and_deck_shows():
    have, want = listed(), shown()
    assert want, "found no show_source cells: has the notebook format changed?"
    problems = [f"{file}: shown but not listed: {sorted(want.get(file, set()) - names)}; "
                f"listed but not shown: {sorted(names - want.get(file, set()))}"
                for file, names in {**want, **have}.items()
                if have.get(file, set()) != want.get(file, set())]
    assert not problems, "update CONTRIBUTING.md's table:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", sorted({n for names in listed().values() for n in names}))
def test_every_listed_name_resolves(name):
    assert resolve(name) is not None


def layer_map() -> dict[str, str]:
    """{path under course_lib/: its layer} from the table of CONTRIBUTING.md's layer section
    (a row's layer is the first word of its first cell: "core, read first" is core)."""
    rows = {}
    for line in section(LAYERS).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("layer", "---"):
            continue
        layer = cells[0].split(",")[0].split()[0]
        for path in re.findall(r"`(course_lib/[^`]*)`", cells[1]):
            assert path not in rows, f"{path} is named twice"
            rows[path] = layer
    return rows


def modules_of(folder: Path) -> set[str]:
    """The modules (`x.py`) and packages (`x/`) directly in `folder`, as repository paths;
    not its `__init__.py` or `__main__.py`."""
    return {p.relative_to(ROOT).as_posix() + ("/" if p.is_dir() else "")
            for p in folder.iterdir()
            if (p.suffix == ".py" and not p.name.startswith("__"))
            or (p.is_dir() and (p / "__init__.py").is_file())}


def test_the_layer_map_names_each_layer_and_every_module_once_in_its_layer():
    named = layer_map()
    assert set(named.values()) == {"core", "teaching", "viz"}
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, f"CONTRIBUTING.md names paths that do not exist: {missing}"
    package = ROOT / "course_lib"
    modules = modules_of(package) | modules_of(package / "teaching") | modules_of(package / "viz")
    assert not modules - set(named), f"add to CONTRIBUTING.md's layer table: " \
                                      f"{sorted(modules - set(named))}"
    wrong = {path: layer for path, layer in named.items()
             if layer != next((part for part in ("teaching", "viz")
                               if path.startswith(f"course_lib/{part}/")), "core")}
    assert wrong == {}, "a path under course_lib/teaching/ is teaching, under viz/ viz, else core"
