"""Ape-X past one learner's buffer: one replay shard per node, sampled exactly as one buffer, and
a node lost without losing the run.

    node A (head): learner --ShardSampler: take (routed targets) / write_back--> every shard
                   parameter server, evaluator, shard A <--add-- explorers on A
    node B:        shard B <--add-- explorers on B
    node C:        shard C <--add-- explorers on C        (C removed: its shard and explorers go)

`ShardedApexTrainer` is `apex.ApexTrainer` with three parts swapped, each through a door the core
leaves open, so the single-buffer Ape-X is unchanged:

- the replay: `replay_shards` `ShardStoreActor`s, one per node (`replay.shard_sampler`), started
  before the learner and pinned to their nodes;
- the outbox slot (`distributed.config.Slots`): `ShardOutbox`, which sends each explorer's
  batches to the shard on its own node (`local_shards`; else each batch to a shard drawn at
  random, as RLlib's old Ape-X, to count what locality saves);
- the learner actor: `ShardedApexLearnerActor` draws its batches through a `ShardSampler`
  (`replay.sharded`: one stratified draw over the shards' concatenated prefix sums, importance
  weights from the global total) in place of its own buffer.

A node lost. Ray restarts the explorers that ran there on the nodes left (`max_restarts`; the
driver resends their chunks) and their outboxes pick a shard that is alive. The shard on the
lost node cannot move (its data was in that node's memory): the learner's `SurvivingSampler`
puts a `LostShard` in its place, which holds nothing, so the draw goes on over the shards left
and the shard numbers of batches already drawn stay valid. The run loses that shard's
transitions (`lost` says how many, and when) and keeps the learner, its network and optimiser.
The learner's own node is the one that cannot go (its network and optimiser live only in its
process: the run's checkpoint continues it); the parameter server and the evaluator are
restarted elsewhere, as for any crash (`distributed.driver`).

The driver counts the transitions stored as the shards count them (`hand_out` reads their
`stats` without waiting), keeping a lost shard's last count: data that reached the replay was
inserted, and the replay ratio must not stall while the shards left refill.

Not the default of `python -m course_lib train`: it is the workbook's step past one machine
(notebook 08, `bench/node_loss.py`, tests/test_sharded_apex.py).
"""

from __future__ import annotations

import dataclasses
import math
import time
from functools import partial
from typing import Any, ClassVar

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from course_lib.apex import ApexConfig, ApexLearnerActor, ApexTrainer
from course_lib.distributed import remote_learner
from course_lib.distributed.worker import Outbox
from course_lib.ray_tools import get_result
from course_lib.replay.nstep import stack_transitions
from course_lib.replay.prioritized import stratified_targets
from course_lib.replay.server import ShardStoreActor
from course_lib.replay.shard_sampler import ShardSampler, alive_nodes
from course_lib.replay.sharded import ShardTotals, assemble, check_enough, route_targets

EMPTY = ShardTotals(0.0, 0)


def shard_name(prefix: str, k: int) -> str:
    """The Ray name of a run's shard k: explorers and the learner find the shards by name."""
    return f"{prefix}:replay shard {k}"


def payload_bytes(*arrays) -> int:
    """The bytes of the numpy arrays in `arrays` (dicts of them too): what a call carries."""
    return sum(payload_bytes(*a.values()) if isinstance(a, dict) else np.asarray(a).nbytes
               for a in arrays if a is not None)


@dataclasses.dataclass
class ShardedApexConfig(ApexConfig):
    """Ape-X with one replay shard per node. `buffer_size` is the shards' capacity together."""

    LIMITS: ClassVar[dict[str, str]] = {"replay_shards": ">= 0"}
    replay_shards: int = 0            # shards (0: one on each node alive at the start)
    local_shards: bool = True         # explorers add to their own node's shard (False: each
                                      # batch to a shard drawn at random, as RLlib's old Ape-X)

    def check(self):
        super().check()
        if self.sample_ahead:
            raise ValueError("sample_ahead draws from the learner's own buffer, and a sharded "
                             "run has none: set sample_ahead false")
        return self


