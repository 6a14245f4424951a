"""Decks never spoil an exercise (issue 27 item 4).

A "Your turn" slide is one whose heading starts "## Your turn"; it names its exercises in
backticks (`async_batches`) and gives their minutes. An exercise is named by what its check cell
passes to the checker (`check_outbox(Outbox)`). Its answer is the lines of its solution cell
that the attendee writes: those not already in the exercise cell (for a find-the-bug exercise,
the fixed lines). A slide shows the answer when its code (its {{source}} excerpts and fenced
blocks) holds lines close to those once local names are abstracted away, or, for a systems
exercise (a "Your turn first" or "Find the bug" heading in the notebook), when it shows code or
a figure that the exercise's notebook section shows after it: the notebook puts the exercise
before the code that answers it.
"""

import ast
import builtins
import difflib
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from scripts import slides

ROOT = Path(__file__).resolve().parents[1]
DECKS = slides.deck_paths()

YOUR_TURN = re.compile(r"^##\s+Your turn\b", re.I)
SYSTEMS_HEADINGS = ("your turn first", "find the bug")   # the notebook's systems exercises
KEPT_NAMES = set(keyword.kwlist) | set(dir(builtins)) | {"ray", "np", "torch", "self"}
SPOILS = 0.7          # length-weighted closeness of a slide's code to an answer's lines
MIN_KEY_CHARS = 16    # shorter lines (`node = 1`, `return ray.get(x)`) appear in any code
MIN_ANSWER_CHARS = 30  # a shorter answer (`return a * b / c`) has the shape of any formula


def code_shape(line: str) -> str:
    """`line` without its comment and blanks, local names as `_` (attributes, keywords,
    builtins and ray/np/torch/self kept): the same code under other names has one shape."""
    line = re.sub(r"\s+#.*$", "", line).strip()
    line = re.sub(r"(\.?)\b([A-Za-z_]\w*)\b",
                  lambda m: m[0] if m[1] or m[2] in KEPT_NAMES else "_", line)
    return re.sub(r"\s+", "", line)


def body_lines(code: str) -> list[str]:
    """The lines of `code` that do the work: no def/class headers, decorators, docstrings,
    imports, comments or blank lines."""
    drop = set()
    try:
        tree = ast.parse(code)
    except SyntaxError:            # a shell block, or Python abridged with `...`
        tree = ast.parse("")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = node.body[0]
            drop.update(range(min([node.lineno] + [d.lineno for d in node.decorator_list]),
                              first.lineno))
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                drop.update(range(first.lineno, first.end_lineno + 1))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            drop.update(range(node.lineno, node.end_lineno + 1))
    return [line for i, line in enumerate(code.splitlines(), start=1)
            if i not in drop and line.strip() and not line.strip().startswith("#")]


@dataclass
class Exercise:
    name: str
    systems: bool
    answer: list[str]                                    # shapes of the lines the attendee writes
    shown_after: set[str] = field(default_factory=set)   # what its section shows after it


def course_lib_aliases(cells) -> dict[str, str]:
    """{name a notebook uses: the course_lib module or object it stands for}, from its imports."""
    aliases = {}
    for cell in cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:                     # a `%magic` line
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib"):
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def shown_by(cell, aliases) -> set[str]:
    """What one notebook cell shows: the course_lib names it passes to `show_source`
    ("course_lib.pg.train_async") and, if it draws a figure, "#<cell id>" and "#tag:<tag>"."""
    shown = set()
    for args in re.findall(r"show_source\((.*?)\)", cell.source, re.S):
        for arg in re.split(r"[\s,]+", args.strip()):
            head, _, rest = arg.replace(".__ray_actor_class__", "").partition(".")
            if head in aliases:
                shown.add(f"{aliases[head]}.{rest}".rstrip("."))
    if any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
        shown |= {f"#{cell.id}"} | {f"#tag:{t}" for t in cell.metadata.get("tags", [])
                                    if not t.startswith("nbval")}
    return shown


