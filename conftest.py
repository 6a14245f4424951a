"""Test-run settings for `pytest` and `pytest --nbval notebooks/` (loaded before anything else).

- Quick mode is on unless COURSE_QUICK says otherwise.
- Each run's log ends with its time by file (a notebook, a test module), beside pytest's
  slowest tests: where CI's time goes (issue 37 keeps it as a target).
- Each run gets its own Ray temp dir, and token authentication is off for the run, so two
  runs on one machine never share /tmp/ray or rewrite each other's ~/.ray/auth_token.
Notebook kernels inherit these variables (nbval runs them with --nbval-current-env).
"""

import os
import shutil
import tempfile
from collections import defaultdict

os.environ.setdefault("COURSE_QUICK", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TQDM_MININTERVAL", "1")
os.makedirs(os.environ.get("RAY_TMPDIR", "/tmp"), exist_ok=True)   # a RAY_TMPDIR not made yet
_RAY_TMPDIR = tempfile.mkdtemp(prefix="rt-", dir=os.environ.get("RAY_TMPDIR", "/tmp"))
os.environ["RAY_TMPDIR"] = _RAY_TMPDIR


def pytest_unconfigure(config):
    shutil.rmtree(_RAY_TMPDIR, ignore_errors=True)


_SECONDS_BY_FILE: dict[str, float] = defaultdict(float)
_TESTS_BY_FILE: dict[str, set] = defaultdict(set)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    _SECONDS_BY_FILE[path] += report.duration             # setup, call and teardown
    _TESTS_BY_FILE[path].add(report.nodeid)


def pytest_terminal_summary(terminalreporter):
    longest = sorted(_SECONDS_BY_FILE.items(), key=lambda item: -item[1])[:15]
    if not longest:
        return
    terminalreporter.section("time by file (setup, call and teardown), the longest 15")
    for path, seconds in longest:
        terminalreporter.write_line(f"{seconds:8.1f} s  {path} ({len(_TESTS_BY_FILE[path])} "
                                    f"tests)")
