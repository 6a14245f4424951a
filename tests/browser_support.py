"""Helpers of the browser tests (test_slides.py, test_lab_browser.py, test_lab_pictures.py)."""

import contextlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def assert_not_blank(png_path: Path, min_std: float = 0.03) -> None:
    """A screenshot that shows something: not one flat colour."""
    import matplotlib.image

    pixels = matplotlib.image.imread(png_path)[..., :3]
    assert pixels.std() > min_std, f"{png_path.name} looks blank (pixel std {pixels.std():.4f})"


class RequestLog:
    """Every request a page makes, and each one that failed or left the allowed origins."""

    def __init__(self, page, allowed: tuple[str, ...]):
        self.allowed, self.problems = allowed, []
        page.on("request", self._request)
        page.on("requestfailed", lambda r: self.problems.append(
            f"failed: {r.url[:120]} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(
            f"HTTP {r.status}: {r.url[:120]}"))

    def _request(self, request) -> None:
        if not request.url.startswith(self.allowed):
            self.problems.append(f"outside {self.allowed}: {request.url[:120]}")


def _get_json(url: str, timeout_s: float = 5.0):
    import json
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return json.loads(response.read())


@contextlib.contextmanager
def jupyter_lab(root: Path, workdir: Path, settings: dict | None = None):
    """`jupyter lab root` (as `make lab` runs it) on a free port, in quick mode, with its own
    RAY_TMPDIR, Jupyter dirs under `workdir` and a random token; yields (base URL, token).

    `settings` maps a plugin id ("@jupyterlab/notebook-extension:tracker") to user settings.
    At the end, pass or fail, the kernels are shut down, the server stopped, and every process
    carrying the server's marker (kernels, their Ray processes) killed."""
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

    import pytest

    from course_lib.cluster import free_port, kill_marked

    settings_dir = workdir / "lab-settings"
    for plugin, values in (settings or {}).items():
        package, name = plugin.split(":")
        path = settings_dir / package / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, COURSE_QUICK="1", RAY_AUTH_MODE="disabled",
               # short: Ray's socket paths under it must stay within 107 bytes
               RAY_TMPDIR=tempfile.mkdtemp(prefix="rt-lab-", dir="/tmp"),
               JUPYTER_CONFIG_DIR=str(workdir / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(workdir / "jupyter-runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(settings_dir),
               JUPYTERLAB_WORKSPACES_DIR=str(workdir / "lab-workspaces"),
               COURSE_LAB_TEST=str(workdir))
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--ServerApp.token={token}", "--ServerApp.port_retries=0",
           "--LabApp.expose_app_in_browser=True", str(root)]
    if os.geteuid() == 0:
        cmd.insert(2, "--allow-root")                 # as the Makefile's LAB_ARGS does
    log_path = workdir / "jupyter.log"
    log = open(log_path, "w")                        # noqa: SIM115 (closed below)
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _get_json(f"{base}/api/status?token={token}")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + log_path.read_text()[-3000:])
                time.sleep(0.5)
        yield base, token
    finally:
        try:                                         # shut the kernels down politely first
            for kernel in _get_json(f"{base}/api/kernels?token={token}"):
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
        kill_marked("COURSE_LAB_TEST", str(workdir))   # kernels and Ray processes left behind
        log.close()
        shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)