class ShardOutbox(Outbox):
    """The outbox slot of a sharded run: an explorer's batches go to the shard on its own node
    when `local` (else each to a shard drawn at random). When that shard dies with its node,
    the batch in flight goes to a shard that is alive (its first copy was lost with the shard).
    `traffic` counts the bytes sent to a shard on this node and on another."""

    def __init__(self, replay_actor, send_every: int, priorities, *, prefix: str,
                 nodes: list[str], local: bool):
        super().__init__(None, send_every, priorities)   # the learner's handle: not used
        self.prefix, self.nodes, self.local = prefix, nodes, local
        self.node = ray.get_runtime_context().get_node_id()
        name = ray.get_runtime_context().get_actor_name() or ""
        self.index = int(name.rsplit(" ", 1)[-1]) if name[-1:].isdigit() else 0
        self.rng = np.random.default_rng(self.index)
        self.dead: set[int] = set()
        self.handles: dict[int, ray.actor.ActorHandle] = {}
        self.traffic = {"same node": 0, "other node": 0}
        self.sending: tuple | None = None   # the batch in flight, to send again if lost
        self.pick()

    def pick(self) -> None:
        """Aim at the shard this explorer should use among those not known dead."""
        alive = [k for k in range(len(self.nodes)) if k not in self.dead]
        if not alive:
            raise RuntimeError("every replay shard is lost: the run cannot store transitions")
        own = [k for k in alive if self.nodes[k] == self.node]
        if self.local:                       # its node's shard; on a node with none, spread
            self.shard = own[0] if own else alive[self.index % len(alive)]
        else:
            self.shard = int(self.rng.choice(alive))
        if self.shard not in self.handles:
            self.handles[self.shard] = ray.get_actor(shard_name(self.prefix, self.shard))
        self.replay_actor = self.handles[self.shard]

    def _send(self) -> None:
        self._wait()                          # the previous add first: it may need resending
        batch = stack_transitions(self.pending)
        self.pending = []
        self.sending = (batch, self.priorities(batch))
        if not self.local:
            self.pick()                      # a shard drawn for each batch
        self._add()

    def _add(self) -> None:
        where = "same node" if self.nodes[self.shard] == self.node else "other node"
        self.traffic[where] += payload_bytes(*self.sending)
        self.adding = self.replay_actor.add.remote(*self.sending)

    def _wait(self) -> None:
        try:
            super()._wait()
        except ray.exceptions.RayActorError:  # the shard died with its node
            self.adding, self.dead = None, self.dead | {self.shard}
            self.pick()
            self._add()
            self._wait()


class LostShard:
    """Stands in for a shard lost with its node: it holds nothing and answers every call at
    once with totals (0, 0), so the sampler routes it no targets while the shard numbers of
    batches drawn before the loss stay valid."""

    answers = {"take": ({"indices": np.zeros(0, np.int64)}, EMPTY),
               "totals": EMPTY, "write_back": EMPTY}

    def __init__(self, node: str, size: int, at: float):
        self.node, self.size, self.at = node, size, at

    def __getattr__(self, method: str):
        if method not in self.answers:
            raise AttributeError(method)
        answer = self.answers[method]
        return type("Call", (), {"remote": staticmethod(lambda *args: ray.put(answer))})


