"""The course_lib spine: quick mode, configs, Ray start-up, progress display, plotting."""

import time
from dataclasses import dataclass
from typing import ClassVar

import matplotlib
import pytest

matplotlib.use("Agg")

from course_lib import config, ray_tools as ray_setup
from course_lib.progress import LiveProgress
from course_lib.viz.display import show_diagram, show_source, show_svg
from course_lib.viz.plotting import plot_comparison, plot_learning_curves
from course_lib.viz.timeline import plot_timeline, task_spans


@dataclass
class ToyConfig(config.Config):
    QUICK: ClassVar[dict] = {"steps": 10}
    steps: int = 1000
    lr: float = 1e-3
    name: str = "toy"
    seed: int | None = None
    hidden: tuple[int, ...] = (64, 64)


@pytest.mark.parametrize("value,expected", [("1", True), ("true", True), ("0", False), ("", False)])
def test_quick_mode_reads_the_variable(monkeypatch, value, expected):
    monkeypatch.setenv(config.QUICK_ENV_VAR, value)
    assert config.quick_mode() is expected
    assert ToyConfig.preset().steps == (10 if expected else 1000)


def test_quick_mode_refuses_garbage(monkeypatch):
    monkeypatch.setenv(config.QUICK_ENV_VAR, "maybe")
    with pytest.raises(ValueError, match="COURSE_QUICK='maybe'"):
        config.quick_mode()


def test_quick_mode_is_on_under_pytest():
    assert config.quick_mode()


def test_config_updated_checks_keys_and_types():
    cfg = ToyConfig().updated({"lr": 1, "seed": 3})
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float) and cfg.seed == 3
    assert ToyConfig().updated({"seed": None}).seed is None
    assert ToyConfig().updated({"hidden": [32, 32]}).hidden == (32, 32)   # JSON lists
    with pytest.raises(ValueError, match="unknown config key 'stepz'.*steps"):
        ToyConfig().updated({"stepz": 5})
    with pytest.raises(ValueError, match="'steps' must be an int"):
        ToyConfig().updated({"steps": True})
    with pytest.raises(ValueError, match="'steps' must be int"):
        ToyConfig().updated({"steps": "many"})


def test_init_ray_fails_fast_on_an_unreachable_address():
    start = time.perf_counter()
    with pytest.raises(ray_setup.RayStartError, match="Cannot reach a Ray cluster at 127.0.0.1:9"):
        ray_setup.init_ray(address="127.0.0.1:9")
    assert time.perf_counter() - start < 10


def test_init_ray_rejects_a_malformed_address():
    with pytest.raises(ray_setup.RayStartError, match="not of the form host:port"):
        ray_setup.init_ray(address="my-cluster")


def test_init_ray_gives_up_after_its_deadline(monkeypatch):
    """A start that hangs is interrupted and reported, not waited on forever."""
    monkeypatch.setattr(ray_setup.ray, "init", lambda **kw: time.sleep(30))
    monkeypatch.setattr(ray_setup.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_setup.ray, "shutdown", lambda: None)
    start = time.perf_counter()
    with pytest.raises(ray_setup.RayStartError, match="did not start within 1 s"):
        ray_setup.init_ray(timeout_s=1.0)
    assert time.perf_counter() - start < 5


