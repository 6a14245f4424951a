"""Experience replay for Ape-X style training: uniform, prioritized, n-step, and as a Ray actor.

Four pieces, each usable on its own:

- `ReplayBuffer`: a ring of preallocated numpy arrays, one per field; the oldest transitions
  are overwritten first (FIFO), and sampling is uniform.
- `PrioritizedReplayBuffer`: the same ring, sampled in proportion to priority^alpha through a
  sum tree, with importance-sampling weights (Schaul et al. 2016).
- `NStepBuffer`: one per actor; turns 1-step transitions into n-step ones.
- `ReplayActor`: the prioritized buffer inside a Ray actor that explorers add to and a learner
  samples from (`ReplayServer` is the same object for local use).

A *spec* says what one transition holds: field name -> (shape of one item, dtype). A *batch* is
a dict with the same fields, each an array with a leading batch axis::

    spec = transition_spec(obs_shape=(4,))       # CartPole
    buffer = PrioritizedReplayBuffer(2**20, spec)
    buffer.add({"obs": obs, "action": action, ...}, priorities=abs_td_errors)
    batch = buffer.sample(512, beta=0.4)         # fields + "indices" + "weights"
    buffer.update_priorities(batch["indices"], new_abs_td_errors)

Every add is checked before anything is written: a bad batch raises ValueError and leaves
the buffer as it was. A value is accepted for a field when its dtype converts to the field's
dtype within the same kind (`np.can_cast(..., "same_kind")`: float64 -> float32 and
int -> float are fine, float -> int and float -> bool are refused) and its shape is
(batch, *field_shape) exactly.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import ray

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


def _positive_int(value, what: str) -> int:
    """`value` as an int if it is a whole number > 0, else ValueError naming `what`."""
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be a positive integer, got {value!r}") from None
    if number <= 0 or isinstance(value, bool):
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return number


def _check_priorities(priorities, n: int) -> np.ndarray:
    """Priorities as float64 of shape (n,), all finite and >= 0, else ValueError."""
    p = np.asarray(priorities, dtype=np.float64)
    if p.shape != (n,):
        raise ValueError(f"priorities have shape {p.shape}, expected ({n},)")
    if n and not (p.min() >= 0 and p.max() < np.inf):   # a NaN fails the first comparison
        if not np.isfinite(p).all():
            raise ValueError(f"priorities must be finite, got {p[~np.isfinite(p)][0]}")
        raise ValueError(f"priorities must be >= 0, got {p[p < 0][0]}")
    return p


def _batched(shape: tuple[int, ...]) -> str:
    """'(batch, 4)' for a field of shape (4,): how a batch of that field must look."""
    return "(batch" + "".join(f", {d}" for d in shape) + ")"


# ---------------------------------------------------------------------------------------------
# Uniform replay: a ring of arrays
# ---------------------------------------------------------------------------------------------


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
        self.capacity = _positive_int(capacity, "capacity")
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
        self._check_sample_size(batch_size)
        rng = self.rng if rng is None else rng
        slots = rng.integers(0, self.size, size=batch_size)
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
        batch_size = _positive_int(batch_size, "batch_size")
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


# ---------------------------------------------------------------------------------------------
# The sum tree and min tree behind prioritized sampling
# ---------------------------------------------------------------------------------------------


class SumMinTree:
    """A sum tree and (optionally) a min tree over `capacity` leaves, updated and searched in
    batches.

    Both trees are complete binary trees stored in flat float64 arrays: node 1 is the root,
    node i has children 2i and 2i+1, and leaf `slot` is node L + slot, where L is the power
    of two >= capacity (the depth is log2 L, 20 levels for 2**20 leaves)::

        sums[i] = sums[2i] + sums[2i+1]           sums[1] = total priority
        mins[i] = min(mins[2i], mins[2i+1])       mins[1] = smallest priority

    Empty leaves hold 0 in the sum tree and +inf in the min tree. Level k of the tree is
    nodes [2^k, 2^(k+1)); the leaves are level `depth`. With `track_min=False` there is no
    min tree (`mins` is None) and updates only recompute sums, about half the work.
    """

    #: `set` recomputes a whole level when it has at most this many nodes per updated leaf
    WHOLE_LEVEL_FACTOR = 4

    def __init__(self, capacity: int, track_min: bool = True):
        self.first_leaf = 1 << (capacity - 1).bit_length()  # L
        self.depth = self.first_leaf.bit_length() - 1       # log2 L
        self._levels = np.arange(self.depth + 1)             # shifts from a node to its ancestors
        self.sums = np.zeros(2 * self.first_leaf)
        self.mins = np.full(2 * self.first_leaf, np.inf) if track_min else None
        # each tree with the ufunc that makes a parent from its two children
        self._trees = [(self.sums, np.add)]
        if track_min:
            self._trees.append((self.mins, np.minimum))

    @property
    def total(self) -> float:
        return float(self.sums[1])

    @property
    def min(self) -> float:
        if self.mins is None:
            raise ValueError("this tree keeps no minimum: build it with track_min=True")
        return float(self.mins[1])

    def leaves(self, slots) -> np.ndarray:
        return self.sums[self.first_leaf + np.asarray(slots)]

    def set(self, slots: np.ndarray, values: np.ndarray) -> None:
        """Set leaves `slots` to `values`, then recompute their ancestors level by level.

        Deep levels (many nodes): only the parents of the touched nodes, all at once,
        parent = f(left child, right child). A parent reached twice is written twice with the
        same value, so duplicate slots are safe (for a slot given twice, the last value wins).
        Shallow levels (few nodes): the whole level in one vectorised op, cheaper than
        gathering and scattering the touched parents.
        """
        nodes = self.first_leaf + np.asarray(slots, dtype=np.int64)
        for tree, _ in self._trees:
            tree[nodes] = values
        level = self.depth  # the level `nodes` are on
        while level > 0 and 2 ** (level - 1) > self.WHOLE_LEVEL_FACTOR * len(nodes):
            nodes = nodes >> 1
            left = nodes << 1
            right = left + 1
            for tree, combine in self._trees:
                tree[nodes] = combine(tree[left], tree[right])
            level -= 1
        for parent_level in reversed(range(level)):
            self._recompute(2**parent_level, 2 ** (parent_level + 1))

    def set_run(self, first_slot: int, values: np.ndarray) -> None:
        """Set the consecutive leaves first_slot, first_slot + 1, ... (what a ring write touches).

        Their parents on each level are again consecutive nodes [lo, hi): recompute them level
        by level with one vectorised op on slices, until they have narrowed to one node. Above
        that node, its path to the root is recomputed in one pass (`_recompute_path`), so a
        small run does not pay one numpy call per level all the way up.
        """
        if len(values) == 0:
            return
        lo = self.first_leaf + first_slot
        hi = lo + len(values)
        for tree, _ in self._trees:
            tree[lo:hi] = values
        while hi - lo > 1:
            lo, hi = lo // 2, (hi + 1) // 2  # the parents of nodes [lo, hi)
            self._recompute(lo, hi)
        self._recompute_path(lo)

    def _recompute(self, first: int, end: int) -> None:
        """Nodes [first, end) from their children [2 first, 2 end): strided slices."""
        left, right = slice(2 * first, 2 * end, 2), slice(2 * first + 1, 2 * end, 2)
        for tree, combine in self._trees:
            combine(tree[left], tree[right], out=tree[first:end])

    def _recompute_path(self, node: int) -> None:
        """Every ancestor of `node`, whose own value is up to date, in one vectorised pass.

        Going up, each ancestor is f(the previous one, the sibling of the previous one), and
        no sibling on the path changes: so the ancestors are a running f over [node, its
        sibling, its parent's sibling, ...], e.g. a cumulative sum. `f.accumulate` adds in
        the same order as the level-by-level recompute, so the sums come out bit for bit equal.
        """
        path = node >> self._levels[:node.bit_length()]   # node, its parent, ..., the root (1)
        terms = np.empty_like(path)         # node, then the sibling of each path node but the root
        terms[0], terms[1:] = node, path[:-1] ^ 1
        for tree, combine in self._trees:
            tree[path[1:]] = combine.accumulate(tree[terms])[1:]

    def find_prefix_sum(self, targets: np.ndarray) -> np.ndarray:
        """For each target u in [0, total), the slot i with  sum_{j<i} v_j <= u < sum_{j<=i} v_j.

        All targets descend together from the root: go right when u >= sum of the left
        child (and subtract that sum from u), else go left.
        """
        u = np.array(targets, dtype=np.float64)
        nodes = np.ones(len(u), dtype=np.int64)  # all start at the root
        for _ in range(self.depth):
            nodes <<= 1  # the left child
            left_sums = self.sums[nodes]
            go_right = u >= left_sums
            u -= left_sums * go_right
            nodes += go_right
        return nodes - self.first_leaf


# ---------------------------------------------------------------------------------------------
# Prioritized replay
# ---------------------------------------------------------------------------------------------


#: how `PrioritizedReplayBuffer.sample` scales the importance weights (see its docstring)
WEIGHT_NORMS = ("batch", "buffer")


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) over the same FIFO ring.

    A priority p_i >= 0 (typically |TD error|) is stored as q_i = (p_i + eps)^alpha, and

        P(i) = q_i / sum_j q_j                        sampling probability
        w_i  = (N P(i))^-beta / max_j (N P(j))^-beta  importance weight, N = len(buffer)
             = (q_i / min_j q_j)^-beta

    The paper leaves open which j the max runs over; `weight_norm` picks it:

    - "batch" (the default, as pfrl and Dopamine): the sampled batch, so each batch's largest
      weight is 1. The buffer then needs no min tree, which makes every add and update cheaper.
    - "buffer" (as OpenAI Baselines): every stored transition, through a min tree; weights are
      comparable between batches, but one tiny priority anywhere shrinks them all (with
      eps=1e-6 they averaged 0.06 in the measurement below).

    Why "batch": `bench/is_weights.py` trained the single-process DQN on CartPole-v1 to 475
    (6 seeds, env steps to the goal): batch 16.5K median (21K mean), buffer with eps 1e-6
    26.5K (30K), buffer with eps 1e-3 26.5K (25K), buffer with eps 1e-2 35K (33K); "batch"
    needed fewer steps than "buffer"/1e-6 on 5 of the 6 seeds. The spread between seeds is
    large (7K to 45K for "batch" alone), so read it as "no slower, and cheaper", not as a
    proven speed-up. A larger eps does not help: it flattens the priorities too.

    Sampling is stratified: the total is cut into batch_size equal segments and one target
    is drawn uniformly in each, so a batch covers the whole range of priorities.

    `sample` returns the fields plus
      "indices": int64 (B,), the ids of the sampled transitions (see `ReplayBuffer`): pass them
                 back to `update_priorities`, which skips any whose slot has been overwritten
                 since (an id is stale once id < inserted - capacity).
      "weights": float32 (B,), the importance weights w_i.
    New transitions get the largest priority q seen so far (1.0 at first), unless given.
    """

    def __init__(self, capacity: int, spec, alpha: float = 0.6, eps: float = 1e-6, seed=None,
                 weight_norm: str = "batch"):
        if weight_norm not in WEIGHT_NORMS:
            raise ValueError(f"weight_norm must be one of {WEIGHT_NORMS}, got {weight_norm!r}")
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha!r}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps!r}")
        if {"indices", "weights"} & set(spec):
            raise ValueError("'indices' and 'weights' are added by sample(): rename those fields")
        super().__init__(capacity, spec, seed=seed)
        self.alpha, self.eps = float(alpha), float(eps)
        self.weight_norm = weight_norm
        self.tree = SumMinTree(self.capacity, track_min=weight_norm == "buffer")
        self.max_priority = 1.0  # largest stored q so far: what a new transition gets

    def add(self, batch, priorities=None) -> None:
        """Append a batch with priorities (B,) >= 0, or the max priority so far if None."""
        arrays, n = self._check_batch(batch)
        if priorities is None:
            q = np.full(n, self.max_priority)
        else:
            q = self._to_q(_check_priorities(priorities, n))
        first, kept = self._write(arrays, n)
        if kept:
            q = q[n - kept:]  # a batch longer than the capacity keeps its newest
            head = self.capacity - first
            self.tree.set_run(first, q[:head])  # the slots written are one run,
            if kept > head:                     # or two when the ring wraps around
                self.tree.set_run(0, q[head:])
            self.max_priority = max(self.max_priority, float(q.max()))

    def sample(self, batch_size: int, beta: float = 0.4, rng=None) -> dict[str, np.ndarray]:
        """`batch_size` transitions drawn with P(i) = q_i / sum q, plus "indices" and "weights"."""
        self._check_sample_size(batch_size)
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta!r}")
        rng = self.rng if rng is None else rng
        total = self.tree.total
        targets = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        slots = self.tree.find_prefix_sum(targets)
        np.minimum(slots, self.size - 1, out=slots)  # rounding can step past the last leaf
        batch = {name: array[slots] for name, array in self.storage.items()}
        batch["indices"] = self._ids_in(slots)
        q = self.tree.leaves(slots)
        q_min = q.min() if self.weight_norm == "batch" else self.tree.min  # see the class doc
        weights = (q / q_min) ** -beta  # (P(i) / P_min)^-beta
        batch["weights"] = weights.astype(np.float32)
        return batch

    def update_priorities(self, indices, priorities) -> int:
        """Set new priorities for sampled ids; ids overwritten since are skipped.

        Returns how many priorities were applied. If an id appears twice, the last one wins.
        """
        ids = self._check_ids(indices)
        p = _check_priorities(priorities, len(ids))
        fresh = ids >= self.inserted - self.capacity  # not overwritten since it was sampled
        q = self._to_q(p[fresh])
        if len(q):
            self.tree.set(ids[fresh] % self.capacity, q)
            self.max_priority = max(self.max_priority, float(q.max()))
        return len(q)

    # -- plumbing ---------------------------------------------------------------------------

    def _to_q(self, p: np.ndarray) -> np.ndarray:
        return (p + self.eps) ** self.alpha

    def _ids_in(self, slots: np.ndarray) -> np.ndarray:
        """The id of the transition now in each slot.

        The ring is at position pos = inserted % capacity; slots before pos were written in
        the current pass over the ring, the others in the previous one.
        """
        position = self.inserted % self.capacity
        pass_start = self.inserted - position
        return pass_start + slots - self.capacity * (slots >= position)

    def _check_ids(self, indices) -> np.ndarray:
        ids = np.asarray(indices)
        if ids.ndim != 1 or not (np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
            raise ValueError(f"indices must be a 1-D integer array, got dtype {ids.dtype} "
                             f"and shape {ids.shape}")
        ids = ids.astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.inserted):
            bad = ids[(ids < 0) | (ids >= self.inserted)][0]
            raise ValueError(f"index {bad} is out of range: the ids added so far are "
                             f"[0, {self.inserted})")
        return ids

    def _state(self) -> dict[str, np.ndarray]:
        state = super()._state()
        state.update({"meta.alpha": np.float64(self.alpha), "meta.eps": np.float64(self.eps),
                      "meta.weight_norm": np.array(self.weight_norm),
                      "meta.max_priority": np.float64(self.max_priority),
                      "meta.q": self.tree.leaves(np.arange(self.size))})
        return state

    @classmethod
    def _from_state(cls, state: dict[str, np.ndarray], seed=None):
        if "meta.q" not in state:
            raise ValueError("this file holds a ReplayBuffer, not a PrioritizedReplayBuffer: "
                             "load it with ReplayBuffer.load")
        options = {"alpha": float(state["meta.alpha"]), "eps": float(state["meta.eps"])}
        if "meta.weight_norm" in state:  # files saved before the option load with the default
            options["weight_norm"] = str(state["meta.weight_norm"])
        buffer = super()._from_state(state, seed, **options)
        buffer.tree.set_run(0, state["meta.q"])
        buffer.max_priority = float(state["meta.max_priority"])
        return buffer