def notebook_exercises(path: Path) -> list[Exercise]:
    """Every exercise of a notebook, in order, with the shapes of its answer's lines; for a
    systems exercise also the code and figures its section shows after it (the notebook puts
    the exercise before the code that answers it, so those are its answer and its results)."""
    cells, found, heading = nbformat.read(path, as_version=4).cells, [], ""
    aliases = course_lib_aliases(cells)
    for i, cell in enumerate(cells):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            heading = cell.source.lstrip("# ").lower()
        if "solution" not in tags:
            continue
        stub = next(c for c in reversed(cells[:i]) if "exercise" in c.metadata.get("tags", []))
        check = next(c for c in cells[i:] if "check" in c.metadata.get("tags", []))
        name = re.search(r"check_\w+\(\s*(\w+)", check.source)[1]
        given, solution = [flat_code(s) for s in body_lines(stub.source)], body_lines(cell.source)
        diff = difflib.SequenceMatcher(None, given, [flat_code(s) for s in solution],
                                       autojunk=False)
        written = [solution[j] for op, _, _, j1, j2 in diff.get_opcodes()
                   if op in ("insert", "replace") for j in range(j1, j2)]
        answer = [s for s in dict.fromkeys(map(code_shape, written)) if len(s) >= MIN_KEY_CHARS]
        exercise = Exercise(name, heading.startswith(SYSTEMS_HEADINGS), answer)
        if exercise.systems:
            for later in cells[i + 1:]:
                if later.cell_type == "markdown" and re.match(r"#{1,2} ", later.source):
                    break                                    # the section ends
                exercise.shown_after |= shown_by(later, aliases)
        found.append(exercise)
    return found


def flat_code(line: str) -> str:
    """`line` without its comment and blanks: the same line however it is indented."""
    return re.sub(r"\s+", "", re.sub(r"\s+#.*$", "", line))


def slide_shows(body: str) -> set[str]:
    """The course_lib names a slide's {{source}} excerpts show and its notebook figures
    ("#<cell id>", "#tag:<tag>")."""
    names = {n for names in re.findall(r"\{\{source ([^}]*)\}\}", body) for n in names.split()}
    figures = {"#" + f for f in re.findall(r"\{\{figure notebooks/[^#}]+#([^}\s]+)\}\}", body)}
    return names | figures


def related(shown_on_slide: str, shown_in_notebook: str) -> bool:
    """The same object, or one a member of the other (a method of a class the notebook shows)."""
    a, b = shown_on_slide, shown_in_notebook
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def slide_code(body: str) -> list[str]:
    """Shapes of the code lines one slide shows. A name that no longer resolves is left to
    the build tests, which stop on it naming deck and slide."""
    code = re.findall(r"```\w*\n(.*?)```", body, re.S)
    for names in re.findall(r"\{\{source ([^}]*)\}\}", body):
        for name in names.split():
            try:
                code.append(slides.excerpt_text(name))
            except LookupError:
                pass
    return [code_shape(line) for block in code for line in body_lines(block)]


def spoil_score(answer: list[str], code: list[str]) -> float:
    """How closely `code` holds the `answer` lines: each line's best match, weighted by its
    length (0 for no code, or an answer too short to tell apart from any formula)."""
    if sum(map(len, answer)) < MIN_ANSWER_CHARS or not code:
        return 0.0
    best = [max(difflib.SequenceMatcher(None, a, c).ratio() for c in code) for a in answer]
    return sum(b * len(a) for b, a in zip(best, answer, strict=True)) / sum(map(len, answer))


NAMED = re.compile(r"`(\w+)")          # `async_batches`, `Outbox(replay, ...)`
MINUTES = re.compile(r"\d+\s*min\b|\|\s*\d+\s*\|\s*$")


def your_turn_slides(deck) -> dict[str, int]:
    """{exercise name: index of the first "Your turn" slide naming it} for one deck."""
    first = {}
    for i, slide in enumerate(deck.slides):
        if YOUR_TURN.match(slide.body):
            for name in NAMED.findall(slide.body):
                first.setdefault(name, i)
    return first


def gives_minutes(body: str, name: str) -> bool:
    """Whether a "Your turn" slide gives `name`'s minutes: in the bullet or table row naming
    it, or in the heading of a slide whose other names are no exercise's."""
    heading, _, rest = body.partition("\n")
    items = re.split(r"\n(?=- |\| |\n)", rest)
    if any(name in NAMED.findall(item) and MINUTES.search(item) for item in items):
        return True
    exercise_rows = [item for item in items if MINUTES.search(item) and NAMED.search(item)]
    return bool(MINUTES.search(heading)) and not exercise_rows


def test_spoil_score_sees_an_answer_under_other_names():
    answer = [code_shape("refs = [square.remote(x) for x in xs]  # all at once"),
              code_shape("return sum(ray.get(refs))")]
    renamed = slide_code("```python\ntasks = [sleepy.remote(s) for s in seconds]\n"
                         "total = sum(ray.get(tasks))\n```")
    unrelated = slide_code("```python\nweights = ray.put(get_weights(policy))\n```")
    assert spoil_score(answer, renamed) >= SPOILS > spoil_score(answer, unrelated)


LESSON_DECKS = [p for p in DECKS if "notebook" in slides.parse_deck(p).meta
                and (ROOT / slides.parse_deck(p).meta["notebook"]).exists()]


