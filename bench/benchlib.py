"""What every benchmark script shares: a private Ray temp dir, and writing its JSON."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path


@contextlib.contextmanager
def private_ray_tmp():
    """Give Ray its own temp dir (unless RAY_TMPDIR is set) and no token auth, for the block:
    a benchmark never shares /tmp/ray or ~/.ray/auth_token with another Ray on the machine."""
    own = "RAY_TMPDIR" not in os.environ
    if own:
        os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="ray-bench-")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    try:
        yield os.environ["RAY_TMPDIR"]
    finally:
        if own:
            shutil.rmtree(os.environ.pop("RAY_TMPDIR"), ignore_errors=True)


def write_json(result: dict, path) -> Path:
    """`result` as indented JSON at `path` (folders created); prints where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return path