class SurvivingSampler(ShardSampler):
    """A `ShardSampler` that outlives its shards' nodes: a call that fails because a shard died
    puts a `LostShard` in its place (the batch requested from it is drawn again over the shards
    left, its priorities written back are dropped) and goes on. `lost`: each lost shard's node,
    the transitions it held and when. `traffic`: the bytes of the batches drawn from shards
    on this node and on others."""

    def __init__(self, shards, nodes: list[str], batch_size: int, beta: float, seed):
        self.nodes, self.here = nodes, ray.get_runtime_context().get_node_id()
        self.lost: list[LostShard] = []
        self.traffic = {"same node": 0, "other node": 0}
        super().__init__(shards, batch_size, beta, seed)

    def surviving(self, call, *args):
        """`call(*args)`, again after each shard it found dead is put down as lost."""
        while True:
            try:
                return call(*args)
            except ray.exceptions.RayActorError as err:
                self.lose(err.actor_id)

    def lose(self, actor_id: str | None) -> None:
        """Put the shard whose actor died in the list of the lost, a `LostShard` in its place."""
        ids = [getattr(s, "_actor_id", None) for s in self.shards]
        hit = [k for k, i in enumerate(ids) if i is not None and i.hex() == actor_id]
        if not hit:
            raise RuntimeError(f"an actor the sampler does not know died ({actor_id})")
        k = hit[0]
        self.lost.append(LostShard(self.nodes[k], self.totals[k].size, time.time()))
        self.shards[k], self.totals[k] = self.lost[-1], EMPTY
        self.writes = [w for w in self.writes if w[0] != k]
        self.pending = None                  # routed over the old totals: drawn again
        if all(isinstance(s, LostShard) for s in self.shards):
            raise RuntimeError("every replay shard is lost: the learner has nothing to draw")

    def refresh_totals(self):
        return self.surviving(super().refresh_totals)

    def read_writes(self, wait: bool) -> None:
        self.surviving(super().read_writes, wait)

    def sample_many(self, count: int) -> list[dict[str, np.ndarray]]:
        """`count` batches with one `take` per shard for all of them, as one buffer's
        `sample_many` draws them: each batch its own stratified targets and its own importance
        weights, every batch at the totals held now (the learner writes their priorities back
        after the group's updates, as with one buffer's `batches_per_draw`)."""
        return self.surviving(self._sample_many, count)

    def _sample_many(self, count: int) -> list[dict[str, np.ndarray]]:
        B = self.batch_size
        if sum(t.size for t in self.totals) < B:
            self.refresh_totals()            # the first draws: the shards' totals now
        self.read_writes(wait=False)
        check_enough(self.totals, B)
        S = np.array([t.total for t in self.totals])
        targets = np.concatenate([stratified_targets(S.sum(), B, self.rng) for _ in range(count)])
        shard, local = route_targets(targets, S)
        calls = list(self.sent)
        refs = [self._call(k, "take", local[shard == k], S[k]) for k in range(len(S))]
        parts = [get_result(ref) for ref in refs]
        for k, (_, totals) in enumerate(parts):
            self._saw(k, calls[k], totals)
        taken = np.zeros(len(S), dtype=int)   # rows of each shard's part handed out so far
        batches = []
        for rows in np.split(shard, count):
            mine = {}
            for k in np.unique(rows):
                n, first = int((rows == k).sum()), taken[k]
                mine[k] = {name: a[first:first + n] for name, a in parts[k][0].items()}
                taken[k] += n
                where = "same node" if self.nodes[k] == self.here else "other node"
                self.traffic[where] += payload_bytes(mine[k])
            batches.append(assemble(mine, rows, S / S.sum(), self.beta))
        self.sampled += len(shard)
        return batches


