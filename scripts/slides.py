"""Instructor decks: Markdown sources in slides/ built into self-contained HTML and PDF.

    python scripts/slides.py build [--out build/slides] [--no-pdf] [DECK ...]   # make slides
    python scripts/slides.py check [--out build/slides]   # built excerpts == course_lib today

A deck (`slides/NN_name.md`, `slides/opening.md`) starts with `key: value` lines (title,
subtitle, notebook, minutes) up to the first line `---`; then slides separated by lines `---`.
In a slide, a line `Note:` starts the speaker notes. Directives, each alone on a line:

    {{source course_lib.apex.Explorer.run}}          code as `inspect` finds it at build time
    {{source course_lib.dqn.dqn_loss course_lib.dqn.n_step_double_q_target}}   several in one
    {{figure notebooks/04_replay.ipynb#db70dc4c}}    the PNG output of a notebook cell (cell id,
    {{figure notebooks/05_apex.ipynb#tag:curve}}     or a cell tag), or a PNG/SVG file
    {{diagram apex}}                                 slides/diagrams/apex.svg, inline
    {{bench replay}}                                 a chart drawn from bench/results/replay.json

and inline `[@horgan2018]` cites a paper of slides/references.toml (a references slide closes
every deck that cites). Anything missing (a name, a figure, a reference) stops the build with
the deck, the slide and the directive in the message. The HTML has no external resource: CSS,
JS, diagrams and images are inline, so a deck opens from a USB stick with no network.

Keys in the browser: arrows/space/PageUp/PageDown, Home/End, `s` speaker notes (or open the
deck with `?notes`), `f` full screen. Printing (and the PDF) gives one slide per page.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLIDES = ROOT / "slides"
OUT = ROOT / "build" / "slides"
WIDTH, HEIGHT = 1280, 720
DIRECTIVE = re.compile(r"^\{\{(\w+)\s+(.+?)\}\}\s*$")
CITATION = re.compile(r"\[@(\w+)\]")


class BuildError(Exception):
    """A deck cannot be built: the message names the deck, the slide and the cause."""


@dataclass
class Slide:
    body: str
    notes: str = ""


@dataclass
class Deck:
    path: Path
    meta: dict[str, str]
    slides: list[Slide]
    cited: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def slide_count(self) -> int:
        """Title slide + the source's slides + a references slide if the deck cites."""
        return 1 + len(self.slides) + (1 if self.cited else 0)


def deck_paths() -> list[Path]:
    """Every deck, in teaching order: the opening deck first, then one per notebook."""
    return [SLIDES / "opening.md", *sorted(SLIDES.glob("[0-9][0-9]_*.md"))]


def parse_deck(path: Path) -> Deck:
    text = path.read_text(encoding="utf-8")
    chunks = re.split(r"^---[ \t]*$", text, flags=re.M)
    meta = {}
    for line in chunks[0].strip().splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            raise BuildError(f"{path.name}: front matter line without `key: value`: {line!r}")
        meta[key.strip()] = value.strip()
    if "title" not in meta:
        raise BuildError(f"{path.name}: the front matter has no title")
    slides = []
    for chunk in chunks[1:]:
        body, *notes = re.split(r"^Note:[ \t]*$", chunk, maxsplit=1, flags=re.M)
        slides.append(Slide(body.strip(), "".join(notes).strip()))
    cited = list(dict.fromkeys(CITATION.findall(text)))
    return Deck(path, meta, slides, cited)


# ---------------------------------------------------------------------------------------------
# Directives: code, figures, diagrams, benchmark charts
# ---------------------------------------------------------------------------------------------

def excerpt_text(name: str) -> str:
    """The code a `{{source NAME}}` shows: what `course_lib.viz.display.Source` shows in a
    notebook, dedented (a method is shown at the left margin), without docstrings: on a slide
    the speaker says what the docstring says, and the code stays short enough to read."""
    from course_lib.viz.display import Source, find_object

    return without_docstrings(textwrap.dedent(Source(find_object(name)).text))


