"""The instructor decks: every deck builds, shows today's course_lib code, renders offline in
headless Chromium, and prints to PDF (`make slides` builds the same into build/slides)."""

import importlib
import re
import sys
import textwrap
from pathlib import Path

import pytest
from browser_support import RequestLog, assert_not_blank

from scripts import figures, slides

ROOT = Path(__file__).resolve().parents[1]
DECKS = slides.deck_paths()
DECK_IDS = [p.stem for p in DECKS]


@pytest.fixture(scope="session")
def built(artifacts) -> Path:
    """Every deck built to HTML once per session (the PDF test prints them)."""
    out = artifacts / "slides"
    slides.build(out, pdf=False)
    return out


def agenda_minutes(markdown: str) -> dict[str, int]:
    """{"00": 10, ...} from an agenda table whose rows start with a notebook number."""
    markdown = figures.BLOCK.sub("", markdown)    # the guide's generated table is not an agenda
    rows = re.findall(r"^\|\s*(\d\d)[\w_]*\s*\|.*\|\s*(\d+)\s*\|\s*$", markdown, flags=re.M)
    return {number: int(minutes) for number, minutes in rows}


# --------------------------------------------------------------------------------------------
# Sources and build
# --------------------------------------------------------------------------------------------

def agenda_lessons(markdown: str) -> list[str]:
    """["00_setup_check", ...]: the first cell of each agenda row that names a notebook."""
    return re.findall(r"^\|\s*(\d\d_\w+)\s*\|", figures.BLOCK.sub("", markdown), flags=re.M)