# ---------------------------------------------------------------------------------------------
# n-step transitions
# ---------------------------------------------------------------------------------------------


class _Step(NamedTuple):
    obs: np.ndarray
    action: object
    reward: float
    next_obs: np.ndarray
    terminated: bool


class NStepBuffer:
    """Turns one actor's stream of 1-step transitions into n-step transitions.

    The n-step transition that starts at step t and sums k rewards is

        obs = s_t,  action = a_t,  next_obs = s_{t+k},  discount = gamma^k
        reward = r_t + gamma r_{t+1} + ... + gamma^(k-1) r_{t+k-1}
        terminated = True only if s_{t+k} is a true terminal state

    so the learner's target is  reward + discount * (1 - terminated) * max_a Q(next_obs, a).
    Mid-episode k = n. When an episode ends, every pending step is flushed with the k that is
    left (k < n, also for episodes shorter than n). A truncated episode (time limit) is not a
    terminal state: its transitions keep terminated=False and bootstrap from the last state.

    `add(...)` returns the list of transitions now complete (0 or 1 mid-episode, all pending at
    an episode end); `stack_transitions(list)` turns them into a batch for a replay buffer.
    """

    def __init__(self, n: int = 3, gamma: float = 0.99):
        self.n = _positive_int(n, "n")
        if not 0 <= gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
        self.gamma = float(gamma)
        self.window: deque[_Step] = deque()  # at most n - 1 steps between calls

    def add(self, obs, action, reward, next_obs, terminated, truncated) -> list[dict]:
        """Record one env step; return the n-step transitions that are now complete."""
        step = _Step(np.array(obs), action, float(reward), np.array(next_obs), bool(terminated))
        self.window.append(step)
        if terminated or truncated:
            return self.flush()
        if len(self.window) == self.n:
            return [self._pop_oldest()]
        return []

    def flush(self) -> list[dict]:
        """Emit every pending step (as at a time limit: bootstrap from the last state)."""
        return [self._pop_oldest() for _ in range(len(self.window))]

    def _pop_oldest(self) -> dict:
        """The transition from the oldest pending step to the newest; then drop the oldest."""
        rewards = [step.reward for step in self.window]
        last = self.window[-1]
        first = self.window.popleft()
        return {
            "obs": first.obs,
            "action": first.action,
            "reward": sum(self.gamma**k * r for k, r in enumerate(rewards)),
            "next_obs": last.next_obs,
            "terminated": last.terminated,
            "discount": self.gamma ** len(rewards),
        }


