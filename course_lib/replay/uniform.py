"""Uniform replay: what one transition holds (a *spec*), the checks on every add, and
`ReplayBuffer`, a FIFO ring of preallocated numpy arrays sampled uniformly.

`PrioritizedReplayBuffer` (`course_lib.replay.prioritized`) keeps the same ring and adds
priorities.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

import numpy as np

# ---------------------------------------------------------------------------------------------
# Specs and checks
# ---------------------------------------------------------------------------------------------


def transition_spec(obs_shape, obs_dtype=np.float32, action_shape=(), action_dtype=np.int64,
                    n_step: bool = False) -> dict:
    """The spec of a (s, a, r, s', terminated) transition; with `n_step`, also its discount."""
    spec = {
        "obs": (obs_shape, obs_dtype),
        "action": (action_shape, action_dtype),
        "reward": ((), np.float32),
        "next_obs": (obs_shape, obs_dtype),
        "terminated": ((), np.bool_),
    }
    if n_step:
        spec["discount"] = ((), np.float32)
    return spec


def _normalise_spec(spec) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{name: (shape, dtype)} with shapes as tuples and real dtypes; a bare dtype means shape ()."""
    if not spec:
        raise ValueError("spec is empty: give at least one field, e.g. {'obs': ((4,), np.float32)}")
    clean = {}
    for name, value in spec.items():
        if not isinstance(name, str):
            raise ValueError(f"spec field names must be strings, got {name!r}")
        shape, dtype = value if isinstance(value, tuple) else ((), value)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        clean[name] = (shape, np.dtype(dtype))
    return clean


def positive_int(value, what: str) -> int:
    """`value` as an int if it is a whole number > 0, else ValueError naming `what`."""
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be a positive integer, got {value!r}") from None
    if number <= 0 or isinstance(value, bool):
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return number


def _batched(shape: tuple[int, ...]) -> str:
    """'(batch, 4)' for a field of shape (4,): how a batch of that field must look."""
    return "(batch" + "".join(f", {d}" for d in shape) + ")"


# ---------------------------------------------------------------------------------------------
# Uniform replay: a ring of arrays
# ---------------------------------------------------------------------------------------------



def split_batches(fields: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Fields of shape (count, batch, ...) as `count` batches (views, no copy)."""
    return [{name: array[i] for name, array in fields.items()}
            for i in range(len(next(iter(fields.values()))))]

class ReplayBuffer:
    """A FIFO ring of `capacity` transitions stored field by field; uniform sampling.

    Every transition ever added gets a serial number (its *id*): 0, 1, 2, ... It lives in
    slot `id % capacity` until `capacity` newer transitions have been added, so the buffer
    always holds the ids in [inserted - len(self), inserted).

    | call | returns |
    | --- | --- |
    | `add(batch)` | None; batch[name] has shape (B, *shape) for each field |
    | `sample(batch_size, rng=None)` | {name: array (batch_size, *shape)}, drawn with replacement |
    | `len(buffer)` | number of transitions stored (<= capacity) |
    | `save(path)` / `ReplayBuffer.load(path)` | one .npz file with contents and position |
    """

    def __init__(self, capacity: int, spec, seed=None):
        self.capacity = positive_int(capacity, "capacity")
        self.spec = _normalise_spec(spec)
        self.storage = {name: np.zeros((self.capacity, *shape), dtype)
                        for name, (shape, dtype) in self.spec.items()}
        self.inserted = 0  # transitions ever added; the next one goes to slot inserted % capacity
        self.size = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, batch) -> None:
        """Append a batch; when full, the oldest transitions are overwritten."""
        arrays, n = self._check_batch(batch)
        self._write(arrays, n)

    def sample(self, batch_size: int, rng=None) -> dict[str, np.ndarray]:
        """`batch_size` transitions drawn uniformly with replacement."""
        return self.sample_many(1, batch_size, rng)[0]

    def sample_many(self, count: int, batch_size: int, rng=None) -> list[dict[str, np.ndarray]]:
        """`count` batches, the draws of `count` calls of `sample`, read from the storage in one
        pass (the learner actor draws ahead: `DistributedConfig.batches_per_draw`)."""
        self._check_sample_size(batch_size)
        count, rng = positive_int(count, "count"), self.rng if rng is None else rng
        return split_batches(self.gather(rng.integers(0, self.size, size=(count, batch_size))))

    def gather(self, slots: np.ndarray) -> dict[str, np.ndarray]:
        """Every field at `slots` (any shape: the fields gain its axes in front)."""
        return {name: array[slots] for name, array in self.storage.items()}

    # -- plumbing shared with the prioritized buffer ----------------------------------------

    def _check_batch(self, batch) -> tuple[dict[str, np.ndarray], int]:
        """The batch's fields as arrays plus its length; ValueError on any mismatch."""
        if not isinstance(batch, Mapping):
            raise ValueError(f"batch must be a dict of arrays, got {type(batch).__name__}")
        if batch.keys() != self.spec.keys():
            missing = sorted(self.spec.keys() - batch.keys())
            extra = sorted(batch.keys() - self.spec.keys())
            raise ValueError(f"batch fields do not match the spec: missing {missing}, "
                             f"unexpected {extra}")
        arrays = {}
        for name, (shape, dtype) in self.spec.items():
            array = np.asarray(batch[name])
            if array.ndim != 1 + len(shape) or array.shape[1:] != shape:
                raise ValueError(f"field {name!r} has shape {array.shape}, "
                                 f"expected {_batched(shape)}")
            # the equality test first: it is much cheaper than can_cast, and usually true
            if array.dtype != dtype and not np.can_cast(array.dtype, dtype, "same_kind"):
                raise ValueError(f"field {name!r} has dtype {array.dtype}, "
                                 f"which cannot be stored as {dtype}")
            arrays[name] = array
        lengths = {name: len(array) for name, array in arrays.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"batch fields have different lengths: {lengths}")
        return arrays, next(iter(lengths.values()))

    def _write(self, arrays: dict[str, np.ndarray], n: int) -> tuple[int, int]:
        """Write a checked batch at the ring position; return (first slot, transitions kept).

        A batch longer than the capacity keeps only its newest `capacity` transitions. The
        slots written are first, first + 1, ...: one run, or two when the ring wraps around,
        so the copies are slice assignments (no index arrays).
        """
        kept = min(n, self.capacity)
        first = (self.inserted + n - kept) % self.capacity
        head = min(kept, self.capacity - first)  # how many fit before the end of the ring
        for name, array in arrays.items():
            new = array[n - kept:]
            self.storage[name][first:first + head] = new[:head]
            if head < kept:  # wrapped: the rest goes to the start of the ring
                self.storage[name][:kept - head] = new[head:]
        self.inserted += n
        self.size = min(self.size + n, self.capacity)
        return first, kept

    def _check_sample_size(self, batch_size) -> None:
        batch_size = positive_int(batch_size, "batch_size")
        if self.size == 0:
            raise ValueError("cannot sample from an empty buffer")
        if batch_size > self.size:
            raise ValueError(f"batch_size {batch_size} is larger than the {self.size} "
                             "transitions stored")

    # -- saving -----------------------------------------------------------------------------

    def save(self, path) -> None:
        """Write contents and position to one .npz file at exactly `path` (no pickle)."""
        with open(path, "wb") as file:
            np.savez(file, **self._state())

    @classmethod
    def load(cls, path, seed=None):
        """A buffer rebuilt from `save(path)`; the random generator starts from `seed`."""
        with np.load(path, allow_pickle=False) as saved:
            state = {key: saved[key] for key in saved.files}
        return cls._from_state(state, seed)

    def _state(self) -> dict[str, np.ndarray]:
        state = {f"field.{name}": array for name, array in self.storage.items()}
        state.update({"meta.inserted": np.int64(self.inserted), "meta.size": np.int64(self.size)})
        return state

    @classmethod
    def _from_state(cls, state: dict[str, np.ndarray], seed=None, **kwargs):
        fields = {key.removeprefix("field."): array for key, array in state.items()
                  if key.startswith("field.")}
        spec = {name: (array.shape[1:], array.dtype) for name, array in fields.items()}
        capacity = len(next(iter(fields.values())))
        buffer = cls(capacity, spec, seed=seed, **kwargs)
        for name, array in fields.items():
            buffer.storage[name][:] = array
        buffer.inserted, buffer.size = int(state["meta.inserted"]), int(state["meta.size"])
        return buffer