@remote_learner
class ShardedApexLearnerActor(ApexLearnerActor.__ray_actor_class__):   # the class Ray wraps
    """Ape-X's learner drawing from the shards (`SurvivingSampler`) instead of its own buffer."""

    def __init__(self, cfg: ShardedApexConfig, dims, prefix: str, state, seed: int,
                 replay: dict[str, Any], slots):
        # its own buffer is never filled: the smallest one the class accepts
        super().__init__(cfg, dims, prefix, state, seed, {**replay, "capacity": 1}, slots)
        shards = [ray.get_actor(shard_name(prefix, k)) for k in range(cfg.replay_shards)]
        nodes = ray.get([s.stats.remote() for s in shards])
        self.draws = SurvivingSampler(shards, [n["node"] for n in nodes], cfg.batch_size,
                                      cfg.priority_beta, seed)

    def draw_batches(self, count: int) -> list[dict[str, np.ndarray]]:
        return self.draws.sample_many(count)

    def after_updates(self, batches, infos) -> None:
        """The group's new priorities, one `write_back` per shard (an id drawn twice: its
        last update's priority, as with one buffer)."""
        group = {key: np.concatenate([b[key] for b in batches]) for key in ("shard", "indices")}
        self.draws.update_priorities(group, np.concatenate([i["priorities"] for i in infos]))

    def replay_stats(self) -> dict[str, Any]:
        """What the shards hold now, the shards lost (node, transitions, when) and the bytes
        the learner's draws moved within its node and across nodes."""
        return {"totals": [tuple(t) for t in self.draws.refresh_totals()],
                "lost": [vars(s) for s in self.draws.lost], "traffic": self.draws.traffic,
                "sampled": self.draws.sampled}


class ShardedApexTrainer(ApexTrainer):
    """`ApexTrainer` with `replay_shards` shards, one per node, in place of the learner's buffer
    (see the module docstring). `shard_nodes`: the node of each shard; `shard_inserted`: the
    transitions each shard stored, as last read (a lost shard's stays)."""

    config_class = ShardedApexConfig
    Learner = ShardedApexLearnerActor

    def _start_actors(self, res: dict[str, float], restore: dict | None) -> None:
        cfg, actors = self.cfg, self.actors
        nodes = alive_nodes()
        k = cfg.replay_shards or len(nodes)
        self.cfg = cfg = dataclasses.replace(cfg, replay_shards=k)
        self.shard_nodes = [nodes[i % len(nodes)] for i in range(k)]   # round robin
        capacity = math.ceil(cfg.buffer_size / k)
        self.shards = [actors.add(f"replay shard {i}", ShardStoreActor.options(
            name=shard_name(actors.prefix, i), num_cpus=0,     # works only when called
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
                capacity, self.transition_spec(), alpha=cfg.priority_alpha,
                seed=self.seed_for("replay", i)), serves=True)
            for i, node in enumerate(self.shard_nodes)]
        for i, shard in enumerate(self.shards):
            actors.started(f"replay shard {i}", shard.__ray_ready__.remote())
        self.shard_inserted = [0] * k
        self._reading: dict[int, ray.ObjectRef] = {}
        self.shards_lost: set[int] = set()
        self.slots = dataclasses.replace(self.slots, outbox=partial(
            ShardOutbox, prefix=actors.prefix, nodes=self.shard_nodes, local=cfg.local_shards))
        super()._start_actors(res, restore)

    def hand_out(self) -> None:
        self.count_inserted()
        super().hand_out()

    def count_inserted(self) -> None:
        """Read each shard's count of stored transitions without waiting (one `stats` call in
        flight per shard); the replay's count is their sum, a lost shard's last count kept."""
        for i, shard in enumerate(self.shards):
            ref = self._reading.get(i)
            if i in self.shards_lost or (ref is not None and not ray.wait([ref], timeout=0)[0]):
                continue
            if ref is not None:
                try:
                    self.shard_inserted[i] = ray.get(ref)["inserted"]
                except ray.exceptions.RayActorError:   # lost with its node: its count stays
                    self.shards_lost.add(i)
                    continue
            self._reading[i] = shard.stats.remote()
        c = self.counters
        self.landed = max(self.landed, self._inserted_at_start + sum(self.shard_inserted))
        c.inserted = min(self.landed, c.env_steps)

    def extras(self) -> dict[str, Any]:
        return {**super().extras(), "shard_nodes": self.shard_nodes,
                "shard_inserted": self.shard_inserted}
