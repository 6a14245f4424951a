"""Notebook 05's TensorBoard cell in a kernel started the way JupyterLab starts it under
`make lab`: jupyter_client's KernelManager with the `python3` kernelspec, and a PATH without
the environment's `bin/` (JupyterLab started as `.venv/bin/jupyter lab` passes its own PATH on,
and on a laptop that PATH does not hold `.venv/bin`). The cell must serve TensorBoard on
localhost with the run's event files, and TensorBoard must stop with the kernel."""

import json
import os
import re
import shutil
import socket
import time
import urllib.request
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "05_apex.ipynb"
TIMEOUT_S = 120


def tensorboard_cell() -> str:
    cells = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells
             if c.cell_type == "code" and "tensorboard" in c.source.lower()]
    assert len(cells) == 1, f"expected one TensorBoard cell in {NOTEBOOK.name}, got {len(cells)}"
    return cells[0].source


def laptop_env() -> dict[str, str]:
    """This process's environment with every PATH entry that holds a `tensorboard` command
    (the environment's bin/ among them) left out, and this checkout importable."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not shutil.which("tensorboard", path=d)]
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PATH=os.pathsep.join(path), PYTHONPATH=python_path)


def run_in_lab_kernel(cells: list[str], cwd: Path) -> tuple[list[list[dict]], object]:
    """Start a `python3` kernel as JupyterLab does, run each of `cells` in it; (each cell's
    outputs' contents, the kernel manager: shut it down when done)."""
    from jupyter_client import KernelManager

    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=laptop_env(), cwd=str(cwd))
    outputs = []
    client = manager.client()
    try:
        client.start_channels()
        client.wait_for_ready(timeout=TIMEOUT_S)
        for code in cells:
            outputs.append([])
            client.execute_interactive(
                code, timeout=TIMEOUT_S,
                output_hook=lambda msg: outputs[-1].append(msg["content"])
                if msg["msg_type"] in {"stream", "display_data", "update_display_data",
                                       "execute_result", "error"} else None)
    except BaseException:
        manager.shutdown_kernel(now=True)
        raise
    finally:
        client.stop_channels()
    return outputs, manager


def served_port(outputs: list[dict]) -> int:
    """The port the cell's TensorBoard frame points at (TensorBoard's own iframe HTML)."""
    html = " ".join(o.get("data", {}).get("text/html", "") for o in outputs)
    found = re.search(r"const port = (\d+);", html)
    text = "\n".join(o.get("text") or o.get("data", {}).get("text/plain", "")
                     or f"{o.get('ename')}: {o.get('evalue')}" for o in outputs)
    assert found and int(found.group(1)), f"no TensorBoard frame in the cell's output:\n{text}"
    return int(found.group(1))


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


def test_tensorboard_cell_serves_in_a_kernel_started_like_make_lab(tmp_path):
    from course_lib.tensorboard_log import log_scalars, tensorboard_writer

    writer = tensorboard_writer(tmp_path / "results" / "apex_CartPole-v1_test")
    for step in range(3):
        log_scalars(writer, {"env_steps": 100 * step, "eval_return": float(step)})
    writer.close()
    assert shutil.which("tensorboard", path=laptop_env()["PATH"]) is None

    # run twice, as an attendee re-running the cell: the same TensorBoard both times
    outputs, manager = run_in_lab_kernel([tensorboard_cell()] * 2, cwd=tmp_path)
    try:
        port = served_port(outputs[0])
        assert served_port(outputs[1]) == port
        status, _ = get(f"http://localhost:{port}/")
        assert status == 200
        deadline, runs = time.monotonic() + TIMEOUT_S, []
        while "apex_CartPole-v1_test" not in runs and time.monotonic() < deadline:
            runs = json.loads(get(f"http://localhost:{port}/data/runs")[1])
            time.sleep(0.5)
        assert runs == ["apex_CartPole-v1_test"], f"TensorBoard lists the runs {runs}"
    finally:
        manager.shutdown_kernel(now=True)
    with socket.socket() as probe:
        assert probe.connect_ex(("localhost", port)) != 0, \
            f"TensorBoard still serves port {port} after its kernel stopped"

