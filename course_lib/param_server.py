"""A parameter server: one actor that holds the newest weights of named networks, versioned.

The parallel-SAC article's pattern: the learner pushes weights (or gradients) to the server,
rollout and test workers pull them when they are newer than their own copy.

Two layers, so the logic can be tested without Ray:

- `ParameterStore`: a plain class with the logic (validation, versions, SGD step, save/load).
- `ParameterStoreActor`: the same class as a Ray actor (the naming rule of every such pair:
  the actor is the plain class's name plus `Actor`, as `replay.ReplayStoreActor`). Its `pull`
  returns an ObjectRef instead of the arrays: the actor `ray.put`s each version's weights
  once, and every caller maps that one object-store copy (zero-copy numpy) instead of the
  actor serialising the weights again for each caller. The caller therefore gets twice:

      version, ref = ray.get(ps.pull.remote("policy", known_version))
      weights = ray.get(ref) if ref is not None else None

  `pull_weights(ps, name, known_version)` does exactly this. Errors raised in the actor reach
  the caller as `ray.exceptions.RayTaskError`, which in Ray 2.x also subclasses the original
  type (`except ValueError` works) but prints the whole remote traceback;
  `ray_tools.get_result(ref)` re-raises the original exception with its one-line message.

Versions count updates of a name: the first push gives version 1, every push or gradient step
adds one, and a name's version never goes backwards, not even when `load` drops it or brings
it back. `pull(name, known_version)` returns `(version, None)` when the caller is up to date,
so a worker that polls every episode only copies weights that changed. Stored arrays are never
changed in place (a gradient step builds new ones), so weights already pulled stay as they
were.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import ray

from course_lib.errors import UnknownNameError
from course_lib.ray_tools import get_result

Weights = dict[str, np.ndarray]
FORMAT_TAG = "course_lib.param_server/1"   # stored in every saved file, checked on load


class ParameterStore:
    """Named, versioned weights (dicts of numpy arrays) with checked updates. No Ray inside.

    | method                              | returns                                      |
    | ----------------------------------- | -------------------------------------------- |
    | `push(name, weights)`               | new version (int)                            |
    | `push_gradients(name, grads, lr)`   | new version; applies w <- w - lr * g         |
    | `pull(name, known_version=-1)`      | (version, weights), or (version, None) when  |
    |                                     | known_version is already the newest          |
    | `version(name)` / `names()`         | int / sorted list of names                   |
    | `save(path)` / `load(path)`         | path written / names loaded                  |
    """

    def __init__(self):
        self._weights: dict[str, Weights] = {}
        # the newest version of every name ever held, including names a `load` dropped: a
        # name pushed or loaded again continues from here, so its versions never repeat
        self._versions: dict[str, int] = {}

    # -- reading ---------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self._weights)

    def version(self, name: str) -> int:
        self._check_known(name)
        return self._versions[name]

    def pull(self, name: str, known_version: int = -1) -> tuple[int, Weights | None]:
        """(version, weights), or (version, None) if the caller already has this version.

        The weights are the store's own arrays, which it never changes afterwards (updates
        build new arrays); copy them before changing them in place yourself.
        """
        version = self.version(name)
        if version == known_version:
            return version, None
        return version, self._weights[name]

    # -- writing ---------------------------------------------------------------------------

    def push(self, name: str, weights: Weights) -> int:
        """Store a full set of weights. The first push of `name` fixes its keys, shapes and
        dtypes; later pushes must have the same keys and shapes (values are cast to the
        first push's dtypes). Returns the new version."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"a parameter name must be a non-empty string without '/', "
                             f"got {name!r}")
        new = {key: np.array(value) for key, value in _as_dict(weights, "weights").items()}
        if name in self._weights:
            old = self._weights[name]
            _check_same_layout(name, old, new, "push")
            new = {key: value.astype(old[key].dtype, copy=False) for key, value in new.items()}
        self._weights[name] = new           # np.array copied: callers keep their arrays
        self._versions[name] = self._versions.get(name, 0) + 1
        return self._versions[name]

    def push_gradients(self, name: str, grads: Weights, lr: float) -> int:
        """One SGD step on the stored weights, w <- w - lr * g for every key; new version.

        The step writes new arrays (copy-on-write): a caller still holding the previous
        version's arrays from `pull` keeps exactly what it pulled.
        """
        self._check_known(name)
        weights = self._weights[name]
        grads = {key: np.asarray(value) for key, value in _as_dict(grads, "grads").items()}
        _check_same_layout(name, weights, grads, "push_gradients")
        # not `w -= ...`: that would change arrays that pull() has already handed out
        self._weights[name] = {key: (w - lr * grads[key]).astype(w.dtype, copy=False)
                               for key, w in weights.items()}
        self._versions[name] += 1
        return self._versions[name]

    # -- disk ------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> str:
        """Write every name's weights and version to one .npz file, atomically.

        The file is written next to `path` under a temporary name, then renamed over `path`:
        a crash mid-write never leaves a half-written file where a good one was.
        """
        path = Path(path)
        arrays = {"__format__": np.array(FORMAT_TAG)}
        for name, weights in self._weights.items():
            arrays[f"version/{name}"] = np.array(self._versions[name])
            for key, value in weights.items():
                arrays[f"weights/{name}/{key}"] = value
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)       # a file object: savez adds no ".npz" suffix
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return str(path)

    def load(self, path: str | os.PathLike) -> list[str]:
        """Replace the contents with a file written by `save`; returns the names loaded.

        Loaded versions are the saved ones, except that a name this store holds or ever held
        moves to a version above the last one it had, so callers who pulled before notice the
        change. Names not in the file are dropped; if pushed again, they continue from their
        last version instead of restarting at 1.
        """
        weights, versions = read_parameter_file(path)
        for name in versions:
            versions[name] = max(versions[name], self._versions.get(name, 0) + 1)
        self._weights = weights
        self._versions.update(versions)     # update, not replace: dropped names keep theirs
        return self.names()

    def _check_known(self, name: str) -> None:
        if name not in self._weights:
            raise UnknownNameError(f"no parameters named {name!r}; known names: "
                                   f"{self.names() or 'none yet (push first)'}")


