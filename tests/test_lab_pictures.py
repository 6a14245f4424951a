"""What an attendee sees on opening a notebook, before running anything: every picture the
notebook stores is shown, no `<IPython.core.display.SVG object>` placeholder, no stored error,
every quiz and progress display rendered.

JupyterLab does not trust a notebook it did not execute itself (one written by
`scripts/notebooks.py workshop`, or cloned from git), and for an untrusted notebook it shows
only outputs it can sanitize: an SVG output falls back to its text form. So the test opens both
editions as they arrive on a laptop: a fresh attendee edition (as `make lab` writes it) and a
copy of notebooks/ (the instructor edition), one JupyterLab each, in headless Chromium. It
keeps one screenshot per notebook in build/test-artifacts/ (lab-<edition>-<notebook>.png,
scrolled to the notebook's first picture).

No cell runs and no Ray starts (opening a notebook starts its kernel, left idle). Each
edition is one JupyterLab page, in a fresh workspace, that opens its notebooks one after the
other as a click in the file browser does (`docmanager:open`), each in a new tab: the app
loads once per edition, not once per notebook. Deselect with `-m "not browser"`.
Every output is laid out (`windowingMode: none`) so that pictures below the fold are counted.
A quiz (an ipywidgets view, which JupyterLab renders only in a trusted notebook) counts as
rendered when the page shows the widget or the static HTML fallback its output carries.
"""

import shutil

import nbformat
import pytest
from browser_support import ROOT, RequestLog, assert_not_blank, jupyter_lab

import scripts.notebooks as nbtools