def stack_transitions(transitions: list[dict]) -> dict[str, np.ndarray]:
    """[{name: value}, ...] -> {name: array with a leading batch axis}."""
    if not transitions:
        raise ValueError("no transitions to stack")
    return {name: np.stack([t[name] for t in transitions]) for name in transitions[0]}


# ---------------------------------------------------------------------------------------------
# The shared buffer as a Ray actor
# ---------------------------------------------------------------------------------------------


class ReplayServer:
    """A prioritized buffer plus counters: what `ReplayActor` runs, usable locally too.

    As a Ray actor it handles one call at a time, so explorers' adds and the learner's
    samples and updates never interleave and need no locks. Arrays that come back through
    Ray can be read-only views of Ray's buffers: copy one before changing it in place.
    """

    def __init__(self, capacity: int, spec, alpha: float = 0.6, eps: float = 1e-6, seed=None,
                 prioritized: bool = True, weight_norm: str = "batch"):
        self.prioritized = prioritized            # False: a uniform ReplayBuffer (SAC)
        self.buffer = (PrioritizedReplayBuffer(capacity, spec, alpha=alpha, eps=eps, seed=seed,
                                               weight_norm=weight_norm)
                       if prioritized else ReplayBuffer(capacity, spec, seed=seed))
        self.sampled = 0

    def add(self, batch, priorities=None) -> int:
        """Store a batch; returns how many transitions this server has stored in all (the
        count trainers use: transitions are counted where they land, not where they left)."""
        if self.prioritized:
            self.buffer.add(batch, priorities)
        elif priorities is not None:
            raise ValueError("this replay server samples uniformly: add batches without "
                             "priorities")
        else:
            self.buffer.add(batch)
        return self.buffer.inserted

    def sample(self, batch_size: int, beta: float = 0.4) -> dict[str, np.ndarray]:
        """A batch; prioritized: with "indices" and importance "weights" (exponent beta)."""
        batch = (self.buffer.sample(batch_size, beta) if self.prioritized
                 else self.buffer.sample(batch_size))
        self.sampled += batch_size
        return batch

    def update_priorities(self, indices, priorities) -> int:
        return self.buffer.update_priorities(indices, priorities)

    def size(self) -> int:
        return len(self.buffer)

    def stats(self) -> dict:
        """size, inserted and sampled (transitions), ratio = sampled / inserted."""
        inserted = self.buffer.inserted
        return {"size": len(self.buffer), "inserted": inserted, "sampled": self.sampled,
                "ratio": self.sampled / inserted if inserted else 0.0}

    def save(self, path) -> None:
        self.buffer.save(path)


#: `ReplayActor.remote(capacity, spec, alpha=0.6)` starts a `ReplayServer` in its own process.
ReplayActor = ray.remote(ReplayServer)
