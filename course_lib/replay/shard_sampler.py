"""The learner's side of a sharded replay on Ray: `ShardSampler`, and `start_shards`, one shard
actor per node.

    node A: explorers --add--> ShardStoreActor A --+
    node B: explorers --add--> ShardStoreActor B --+--take (routed targets)--> ShardSampler
                                ^                  |                          (in the learner)
                                +--- write_back (new priorities, not awaited) <-----+

Each explorer adds to the shard on its own node (`shard_for_node`), so its batches never
cross the network; only the learner's batches and priorities do. The maths is
`course_lib.replay.sharded`'s: one stratified draw over the shards' concatenated prefix sums,
each target routed to its shard, weights from the global total. What Ray changes:

- **Totals arrive with every answer.** `take` and `write_back` return the shard's total
  priority and size after the call, so a batch costs one round trip per shard (a shard with
  no target gets an empty `take`, to report its totals). The split between shards uses the
  newest totals the sampler holds; a shard whose total has moved since scales its targets to
  its total now (`ReplayShard.take`), and the weights use the probability each row was
  actually drawn with. `refresh_totals()` reads every shard's totals now: with it before each
  `sample`, the draw is exactly one buffer's (tests/test_sharded_replay.py).
- **The next batch is in flight while the learner trains** (`prefetch=True`): `sample()`
  returns the batch requested at the previous call and sends the next request at once.
- **Priorities arrive one update late (a labelled effect).** `write_back` is not awaited, and
  with prefetch the next batch was requested before the learner computed the new priorities
  of this one: batch t+1 is drawn without batch t's priorities (each shard runs its calls in
  the order sent, so batch t+2 has them). RLlib's old Ape-X and Reverb accept the same lag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from course_lib.ray_tools import get_result
from course_lib.replay.prioritized import stratified_targets
from course_lib.replay.server import ShardStoreActor
from course_lib.replay.sharded import ShardTotals, assemble, check_enough, route_targets


def alive_nodes() -> list[str]:
    """The ids of the cluster's alive nodes (one shard each), in Ray's order."""
    return [n["NodeID"] for n in ray.nodes() if n["Alive"]]


def start_shards(nodes: Sequence[str], capacity: int, spec, alpha: float = 0.6,
                 eps: float = 1e-6, seed: int = 0) -> list:
    """A `ShardStoreActor` of `capacity` on each node of `nodes` (ids, e.g. `alive_nodes()`;
    the same id twice puts two shards on one node, as a test on one machine does), pinned
    there (NodeAffinitySchedulingStrategy, not soft: a shard must not drift away from its
    explorers). num_cpus=0 as RLlib's replay shards: a shard works only when called."""
    if not nodes:
        raise ValueError("start_shards needs at least one node id (see alive_nodes())")
    return [ShardStoreActor.options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
            ).remote(capacity, spec, alpha=alpha, eps=eps, seed=seed + k)
            for k, node in enumerate(nodes)]


def shard_for_node(node: str, nodes: Sequence[str], index: int = 0) -> int:
    """Which shard an explorer adds to: the first one on its own `node`, or, on a node with
    no shard (one lost, say), shard `index % len(nodes)` so that explorers spread out."""
    if not nodes:
        raise ValueError("there are no shards to add to")
    return list(nodes).index(node) if node in nodes else index % len(nodes)


@dataclass
class Request:
    """A batch asked of the shards and not collected yet: each target's shard, the shares
    S_k / sum S it was routed with, and per shard its `take` call's number and ref."""

    shard: np.ndarray
    shares: np.ndarray
    calls: list[int]
    refs: list