def test_init_ray_is_quiet_unless_asked(monkeypatch):
    """Worker prints are off by default (log_to_driver=False); any ray.init keyword, such as
    log_to_driver=True to see them, overrides a default instead of clashing with it."""
    calls = []
    monkeypatch.setattr(ray_setup.ray, "init", lambda **kw: calls.append(kw) or "ctx")
    monkeypatch.setattr(ray_setup.ray, "is_initialized", lambda: False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ray_setup.init_ray() == "ctx"
    assert ray_setup.init_ray(log_to_driver=True) == "ctx"
    assert [kw["log_to_driver"] for kw in calls] == [False, True]


def test_init_ray_starts_and_reuses(ray_local):
    assert ray_local.is_initialized()
    assert ray_setup.init_ray() is not None  # a second call returns the running instance
    assert ray_local.get(ray_local.remote(lambda: 7).remote()) == 7


def test_live_progress_in_a_terminal(capsys):
    progress = LiveProgress(total=100, desc="demo", unit="steps", notebook=False, min_interval_s=0)
    for step in (10, 50, 100):
        progress.update(step, loss=0.5)
    progress.close()
    err = capsys.readouterr().err
    assert "100/100" in err and "loss=0.5" in err


def test_live_progress_in_a_notebook_updates_one_display(monkeypatch):
    shown, updated = [], []

    class Handle:
        def update(self, obj):
            updated.append(obj)

    def fake_display(obj, display_id=False):
        shown.append(obj)
        return Handle()

    import IPython.display
    monkeypatch.setattr(IPython.display, "display", fake_display)
    progress = LiveProgress(total=10, desc="demo", plot="ret", notebook=True, min_interval_s=0)
    for i in range(1, 11):
        progress.update(i, ret=float(i))
    progress.close()
    assert len(shown) == 2  # one HTML block and one figure, created once
    assert "10/10" in updated[-2].data and "<b>ret</b> 10" in updated[-2].data
    assert progress.history[-1] == (10, 10.0)


def test_plots_draw_what_they_are_given():
    ax = plot_learning_curves({"a": ([0, 1, 2], [1, 2, 3]), "b": ([0, 1], [3, 2])}, threshold=2)
    assert len(ax.lines) == 3
    ax = plot_timeline(task_spans([("w1", 0.0, 1.0), ("w2", 0.5, 1.0), ("w1", 1.0, 2.0)]))
    assert len(ax.collections) == 3           # one bar per task, each its own colour
    assert [t.get_text() for t in ax.get_yticklabels()] == ["w2", "w1"]   # first row on top
    ax = plot_comparison({"slow": 4.0, "fast": 1.0})
    assert "(4.0x)" in ax.texts[1].get_text()


def test_show_source_is_the_real_code():
    source = show_source(config.quick_mode)
    assert repr(source).startswith("def quick_mode()")
    assert source._repr_markdown_().startswith("```python\ndef quick_mode()")


def test_in_notebook_knows_kernels_and_their_subclasses(monkeypatch):
    """Colab's shell subclasses ipykernel's ZMQInteractiveShell under another name; a terminal
    IPython is no kernel (display handles do not work there)."""
    import IPython
    from ipykernel.zmqshell import ZMQInteractiveShell
    from IPython.terminal.interactiveshell import TerminalInteractiveShell

    from course_lib.progress import in_notebook

    class Shell(ZMQInteractiveShell):                 # e.g. google.colab's
        pass

    for shell, expected in ((None, False), (object.__new__(TerminalInteractiveShell), False),
                            (object.__new__(ZMQInteractiveShell), True),
                            (object.__new__(Shell), True)):
        monkeypatch.setattr(IPython, "get_ipython", lambda shell=shell: shell)
        assert in_notebook() is expected, shell


def test_a_diagram_is_an_img_that_untrusted_notebooks_render(tmp_path):
    """JupyterLab shows an image/svg+xml output only in a notebook it trusts (not a fresh clone,
    not the attendee edition): a diagram is an HTML <img> holding the file, as written."""
    import base64

    from IPython.core.formatters import DisplayFormatter

    from course_lib.workspace import REPO

    data, _ = DisplayFormatter().format(show_diagram("apex"))
    assert set(data) == {"text/html", "text/plain"}
    assert data["text/plain"] == "[picture slides/diagrams/apex.svg]"
    page = data["text/html"]
    assert page.startswith('<img src="data:image/svg+xml;base64,') and 'width="860"' in page
    encoded = page.split("base64,")[1].split('"')[0]
    assert base64.b64decode(encoded).decode() == \
        (REPO / "slides" / "diagrams" / "apex.svg").read_text().strip()
    with pytest.raises(FileNotFoundError, match="known: .*'apex'"):
        show_diagram("no_such")
    (tmp_path / "own.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="9"/>')
    assert "width=" not in DisplayFormatter().format(show_svg(tmp_path / "own.svg"))[0][
        "text/html"].split("base64,")[0]