NOTEBOOKS = nbtools.all_notebooks()
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Lay every cell out (JupyterLab's default renders only the cells near the viewport); no
# "Jupyter news?" pop-up over the screenshots.
SETTINGS = {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
            "@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}

# What the page shows of the current notebook, or null while it is still loading.
SHOWN = r"""(expected) => {
    const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    if (!panel || !panel.context || !panel.context.isReady || !panel.content) return null;
    if (panel.context.path !== expected.path) return null;     // the previous one, still shown
    const node = panel.content.node;
    const outputs = Array.from(node.querySelectorAll('.jp-OutputArea-output'));
    const images = Array.from(node.querySelectorAll('.jp-OutputArea-output img'));
    // each stored widget view as the page renders it: the widget, or a fallback of its bundle
    const widgets = panel.content.widgets.filter(c => c.model.type === 'code')
        .flatMap(c => Array.from({length: c.outputArea.model.length}, (_, i) => i)
            .filter(i => expected.widget_mime in (c.outputArea.model.get(i).toJSON().data || {}))
            .map(i => c.outputArea.widgets[i]
                      && c.outputArea.widgets[i].node.querySelector('.jp-OutputArea-output')));
    // a widget with its radio buttons, or (untrusted) its static HTML or image fallback
    const rendered = w => w.radios > 0 || /^(text\/html|image\/)/.test(w.mime || '');
    const state = {
        cells: panel.content.widgets.length,
        images: images.map(i => ({loaded: i.complete && i.naturalWidth > 0,
                                  width: Math.round(i.getBoundingClientRect().width),
                                  alt: i.alt || i.src.slice(0, 40)})),
        progress: node.querySelectorAll('.jp-OutputArea-output progress').length,
        placeholders: outputs.map(o => o.innerText)
            .filter(t => t.includes('<IPython.core.display')),
        widgets: widgets.map(o => o ? {
            mime: o.dataset.mimeType, radios: o.querySelectorAll('input[type=radio]').length,
            text: o.innerText.slice(0, 80)} : {mime: null}),
    };
    const settled = state.cells === expected.cells
        && state.images.every(i => i.loaded) && state.images.length >= expected.images
        && state.widgets.length >= expected.widgets && state.widgets.every(rendered);
    return {...state, settled, widgetsRendered: state.widgets.filter(rendered).length};
}"""


def stored(nb) -> dict:
    """What notebook `nb` stores: its pictures (an image output of any kind, or an <img> in an
    HTML or Markdown output), quiz widget views, progress bars, and error outputs."""
    counts = {"cells": len(nb.cells), "widget_mime": WIDGET_VIEW,
              "images": 0, "widgets": 0, "progress": 0, "errors": []}
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.output_type == "error":
                counts["errors"].append(f"{output.ename}: {output.evalue}")
            data = output.get("data", {})
            markup = data.get("text/html", "") + data.get("text/markdown", "")
            if any(kind.startswith("image/") for kind in data):
                counts["images"] += 1
            else:
                counts["images"] += markup.count("<img") + markup.count("![")
            counts["widgets"] += WIDGET_VIEW in data
            counts["progress"] += markup.count("<progress")
    return counts


@pytest.fixture(scope="module", params=["workshop", "notebooks"])
def edition(request, tmp_path_factory):
    """JupyterLab on a fresh edition: `workshop` (the attendee's, as `make lab` writes it) or
    `notebooks` (a copy of the instructor's, as a fresh clone has it)."""
    workdir = tmp_path_factory.mktemp(f"lab-{request.param}")
    folder = workdir / request.param
    if request.param == "workshop":
        nbtools.workshop(folder)
    else:
        shutil.copytree(ROOT / "notebooks", folder)
    with jupyter_lab(folder, workdir, settings=SETTINGS) as (base, token):
        yield request.param, folder, base, token


@pytest.fixture(scope="module")
def lab_page(edition, browser):
    """One page of the edition's JupyterLab, in a workspace of its own, with its requests and
    page errors logged; the tests open their notebooks in it."""
    label, _, base, token = edition
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    requests = RequestLog(page, allowed=(base, "data:", "blob:", base.replace("http", "ws")))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/lab/workspaces/{label}?token={token}&reset")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    yield page, requests, errors
    page.close()


@pytest.mark.browser
@pytest.mark.parametrize("name", [p.name for p in NOTEBOOKS], ids=[p.stem for p in NOTEBOOKS])
def test_every_stored_picture_is_shown_before_anything_runs(edition, lab_page, name, artifacts):
    label, folder, _, _ = edition
    page, requests, errors = lab_page
    expected = stored(nbformat.read(folder / name, as_version=4)) | {"path": name}
    assert not expected["errors"], f"{label}/{name} stores error outputs: {expected['errors']}"
    requests_before, errors_before = len(requests.problems), len(errors)

    page.evaluate("async (path) => { await window.jupyterapp.commands.execute("
                  "'docmanager:open', {path}); }", name)
    try:
        page.wait_for_function(f"(e) => {{ const s = ({SHOWN})(e); return s && s.settled; }}",
                               arg=expected, timeout=45_000, polling=500)
    except Exception:   # noqa: BLE001 (the assertions below say what is missing)
        pass
    shown = page.evaluate(SHOWN, expected)
    assert shown is not None, f"{label}/{name} did not open"
    first = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output img").first
    if first.count():
        first.evaluate("img => img.scrollIntoView({block: 'center'})")
    shot = artifacts / f"lab-{label}-{name.removesuffix('.ipynb')}.png"
    page.screenshot(path=shot)
    page_errors = errors[errors_before:]
    # the tab stays open, behind the next notebook's: closing a notebook (or shutting down its
    # kernel) while its kernel is still starting raises page errors in the next one's check

    print(f"{label}/{name}: pictures stored {expected['images']}, shown {len(shown['images'])}")
    problems = [f"placeholder: {text}" for text in shown["placeholders"]]
    problems += [f"did not load: {i}" for i in shown["images"] if not i["loaded"]]
    if len(shown["images"]) != expected["images"]:
        problems.append(f"{expected['images']} pictures stored, {len(shown['images'])} shown: "
                        f"{shown['images']}")
    if shown["widgetsRendered"] != expected["widgets"]:
        problems.append(f"{expected['widgets']} quiz widgets stored, {shown['widgetsRendered']} "
                        f"rendered (as widgets, or their HTML or image fallbacks): "
                        f"{shown['widgets']}")
    if shown["progress"] != expected["progress"]:
        problems.append(f"{expected['progress']} progress bars stored, {shown['progress']} shown")
    problems += requests.problems[requests_before:] + [f"page error: {e}" for e in page_errors]
    assert not problems, f"{label}/{name}:\n" + "\n".join(problems)
    assert_not_blank(shot)