def read_parameter_file(path: str | os.PathLike) -> tuple[dict[str, Weights], dict[str, int]]:
    """(weights by name, versions by name) from a file written by `ParameterStore.save`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no parameter-server file at {path}: check the path, or call "
                                f"save({str(path)!r}) first (on the node running the server)")
    try:
        with np.load(path, allow_pickle=False) as data:     # a .npy file gives no NpzFile
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, AttributeError, TypeError,
            zipfile.BadZipFile) as err:
        raise ValueError(f"{path} is not a parameter-server file "
                         f"(np.load failed: {type(err).__name__}: {err})") from None
    if str(arrays.pop("__format__", "")) != FORMAT_TAG:
        raise ValueError(f"{path} is not a parameter-server file (no {FORMAT_TAG!r} tag)")
    weights: dict[str, Weights] = {}
    versions: dict[str, int] = {}
    for key, value in arrays.items():
        kind, _, rest = key.partition("/")
        if kind == "version":
            versions[rest] = int(value)
        elif kind == "weights":
            name, _, array_key = rest.partition("/")
            weights.setdefault(name, {})[array_key] = value
    if set(weights) != set(versions):
        raise ValueError(f"{path} is not a parameter-server file (weights and versions "
                         f"disagree: {sorted(weights)} vs {sorted(versions)})")
    return weights, versions


def _as_dict(weights, what: str) -> dict:
    if not isinstance(weights, dict):
        raise TypeError(f"{what} must be a dict of numpy arrays, got {type(weights).__name__}")
    return weights


def _check_same_layout(name: str, old: Weights, new: Weights, call: str) -> None:
    """ValueError naming the first key or shape that differs from the stored weights."""
    missing, unexpected = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    if missing or unexpected:
        raise ValueError(f"{call}({name!r}): keys differ from the stored weights: "
                         f"missing {missing}, unexpected {unexpected}")
    for key, value in new.items():
        if value.shape != old[key].shape:
            raise ValueError(f"{call}({name!r}): {key!r} has shape {value.shape}, "
                             f"expected {old[key].shape} (set by the first push)")


@ray.remote(num_cpus=0)
class ParameterStoreActor(ParameterStore):
    """`ParameterStore` as a Ray actor; `pull` returns `(version, ObjectRef or None)`.

    Each version is `ray.put` at most once, at its first pull, and the ObjectRef is handed to
    every caller: N readers share one object-store copy. Use `pull_weights` on the caller side.
    num_cpus=0: the server mostly waits, so it takes no CPU slot from the workers.
    """

    def __init__(self):
        super().__init__()
        self._refs: dict[str, tuple[int, ray.ObjectRef]] = {}   # name -> (version, ref)

    def pull(self, name: str, known_version: int = -1) -> tuple[int, ray.ObjectRef | None]:
        version, weights = super().pull(name, known_version)
        if weights is None:
            return version, None
        if self._refs.get(name, (None,))[0] != version:
            self._refs[name] = (version, ray.put(weights))
        return version, self._refs[name][1]     # inside a tuple: Ray passes the ref, not data

    def load(self, path: str | os.PathLike) -> list[str]:
        """`ParameterStore.load`, then forget the cached objects of the versions before it."""
        names = super().load(path)
        self._refs.clear()          # release the old objects; every loaded version is new
        return names


def pull_weights(ps, name: str, known_version: int = -1) -> tuple[int, Weights | None]:
    """Caller side of `ParameterStoreActor.pull`: (version, weights), or (version, None) if
    `known_version` is current. The returned arrays are read-only views of shared memory."""
    version, ref = get_result(ps.pull.remote(name, known_version))
    return version, (None if ref is None else ray.get(ref))


def pull_into(ps, name: str, module, known_version: int = -1) -> int:
    """Load the newest weights of `name` into the torch `module` if they are newer than
    `known_version`; returns the version `module` now has (unchanged when nothing was pushed
    under `name` yet, as for a worker that starts before the learner's first push)."""
    from course_lib.nets import set_weights

    try:
        version, weights = pull_weights(ps, name, known_version)
    except UnknownNameError:
        return known_version
    if weights is not None:
        set_weights(module, weights)
    return version


class CachedWeights:
    """A caller's copy of the newest weights of one name: `get(ps, name)` pulls with the version
    it holds, so the server copies the weights only when they changed (notebook 03's exercise,
    and what an asynchronous data-parallel worker uses by default)."""

    def __init__(self):
        self.version, self.weights = -1, None

    def get(self, ps, name: str) -> Weights:
        version, weights = pull_weights(ps, name, self.version)
        if weights is not None:
            self.version, self.weights = version, weights
        return self.weights