def test_every_lesson_has_its_deck_and_agenda_rows():
    """The places a new lesson must touch (CONTRIBUTING.md, "A new lesson"): a deck of the
    same name after the opening deck, and a row in the README and instructor agendas."""
    lessons = [p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    assert lessons, "no notebooks found"
    assert DECKS[0].name == "opening.md"
    assert [p.stem for p in DECKS[1:]] == lessons
    assert agenda_lessons((ROOT / "README.md").read_text()) == lessons
    assert agenda_lessons((ROOT / "slides" / "INSTRUCTOR.md").read_text()) == lessons
    assert "## A new lesson" in (ROOT / "CONTRIBUTING.md").read_text()


def test_deck_minutes_match_the_readme_and_instructor_agendas():
    readme = agenda_minutes((ROOT / "README.md").read_text())
    guide = agenda_minutes((ROOT / "slides" / "INSTRUCTOR.md").read_text())
    decks = {p.stem[:2]: int(slides.parse_deck(p).meta["minutes"]) for p in DECKS[1:]}
    assert decks == readme, "slides/NN_*.md `minutes:` disagree with the README agenda"
    assert guide == readme, "slides/INSTRUCTOR.md agenda disagrees with the README agenda"
    opening = agenda_minutes((ROOT / "slides" / "opening.md").read_text())
    assert opening == readme, "slides/opening.md's agenda disagrees with the README agenda"


def test_every_deck_has_goals_notes_and_code(built):
    for path in DECKS:
        deck = slides.parse_deck(path)
        assert all(s.notes for s in deck.slides), f"{path.name}: a slide without speaker notes"
        if path.stem != "opening":
            assert "Learning goals" in deck.slides[0].body, path.name
            assert slides.excerpts_in((built / f"{deck.name}.html").read_text()), \
                f"{path.name} shows no course_lib code"


MAX_CODE_LINES = 16   # "about 15": a code slide is read aloud, not scrolled


def code_lines(body: str) -> int:
    """Lines of code one slide shows: its `{{source}}` excerpts and fenced blocks."""
    n = sum(len(slides.excerpt_text(name).splitlines())
            for names in re.findall(r"\{\{source ([^}]*)\}\}", body) for name in names.split())
    return n + sum(len(block.splitlines()) - 2 for block in re.findall(r"```.*?```", body, re.S))


@pytest.mark.parametrize("path", DECKS, ids=DECK_IDS)
def test_code_slides_are_short(path):
    long = [f"slide {i + 1}: {n} lines" for i, s in enumerate(slides.parse_deck(path).slides)
            if (n := code_lines(s.body)) > MAX_CODE_LINES]
    assert not long, (f"{path.name}: show the essential lines (a smaller function, or a "
                      f"fenced excerpt) and point to the notebook for the rest: {long}")


def test_excerpts_leave_out_docstrings():
    code = slides.without_docstrings('def f(x):\n    """Doc\n    more."""\n    return x\n')
    assert code == "def f(x):\n    return x"


def test_every_excerpt_matches_course_lib_today(built):
    problems = [p for path in DECKS for p in slides.excerpt_mismatches(built / f"{path.stem}.html")]
    assert not problems, "\n".join(problems)


def test_a_changed_source_fails_the_excerpt_check(tmp_path, monkeypatch):
    module = tmp_path / "slides_probe.py"
    module.write_text("def probe(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    deck_md = tmp_path / "99_probe.md"
    deck_md.write_text("title: probe\n---\n## Code\n\n{{source slides_probe.probe}}\n\nNote:\nn\n")
    page = tmp_path / "99_probe.html"
    page.write_text(slides.build_html(slides.parse_deck(deck_md)))
    assert slides.excerpts_in(page.read_text()) == ["slides_probe.probe"]
    assert slides.excerpt_mismatches(page) == []

    module.write_text("def probe(x):\n    return x + 2  # changed\n")
    importlib.invalidate_caches()
    importlib.reload(sys.modules["slides_probe"])
    [problem] = slides.excerpt_mismatches(page)
    assert "slides_probe.probe differs" in problem
    sys.modules.pop("slides_probe")


@pytest.mark.parametrize("directive, message", [
    ("{{source course_lib.apex.NoSuchThing}}", "course_lib.apex has no attribute 'NoSuchThing'"),
    ("{{figure notebooks/99_missing.ipynb#abc}}", "no such notebook"),
    ("{{figure notebooks/00_setup_check.ipynb#no-such-cell}}", "no cell with that id"),
    ("{{figure notebooks/00_setup_check.ipynb#f51f49d9}}", "has no PNG output"),
    ("{{diagram nothing}}", "slides/diagrams/nothing.svg"),
    ("see [@nobody2099]", "[@nobody2099]: not in slides/references.toml"),
])
def test_a_missing_reference_stops_the_build_naming_deck_and_slide(tmp_path, directive, message):
    deck_md = tmp_path / "98_broken.md"
    deck_md.write_text(textwrap.dedent(f"""\
        title: broken
        ---
        ## fine
        Note:
        n
        ---
        ## broken
        {directive}
        """))
    with pytest.raises(slides.BuildError) as err:
        slides.build_html(slides.parse_deck(deck_md))
    assert "98_broken.md, slide 3" in str(err.value) and message in str(err.value)


# --------------------------------------------------------------------------------------------
# In the browser: offline, the expected slides, nothing blank; and the PDFs
# --------------------------------------------------------------------------------------------

@pytest.mark.browser
@pytest.mark.parametrize("deck", DECK_IDS)
def test_deck_renders_offline_in_chromium(deck, built, browser, artifacts):
    expected = slides.parse_deck(ROOT / "slides" / f"{deck}.md").slide_count
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    requests = RequestLog(page, allowed=("file:", "data:"))
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    try:
        page.goto((built / f"{deck}.html").as_uri(), timeout=30_000)
        page.wait_for_selector("body[data-ready]", state="attached", timeout=30_000)
        assert page.locator("section.slide").count() == expected
        assert page.get_attribute("body", "data-slides") == str(expected)
        overflowing = page.eval_on_selector_all("section[data-overflow]", "s => s.map(e => e.id)")
        assert not overflowing, f"content does not fit on slides {overflowing}"
        broken = page.eval_on_selector_all(
            "img", "imgs => imgs.filter(i => !i.complete || i.naturalWidth === 0).length")
        assert broken == 0, f"{broken} images did not load"

        shot = artifacts / f"slides-{deck}-1.png"
        page.screenshot(path=shot)
        assert_not_blank(shot)
        middle = expected // 2 + 1
        for _ in range(middle - 1):
            page.keyboard.press("ArrowRight")
        assert page.get_attribute("body", "data-current") == str(middle)
        page.keyboard.press("s")                         # the speaker view shows the notes
        assert page.locator("section.current .notes").is_visible()
        shot = artifacts / f"slides-{deck}-{middle}-notes.png"
        page.screenshot(path=shot)
        assert_not_blank(shot)
    finally:
        page.close()
    assert not requests.problems, "\n".join(requests.problems)
    assert not errors, "\n".join(errors)


@pytest.mark.browser
def test_pdfs_have_one_page_per_slide(built, chromium_path):
    for path in DECKS:
        html_path = built / f"{path.stem}.html"
        pdf = html_path.with_suffix(".pdf")
        slides.print_pdf(html_path, pdf)
        assert pdf.read_bytes().startswith(b"%PDF-")
        assert slides.pdf_page_count(pdf) == slides.parse_deck(path).slide_count, pdf.name
