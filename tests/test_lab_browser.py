"""The attendee's view: JupyterLab started as `make lab` starts it, notebook 00 opened and run
in headless Chromium, its live progress display and plots rendered, nothing failed to load.

Slow (~1-2 minutes: JupyterLab, a kernel, Ray); deselect with `-m "not browser"`. The server
runs on a copy of notebooks/ (JupyterLab autosaves, and the committed outputs must stay the
full-mode ones), in quick mode, with its own RAY_TMPDIR, Jupyter dirs and a random token. The
server, the kernel and the kernel's Ray processes all carry a marker in their environment, and
are killed by it at the end, pass or fail.
"""

import shutil

import pytest
from browser_support import ROOT, RequestLog, assert_not_blank, jupyter_lab

NOTEBOOK = "00_setup_check.ipynb"
RUN_TIMEOUT_S = 300
# The notebook as JupyterLab's model has it: finished? which outputs are errors (with the text
# of the cell's other outputs, e.g. the set-up report that says why)?
STATE = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const cells = Array.from(panel.content.model.cells).filter(c => c.type === 'code');
    const outputs = c => Array.from({length: c.outputs.length},
                                    (_, i) => c.outputs.get(i).toJSON());
    const failed = cells.flatMap(c => outputs(c).filter(o => o.output_type === 'error')
        .map(o => o.ename + ': ' + o.evalue + ' | after: ' + cells.slice(0, cells.indexOf(c))
            .flatMap(outputs).slice(-1).map(p => p.text || (p.data || {})['text/plain'])));
    const done = cells.every(c => c.executionCount !== null)
        && panel.sessionContext.session.kernel.status === 'idle';
    return {failed, done};
}"""


@pytest.fixture
def lab_server(tmp_path):
    """`jupyter lab` on a copy of notebooks/ (as `make lab` runs it); yields its base URL and
    token; stops the server, its kernels and their Ray processes afterwards."""
    root = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", root)
    with jupyter_lab(root, tmp_path) as server:
        yield server


@pytest.mark.browser
def test_notebook_00_runs_in_jupyterlab(lab_server, browser, artifacts):
    base, token = lab_server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    requests = RequestLog(page, allowed=(base, "data:", "blob:", base.replace("http", "ws")))
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}&reset")
        page.wait_for_function(
            """() => {
                const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                const k = w && w.sessionContext && w.sessionContext.session
                          && w.sessionContext.session.kernel;
                return k && k.status === 'idle';
            }""", timeout=90_000)
        page.evaluate("""async () => {
            const app = window.jupyterapp, panel = app.shell.currentWidget;
            app.shell.activateById(panel.id);
            await app.commands.execute('notebook:clear-all-cell-outputs');
            await app.commands.execute('notebook:run-all-cells');
        }""")
        # done when every code cell ran and the kernel is idle, or a cell failed (Run All
        # stops there)
        page.wait_for_function(
            f"() => {{ const s = ({STATE})(); return s.failed.length || s.done; }}",
            timeout=RUN_TIMEOUT_S * 1000, polling=1000)
        state = page.evaluate(f"({STATE})()")
        assert not state["failed"], "a cell failed:\n" + "\n".join(state["failed"])

        outputs = page.locator(".jp-OutputArea-output")
        assert "Error displaying widget" not in page.inner_text("body")
        progress = page.locator(".jp-OutputArea-output progress")
        assert progress.count() >= 1, "the live progress display did not render"
        assert float(progress.first.get_attribute("value")) == 1.0
        sizes = page.eval_on_selector_all(
            ".jp-OutputArea-output img",
            "imgs => imgs.map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
        assert len(sizes) >= 2, f"expected the live plot and the histogram, got {sizes}"
        assert all(ok and w > 0 and h > 0 for ok, w, h in sizes), sizes
        assert outputs.filter(has_text="READY").count() >= 1

        progress.first.scroll_into_view_if_needed()
        shot = artifacts / "lab-00_setup_check.png"
        page.screenshot(path=shot)
        assert_not_blank(shot)
    finally:
        page.close()
    assert not requests.problems, "\n".join(requests.problems)
    assert not errors, "\n".join(errors)
