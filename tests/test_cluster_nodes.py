"""The cluster nodes install exactly the lock: cluster/aws.yaml's own `setup_commands` and
`head_setup_commands`, run one by one with bash in a fresh home on this machine, as the
launcher runs them on a new head node. The node's packages must be exactly the lock's (for a
Linux x86_64 node with the node's Python) and pass `pip check`.

Only what this machine cannot reach is replaced, each in one place (`SUBSTITUTES` below):

- uv's install script (astral.sh): the uv of this venv, installed from requirements/uv.txt, is
  copied to ~/.local/bin after checking that it is the version the script URL names;
- the managed CPython (`uv venv --python 3.11.14` downloads it from GitHub): this interpreter's
  base Python, of the same minor version (the test skips if it is another minor version);
- the PyTorch CPU index (download.pytorch.org): a folder holding the same torch CPU wheel
  (TORCH_INDEX, as for the Makefile, default /opt/wheels).

Everything else comes from PyPI, as on a node (uv's download cache is shared with this
machine's, so a second run downloads nothing; offline, uv is told to use that cache only).
The commands of 39201f1 fail here: the head's unpinned `uv pip install boto3` moves
python-dateutil off the lock, and the CPU-torch step looks for torch's requirements on the
PyTorch index alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from packaging.utils import canonicalize_name

from course_lib.cluster import lockfile

ROOT = Path(__file__).resolve().parents[1]
HERE_UV = Path(sys.executable).parent / "uv"


def torch_wheels() -> Path | None:
    """A folder with a CPU torch wheel of the lock's version for this Python, or None."""
    [torch] = [e for e in lockfile.read_lock(ROOT / "requirements/lock.txt") if e.name == "torch"]
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    folder = Path(os.environ.get("TORCH_INDEX", "/opt/wheels"))
    found = folder.is_dir() and any(folder.glob(f"torch-{torch.version}+cpu-{tag}-*.whl"))
    return folder if found else None


def uv_version(uv: Path) -> str:
    return subprocess.run([str(uv), "--version"], capture_output=True, text=True,
                          check=True).stdout.split()[1]


def base_python() -> Path:
    """This venv's base interpreter (not the venv: a node's venv is made from a bare Python)."""
    major, minor = sys.version_info[:2]
    return Path(sys.base_prefix) / "bin" / f"python{major}.{minor}"


#: (pattern in a node command, what replaces it here, why)
SUBSTITUTES = [
    (r"curl -LsSf https://astral\.sh/uv/(?:([\d.]+)/)?install\.sh \| sh",
     "mkdir -p ~/.local/bin && cp {uv} ~/.local/bin/uv",
     "uv's install script: this venv's uv, of the version the URL names"),
    (r"--python 3\.\d+\.\d+", "--python {python}",
     "the managed CPython download: this machine's Python of the same minor version"),
    (r"--index-url https://download\.pytorch\.org/whl/cpu", "--no-index --find-links {torch}",
     "the PyTorch CPU index: a folder with the same CPU wheel"),
]


def node_commands(config: dict, torch: Path) -> list[str]:
    """The head's setup commands with the substitutes applied (each must apply somewhere)."""
    commands = [str(c) for c in config["setup_commands"] + config["head_setup_commands"]]
    values = {"uv": HERE_UV, "python": base_python(), "torch": torch}
    for pattern, replacement, why in SUBSTITUTES:
        hits = [re.search(pattern, c) for c in commands]
        assert any(hits), f"no node command matches {pattern!r} ({why})"
        for hit in filter(None, hits):
            if hit.groups() and hit.group(1):          # the pinned uv is the one copied
                assert hit.group(1) == uv_version(HERE_UV), (hit.group(1), why)
        commands = [re.sub(pattern, replacement.format(**values), c) for c in commands]
    return commands


def pypi_reachable() -> bool:
    try:
        urllib.request.urlopen("https://pypi.org/simple/uv/", timeout=10).close()
        return True
    except OSError:
        return False