def without_docstrings(code: str) -> str:
    """`code` minus the docstring lines of every function and class in it."""
    import ast

    drop = set()
    for node in ast.walk(ast.parse(code)):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            drop.update(range(body[0].lineno - 1, body[0].end_lineno))
    return "\n".join(line for i, line in enumerate(code.splitlines()) if i not in drop)


def render_source(names: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    blocks = []
    for name in names.split():
        try:
            code = excerpt_text(name)
        except (LookupError, ImportError, OSError, TypeError) as err:
            raise BuildError(f"source {name}: {err}") from None
        body = highlight(code, PythonLexer(), HtmlFormatter(nowrap=True))
        blocks.append(f'<pre class="code" data-source="{html.escape(name)}">'
                      f'<code>{body.rstrip()}</code></pre>')
    return "\n".join(blocks)


def _img(data: bytes, mime: str, what: str) -> str:
    uri = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    return f'<img class="figure" src="{uri}" alt="{html.escape(what)}">'


def notebook_png(path: Path, selector: str) -> bytes:
    """The first PNG output of the cell with id `selector` (or tag `tag:NAME`) in `path`."""
    if not path.exists():
        raise BuildError(f"figure {path.relative_to(ROOT)}#{selector}: no such notebook "
                         "(not committed yet?)")
    nb = json.loads(path.read_text(encoding="utf-8"))
    if selector.startswith("tag:"):
        cells = [c for c in nb["cells"] if selector[4:] in c.get("metadata", {}).get("tags", [])]
    else:
        cells = [c for c in nb["cells"] if c.get("id") == selector]
    if not cells:
        raise BuildError(f"figure {path.relative_to(ROOT)}#{selector}: no cell with that "
                         f"{'tag' if selector.startswith('tag:') else 'id'}")
    for out in cells[0].get("outputs", []):
        png = out.get("data", {}).get("image/png")
        if png:
            return base64.b64decode("".join(png) if isinstance(png, list) else png)
    raise BuildError(f"figure {path.relative_to(ROOT)}#{selector}: the cell has no PNG output "
                     "(run it with `make notebooks`)")


def render_figure(ref: str) -> str:
    file, _, selector = ref.partition("#")
    path = ROOT / file
    if selector:
        return _img(notebook_png(path, selector), "image/png", ref)
    if not path.exists():
        raise BuildError(f"figure {file}: no such file")
    mime = {".png": "image/png", ".svg": "image/svg+xml"}.get(path.suffix)
    if mime is None:
        raise BuildError(f"figure {file}: only .png and .svg files can be shown")
    return _img(path.read_bytes(), mime, ref)


def render_diagram(name: str) -> str:
    path = SLIDES / "diagrams" / f"{name}.svg"
    if not path.exists():
        raise BuildError(f"diagram {name}: no file slides/diagrams/{name}.svg")
    svg = path.read_text(encoding="utf-8")
    return f'<div class="diagram">{svg[svg.index("<svg"):]}</div>'


def bench_replay() -> bytes | None:
    """Ours against cpprb, microseconds per call, from the latest `python -m bench.replay`
    (None when there are no results yet: bench/results/ is committed after a full `make bench`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    path = ROOT / "bench" / "results" / "replay.json"
    if not path.exists():
        return None
    rows = json.loads(path.read_text())["buffers"]
    ops = [r["operation"] for r in rows]
    x = np.arange(len(ops))
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=110)
    ax.bar(x - 0.2, [r["ours_us"] for r in rows], 0.4, label="course_lib.replay")
    ax.bar(x + 0.2, [r["cpprb_us"] for r in rows], 0.4, label="cpprb (C++)")
    ax.set_xticks(x, ops)
    ax.set_ylabel("µs per call (median)")
    ax.set_title("Prioritized replay at 2^20 transitions, Ape-X access pattern")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


BENCHES = {"replay": bench_replay}


def render_directive(kind: str, arg: str) -> str:
    if kind == "source":
        return render_source(arg)
    if kind == "figure":
        return render_figure(arg.strip())
    if kind == "diagram":
        return render_diagram(arg.strip())
    if kind == "bench":
        if arg.strip() not in BENCHES:
            raise BuildError(f"bench {arg}: unknown (known: {', '.join(BENCHES)})")
        png = BENCHES[arg.strip()]()
        if png is None:                 # results are per machine and not committed
            print(f"warning: bench {arg}: no results here; run `python -m bench.{arg}`, then "
                  "`make slides`", file=sys.stderr)
            return (f'<p class="missing">No benchmark results on the machine that built this '
                    f'deck: run <code>python -m bench.{html.escape(arg)}</code>, then '
                    f'<code>make slides</code>.</p>')
        return _img(png, "image/png", f"bench {arg}")
    raise BuildError(f"unknown directive {{{{{kind} ...}}}}")


# ---------------------------------------------------------------------------------------------
# Markdown to HTML
# ---------------------------------------------------------------------------------------------

def load_references() -> dict[str, dict[str, str]]:
    return tomllib.loads((SLIDES / "references.toml").read_text(encoding="utf-8"))


def render_markdown(text: str, refs: dict) -> str:
    """Markdown with directives (placeholders while Markdown renders) and citations."""
    import mistune

    blocks: list[str] = []
    lines = []
    for line in text.splitlines():
        m = DIRECTIVE.match(line.strip())
        if m:
            blocks.append(render_directive(*m.groups()))
            lines.append(f"\nDIRECTIVE{len(blocks) - 1}END\n")
        else:
            lines.append(line)

    def cite(m: re.Match) -> str:
        if m.group(1) not in refs:
            raise BuildError(f"citation [@{m.group(1)}]: not in slides/references.toml")
        return f'<cite>({refs[m.group(1)]["short"]})</cite>'

    md = mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])
    out = md(CITATION.sub(cite, "\n".join(lines)))
    for i, block in enumerate(blocks):
        out = out.replace(f"<p>DIRECTIVE{i}END</p>", block)
    return out


def build_html(deck: Deck) -> str:
    refs = load_references()
    meta, n = deck.meta, deck.slide_count
    sections = []

    def section(i: int, body: str, notes: str, cls: str = "") -> str:
        return (f'<section class="slide {cls}" id="s{i}" data-index="{i}">'
                f'<div class="content">{body}</div>'
                f'<aside class="notes">{notes}</aside>'
                f'<footer>{html.escape(meta["title"])} · {i}/{n}</footer></section>')

    facts = " · ".join(html.escape(x) for x in (
        meta.get("notebook", ""), f"{meta['minutes']} min" if "minutes" in meta else "") if x)
    title = (f'<h1>{html.escape(meta["title"])}</h1>'
             f'<p class="subtitle">{html.escape(meta.get("subtitle", ""))}</p>'
             f'<p class="facts">{facts}</p><p class="course">Distributed RL with Ray</p>')
    sections.append(section(1, title, "Title slide.", "title"))
    for i, slide in enumerate(deck.slides, start=2):
        try:
            body = render_markdown(slide.body, refs)
            notes = render_markdown(slide.notes, refs) if slide.notes else ""
        except BuildError as err:
            raise BuildError(f"{deck.path.name}, slide {i}: {err}") from None
        sections.append(section(i, body, notes))
    if deck.cited:
        items = "".join(f"<li>{html.escape(refs[key]['full'])}</li>" for key in deck.cited)
        sections.append(section(n, f"<h2>References</h2><ol class='refs'>{items}</ol>",
                                "Papers cited in this deck.", "references"))
    from pygments.formatters import HtmlFormatter

    css = (SLIDES / "assets" / "deck.css").read_text(encoding="utf-8")
    css += HtmlFormatter(style="friendly").get_style_defs(".code")
    js = (SLIDES / "assets" / "deck.js").read_text(encoding="utf-8")
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{html.escape(meta["title"])}</title><style>{css}</style></head>\n'
            f'<body data-slides="{n}"><main id="deck">\n' + "\n".join(sections) +
            f'\n</main><div id="timer"></div><script>{js}</script></body></html>\n')


# ---------------------------------------------------------------------------------------------
# PDF through headless Chromium
# ---------------------------------------------------------------------------------------------

def find_chromium() -> str:
    """The Chromium the build and the tests use: $CHROMIUM, else chromium on the PATH."""
    import os

    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser",
                      "google-chrome"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    raise BuildError("no Chromium found: run `make chromium` (Debian/Ubuntu), or install "
                     "Chromium or Chrome and set CHROMIUM=/path/to/it")


def chromium_args() -> list[str]:
    """Headless flags that work as root and in containers, and never touch the network."""
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update"]


def print_pdf(html_path: Path, pdf_path: Path, timeout_s: float = 120) -> None:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        cmd = [find_chromium(), *chromium_args(), f"--user-data-dir={profile}",
               "--no-pdf-header-footer", "--run-all-compositor-stages-before-draw",
               f"--print-to-pdf={pdf_path}", html_path.resolve().as_uri()]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BuildError(f"{html_path.name}: Chromium did not print within "
                             f"{timeout_s:.0f} s") from None
    if proc.returncode != 0 or not pdf_path.exists():
        raise BuildError(f"{html_path.name}: Chromium could not print to PDF:\n{proc.stderr}")


def pdf_page_count(path: Path) -> int:
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", path.read_bytes()))


# ---------------------------------------------------------------------------------------------
# Build and check
# ---------------------------------------------------------------------------------------------

def build(out: Path = OUT, pdf: bool = True, paths: list[Path] | None = None) -> list[Deck]:
    """Build the decks into `out` (HTML, and PDF unless `pdf` is False); returns them.
    Writes `out/manifest.json`: per deck, the slide count and the excerpts it shows."""
    out.mkdir(parents=True, exist_ok=True)
    decks, manifest = [], {}
    for path in paths or deck_paths():
        deck = parse_deck(path)
        html_path = out / f"{deck.name}.html"
        html_path.write_text(build_html(deck), encoding="utf-8")
        if pdf:
            print_pdf(html_path, out / f"{deck.name}.pdf")
        manifest[deck.name] = {"slides": deck.slide_count, "minutes": deck.meta.get("minutes"),
                               "excerpts": excerpts_in(html_path.read_text(encoding="utf-8"))}
        decks.append(deck)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return decks


def excerpts_in(page: str) -> list[str]:
    return re.findall(r'<pre class="code" data-source="([^"]+)">', page)


def excerpt_mismatches(html_path: Path) -> list[str]:
    """Each code excerpt of a built deck that differs from its object's source today."""
    from html.parser import HTMLParser

    class Excerpts(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.found: list[list[str]] = []
            self.depth = 0

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "pre" and "data-source" in attrs:
                self.found.append([attrs["data-source"], ""])
                self.depth = 1
            elif self.depth and tag == "pre":
                self.depth += 1

        def handle_endtag(self, tag):
            if self.depth and tag == "pre":
                self.depth -= 1

        def handle_data(self, data):
            if self.depth:
                self.found[-1][1] += data

    parser = Excerpts()
    parser.feed(html_path.read_text(encoding="utf-8"))
    problems = []
    for name, shown in parser.found:
        try:
            current = excerpt_text(name)
        except (LookupError, ImportError, OSError, TypeError) as err:
            problems.append(f"{html_path.name}: {name}: {err}")
            continue
        if shown.rstrip("\n") != current.rstrip("\n"):
            problems.append(f"{html_path.name}: {name} differs from the source (rebuild: "
                            "make slides)")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build decks to HTML (and PDF)")
    b.add_argument("decks", nargs="*", type=Path, help="deck sources (default: all)")
    b.add_argument("--out", type=Path, default=OUT)
    b.add_argument("--no-pdf", action="store_true", help="HTML only")
    c = sub.add_parser("check", help="compare built excerpts with the current course_lib")
    c.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            decks = build(args.out, pdf=not args.no_pdf, paths=args.decks or None)
            for deck in decks:
                print(f"{deck.name}: {deck.slide_count} slides")
            print(f"{len(decks)} decks written to {args.out}")
            return 0
        problems = [p for page in sorted(args.out.glob("*.html")) for p in excerpt_mismatches(page)]
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print("\n".join(problems) or "every excerpt matches course_lib")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