class ShardSampler:
    """Draws the learner's batches from `shards` (`ShardStoreActor` handles) as one buffer
    holding all their priorities would, and writes new priorities back to the shard each row
    came from. What a learner holds in place of its local buffer:

        sampler = ShardSampler(shards, batch_size=512, beta=0.4, seed=0)
        batch = sampler.sample()             # fields, "shard", "indices", "weights"
        info = learner.update(batch)
        sampler.update_priorities(batch, info["priorities"])     # not awaited

    `prefetch`: `sample()` returns the batch requested at the previous call and requests the
    next at once (see the module docstring: priorities then arrive one update late).
    `sampled`: transitions drawn so far (the replay ratio's numerator).
    """

    def __init__(self, shards: Sequence, batch_size: int, beta: float = 0.4, seed=None,
                 prefetch: bool = True):
        if not shards:
            raise ValueError("a ShardSampler needs at least one shard")
        self.shards, self.batch_size, self.beta = list(shards), batch_size, beta
        self.prefetch, self.rng = prefetch, np.random.default_rng(seed)
        self.pending: Request | None = None
        self.sent = [0] * len(self.shards)       # calls sent to each shard so far
        self.seen = [-1] * len(self.shards)      # which of them the totals held are from
        self.writes: list[tuple[int, int, ray.ObjectRef]] = []   # (shard, call, ref) unread
        self.sampled = 0
        self.totals: list[ShardTotals] = []
        self.refresh_totals()

    def refresh_totals(self) -> list[ShardTotals]:
        """Every shard's totals now (one awaited call each); they route the next request."""
        self.totals = [ShardTotals(*t) for t in
                       ray.get([self._call(k, "totals") for k in range(len(self.shards))])]
        self.seen = [n - 1 for n in self.sent]
        return self.totals

    def sample(self) -> dict[str, np.ndarray]:
        """The next batch: fields, "shard" (where each row came from), "indices" (its id
        there) and "weights" (importance weights from the global total)."""
        request = self.pending or self.request()
        self.pending = None
        batch = self.collect(request)
        if self.prefetch:
            self.pending = self.request()
        return batch

    def update_priorities(self, batch: dict[str, np.ndarray], priorities) -> None:
        """Each row's new priority to the shard it came from, not awaited: a failed write
        raises at a later `sample` or `update_priorities`."""
        shard, priorities = batch["shard"], np.asarray(priorities)
        if priorities.shape != shard.shape:
            raise ValueError(f"priorities have shape {priorities.shape}, expected "
                             f"{shard.shape} (one per row of the batch)")
        for k in np.unique(shard):
            rows = shard == k
            self.writes.append((int(k), self.sent[k], self._call(
                k, "write_back", batch["indices"][rows], priorities[rows])))
        self.read_writes(wait=False)

    def request(self) -> Request:
        """Route a stratified draw over the newest totals held and send each shard its part."""
        self.read_writes(wait=False)
        check_enough(self.totals, self.batch_size)
        S = np.array([t.total for t in self.totals])
        shard, local = route_targets(stratified_targets(S.sum(), self.batch_size, self.rng), S)
        calls = list(self.sent)                  # the numbers the takes below get
        refs = [self._call(k, "take", local[shard == k], S[k]) for k in range(len(S))]
        return Request(shard, S / S.sum(), calls, refs)

    def collect(self, request: Request) -> dict[str, np.ndarray]:
        """The batch of `request`, once every shard has answered; keeps their totals."""
        answers = [get_result(ref) for ref in request.refs]
        parts = {}
        for k, (part, totals) in enumerate(answers):
            self._saw(k, request.calls[k], totals)
            if len(part["indices"]):
                parts[k] = part
        self.sampled += len(request.shard)
        return assemble(parts, request.shard, request.shares, self.beta)

    def read_writes(self, wait: bool) -> None:
        """Take the totals of the finished `write_back`s (all of them, if `wait`); re-raise the
        error of one that failed."""
        if not self.writes:
            return
        refs = [ref for _, _, ref in self.writes]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=None if wait else 0)
        done = set(done)
        for k, call, ref in self.writes:
            if ref in done:
                self._saw(k, call, get_result(ref))
        self.writes = [w for w in self.writes if w[2] not in done]

    def close(self) -> None:
        """Wait for the writes in flight and drop the prefetched request (its batch is lost)."""
        self.read_writes(wait=True)
        self.pending = None

    # -- plumbing ---------------------------------------------------------------------------

    def _call(self, k: int, method: str, *args) -> ray.ObjectRef:
        """Send shard k a call; its number is `self.sent[k]` before the call."""
        self.sent[k] += 1
        return getattr(self.shards[k], method).remote(*args)

    def _saw(self, k: int, call: int, totals) -> None:
        """Keep shard k's `totals` if they come from a later call than those held: each shard
        runs its calls in the order sent, so a later call's totals are newer."""
        if call > self.seen[k]:
            self.totals[k], self.seen[k] = ShardTotals(*totals), call