def ship_file_mounts(config: dict, root: Path, home: Path) -> None:
    """What `ray up` copies to the head (the token: a stand-in, never the real one)."""
    for remote, local in config["file_mounts"].items():
        target = home / remote.removeprefix("~/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if "auth_token" in remote:
            target.write_text("test-token-not-a-secret\n")
        elif (root / local).is_dir():
            shutil.copytree(root / local, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(root / local, target)


def install_head_node(root: Path, home: Path) -> Path:
    """Run `root`'s cluster/aws.yaml setup and head setup commands in `home`; returns the
    node's venv Python. Raises AssertionError naming the command that failed."""
    torch = torch_wheels()
    if torch is None:
        pytest.skip("no CPU torch wheel of the lock's version for this Python here and the "
                    "PyTorch index is unreachable: set TORCH_INDEX=<folder of wheels>")
    config = yaml.safe_load((root / "cluster/aws.yaml").read_text())
    ship_file_mounts(config, root, home)
    cache = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
    network = {k: v for k, v in os.environ.items()      # this machine's CA bundle and proxy
               if k in ("SSL_CERT_FILE", "SSL_CERT_DIR") or k.lower().endswith("_proxy")}
    env = {**network, "HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin",
           "LANG": "C.UTF-8",
           "UV_CACHE_DIR": str(cache), "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1",
           **({} if pypi_reachable() else {"UV_OFFLINE": "1"})}
    for command in node_commands(config, torch):
        done = subprocess.run(["bash", "-c", command], env=env, cwd=home, text=True,
                              capture_output=True, timeout=1800)
        assert done.returncode == 0, f"node command failed: {command}\n{done.stderr[-3000:]}"
    return home / "venv" / "bin" / "python"


def installed(python: Path) -> dict[str, str]:
    """{name: version} of every distribution in the node's venv but the workshop itself."""
    code = ("import importlib.metadata as md, json; print(json.dumps({d.metadata['Name']: "
            "d.version for d in md.distributions()}))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return {canonicalize_name(k): v for k, v in json.loads(out.stdout).items()
            if canonicalize_name(k) != "course-lib"}


def node_lock(root: Path, python: Path) -> dict[str, str]:
    """The lock's versions for this node: Linux x86_64 with the node venv's Python."""
    version = subprocess.run([str(python), "-c", "import platform; print(platform."
                              "python_version())"], capture_output=True, text=True,
                             check=True).stdout.strip()
    return lockfile.pins(lockfile.read_lock(root / "requirements/lock.txt"),
                         lockfile.marker_environment("linux-x86_64", version))


def pip_check(python: Path) -> str:
    """`pip check` of the node's venv (it has no pip of its own: this venv's pip, pointed at
    it), and uv's; returns their output, raising if either finds a problem."""
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "check"],
                         capture_output=True, text=True)
    uv = subprocess.run([str(HERE_UV), "pip", "check", "--python", str(python)],
                        capture_output=True, text=True)
    assert pip.returncode == 0 == uv.returncode, pip.stdout + pip.stderr + uv.stderr
    return pip.stdout + uv.stdout + uv.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="the nodes are Linux x86_64")
def test_a_head_node_installs_exactly_the_lock(tmp_path):
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the nodes run Python 3.11; this test stands this Python in for theirs")
    python = install_head_node(ROOT, tmp_path / "home")
    node, lock = installed(python), node_lock(ROOT, python)
    wrong = {name: (version, lock.get(name)) for name, version in node.items()
             if lock.get(name) != version.split("+")[0]}
    assert not wrong, f"on the node (version, lock's): {wrong}"
    assert {"ray", "torch", "gymnasium", "boto3", "botocore", "python-dateutil"} <= set(node)
    assert not {"jupyterlab", "pytest", "cpprb"} & set(node)      # the laptop's extras
    assert node["torch"].endswith("+cpu")                        # a CPU node: the CPU build
    assert "No broken requirements" in pip_check(python)