@pytest.mark.parametrize("path", LESSON_DECKS, ids=[p.stem for p in LESSON_DECKS])
def test_no_slide_shows_an_answer_before_its_your_turn_slide(path):
    """Issue 27 item 4: each exercise of the deck's notebook is named, with its minutes, on a
    "Your turn" slide, and no slide before that one shows the exercise's answer: neither code
    close to its solution's lines, nor (for a systems exercise) the code and figures that its
    notebook section shows after it."""
    deck = slides.parse_deck(path)
    exercises = notebook_exercises(ROOT / deck.meta["notebook"])
    turns = your_turn_slides(deck)
    problems = [f"`{e.name}` is named on no slide '## Your turn ...'"
                for e in exercises if e.name not in turns]
    for e in exercises:
        if e.name not in turns:
            continue
        if not gives_minutes(deck.slides[turns[e.name]].body, e.name):
            problems.append(f"slide {turns[e.name] + 2} names `{e.name}` without its minutes: "
                            f"'(6 min)' in its bullet, a table row ending '| 6 |', or, when it "
                            f"is the slide's only exercise, in the heading")
        for i, s in enumerate(deck.slides[:turns[e.name]]):
            title = s.body.splitlines()[0]
            if (score := spoil_score(e.answer, slide_code(s.body))) >= SPOILS:
                problems.append(f"slide {i + 2} ({title!r}) shows the answer to `{e.name}` "
                                f"(closeness {score:.2f}) before its 'Your turn' slide "
                                f"{turns[e.name] + 2}")
            early = sorted(x for x in slide_shows(s.body)
                           if any(related(x, y) for y in e.shown_after))
            if early:
                problems.append(f"slide {i + 2} ({title!r}) shows {early}, which the notebook "
                                f"shows after `{e.name}`, before its 'Your turn' slide "
                                f"{turns[e.name] + 2}")
    assert not problems, f"{path.name} (slide numbers as in the built deck):\n" + \
        "\n".join(problems)


PREDICT = re.compile(r"^##\s+Predict\b")
PREDICTS_FROM = "01"          # every lesson deck (00's setup check measures nothing to guess)
MEASURED_TAGS = {"prediction", "nbval-ignore-output"}     # a cell whose output is a measurement


def measured_answers(body: str) -> list[str]:
    """The measured results a slide projects: a benchmark's table or figure, a figure drawn from
    notebooks/figures data, or the figure of a notebook cell whose output is measured (tagged
    `prediction` or `nbval-ignore-output`; a diagram or a formula's plot is not)."""
    found = re.findall(r"\{\{bench (\w+)\}\}", body)
    found += re.findall(r"\{\{figure ((?:bench|notebooks/figures)/[^}\s]+)\}\}", body)
    for notebook, cell_id in re.findall(r"\{\{figure (notebooks/[^#}\s]+)#([^}\s]+)\}\}", body):
        cell = next(c for c in nbformat.read(ROOT / notebook, as_version=4).cells
                    if c.id == cell_id)
        if MEASURED_TAGS & set(cell.metadata.get("tags", [])):
            found.append(f"{Path(notebook).stem}#{cell_id}")
    return found


def unasked(deck) -> list[str]:
    """The slides that project a measured answer when the slide right before is not a
    "## Predict" slide."""
    return [f"slide {i + 2} ({s.body.splitlines()[0]!r}) projects {answers} with no predict "
            f"slide before it" for i, s in enumerate(deck.slides)
            if (answers := measured_answers(s.body))
            and not (i and PREDICT.match(deck.slides[i - 1].body))]


@pytest.mark.parametrize("path", [p for p in LESSON_DECKS if p.name[:2] >= PREDICTS_FROM],
                         ids=lambda p: p.stem)
def test_a_predict_slide_comes_right_before_each_measured_answer(path):
    """Issue 38 item 4: a deck projects no measured result the room has not been asked to
    predict: the slide right before it is a "## Predict" slide."""
    assert not (problems := unasked(slides.parse_deck(path))), "\n".join(problems)


def test_a_measured_answer_without_a_predict_slide_is_found(tmp_path):
    """The rule on a small deck: a benchmark's table straight after the goals is unasked (the
    word in a note asks nothing); a predict slide right before it asks for it; one prediction
    does not cover two answers."""
    deck = tmp_path / "99_x.md"
    deck.write_text("title: x\n---\n## Goals\n\nNote:\nPredict nothing here.\n---\n"
                    "## Table\n\n{{bench replay}}\n---\n## Predict: which?\n\nGuess.\n---\n"
                    "## Again\n\n{{bench replay}}\n---\n## Twice\n\n{{bench apex}}\n")
    assert [p.split(" (")[0] for p in unasked(slides.parse_deck(deck))] == ["slide 3", "slide 6"]
