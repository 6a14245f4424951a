"""Test-run settings for `pytest` and `pytest --nbval notebooks/` (loaded before anything else).

- Quick mode is on unless COURSE_QUICK says otherwise.
- Each run gets its own Ray temp dir, and token authentication is off for the run, so two
  runs on one machine never share /tmp/ray or rewrite each other's ~/.ray/auth_token.
Notebook kernels inherit these variables (nbval runs them with --nbval-current-env).
"""

import os
import shutil
import tempfile

os.environ.setdefault("COURSE_QUICK", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TQDM_MININTERVAL", "1")
os.makedirs(os.environ.get("RAY_TMPDIR", "/tmp"), exist_ok=True)   # a RAY_TMPDIR not made yet
_RAY_TMPDIR = tempfile.mkdtemp(prefix="rt-", dir=os.environ.get("RAY_TMPDIR", "/tmp"))
os.environ["RAY_TMPDIR"] = _RAY_TMPDIR


def pytest_unconfigure(config):
    shutil.rmtree(_RAY_TMPDIR, ignore_errors=True)
