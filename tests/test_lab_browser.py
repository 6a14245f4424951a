"""The attendee's view: JupyterLab started as `make lab` starts it, notebook 00 opened and run
in headless Chromium, its live progress display and plots rendered, nothing failed to load.

Slow (~1-2 minutes: JupyterLab, a kernel, Ray); deselect with `-m "not browser"`. The server
runs on a copy of notebooks/ (JupyterLab autosaves, and the committed outputs must stay the
full-mode ones), in quick mode, with its own RAY_TMPDIR, Jupyter dirs and a random token. The
server, the kernel and the kernel's Ray processes all carry a marker in their environment, and
are killed by it at the end, pass or fail.
"""

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from browser_support import RequestLog, assert_not_blank

from course_lib.cluster import free_port, kill_marked

ROOT = Path(__file__).resolve().parents[1]
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


def _get(url: str, timeout_s: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return json.loads(response.read())


@pytest.fixture
def lab_server(tmp_path):
    """`jupyter lab notebooks/` (as `make lab` runs it) on a free port; yields its base URL
    and token; stops the server, its kernels and their Ray processes afterwards."""
    root = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", root)
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, COURSE_QUICK="1", RAY_AUTH_MODE="disabled",
               # short: Ray's socket paths under it must stay within 107 bytes
               RAY_TMPDIR=tempfile.mkdtemp(prefix="rt-lab-", dir="/tmp"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "lab-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"),
               COURSE_LAB_TEST=str(tmp_path))
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--ServerApp.token={token}", "--ServerApp.port_retries=0",
           "--LabApp.expose_app_in_browser=True", str(root)]
    if os.geteuid() == 0:
        cmd.insert(2, "--allow-root")                 # as the Makefile's LAB_ARGS does
    log = open(tmp_path / "jupyter.log", "w")        # noqa: SIM115 (closed below)
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n"
                                + (tmp_path / "jupyter.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, token
    finally:
        try:                                         # shut the kernels down politely first
            for kernel in _get(f"{base}/api/kernels?token={token}"):
                request = urllib.request.Request(
                    f"{base}/api/kernels/{kernel['id']}?token={token}", method="DELETE")
                urllib.request.urlopen(request, timeout=10).close()
        except OSError:
            pass
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=10)
        kill_marked("COURSE_LAB_TEST", str(tmp_path))   # kernels and Ray processes left behind
        log.close()
        shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)


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
