"""A buffer as a Ray actor: `ReplayStore` (usable locally) and `ReplayStoreActor`; one shard of
a sharded replay, `ShardStore` and `ShardStoreActor`.

One naming rule for every plain class that also runs as a Ray actor: the actor is the class's
name plus `Actor` (`ReplayStore` / `ReplayStoreActor` here, `ParameterStore` /
`ParameterStoreActor` in `course_lib.param_server`).
"""

from __future__ import annotations

import numpy as np
import ray

from course_lib.replay.prioritized import PrioritizedReplayBuffer
from course_lib.replay.sharded import ReplayShard, ShardTotals
from course_lib.replay.uniform import ReplayBuffer


class ReplayStore:
    """A prioritized buffer plus counters: what `ReplayStoreActor` runs, usable locally too.

    As a Ray actor it handles one call at a time, so explorers' adds and the learner's
    samples and updates never interleave and need no locks. Arrays that come back through
    Ray can be read-only views of Ray's buffers: copy one before changing it in place.
    """

    #: the class of a prioritized store's buffer (`ShardStore`: a `ReplayShard`)
    prioritized_buffer = PrioritizedReplayBuffer

    def __init__(self, capacity: int, spec, alpha: float = 0.6, eps: float = 1e-6, seed=None,
                 prioritized: bool = True, draw=None):
        self.prioritized = prioritized            # False: a uniform ReplayBuffer (SAC)
        self.buffer = (self.prioritized_buffer(capacity, spec, alpha=alpha, eps=eps, seed=seed,
                                               draw=draw)
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
        return self.sample_many(1, batch_size, beta)[0]

    def sample_many(self, count: int, batch_size: int,
                    beta: float = 0.4) -> list[dict[str, np.ndarray]]:
        """`count` batches drawn at once (the buffer's `sample_many`)."""
        batches = (self.buffer.sample_many(count, batch_size, beta) if self.prioritized
                   else self.buffer.sample_many(count, batch_size))
        self.sampled += count * batch_size
        return batches

    def update_priorities(self, indices, priorities) -> int:
        return self.buffer.update_priorities(indices, priorities)

    def size(self) -> int:
        return len(self.buffer)

    def stats(self) -> dict:
        """size, inserted and sampled (transitions), ratio = sampled / inserted."""
        inserted = self.buffer.inserted
        return {"size": len(self.buffer), "inserted": inserted, "sampled": self.sampled,
                "ratio": self.sampled / inserted if inserted else 0.0}


#: `ReplayStoreActor.remote(capacity, spec, alpha=0.6)` starts a `ReplayStore` in its own process.
ReplayStoreActor = ray.remote(ReplayStore)


class ShardStore(ReplayStore):
    """One shard of a sharded prioritized replay (`course_lib.replay.sharded`), with the
    counters of a `ReplayStore`: what `ShardStoreActor` runs on each node.

    Explorers `add` to their own node's shard, as they would to the learner (the same call
    and the same answer: this shard's count of stored transitions). The learner's
    `ShardSampler` calls `take` with the targets it routed here and `write_back` with the new
    priorities; both answer with this shard's totals after the call, which is how the sampler
    learns each shard's total priority and size without a round trip of its own.
    """

    prioritized_buffer = ReplayShard

    def __init__(self, capacity: int, spec, alpha: float = 0.6, eps: float = 1e-6, seed=None):
        super().__init__(capacity, spec, alpha=alpha, eps=eps, seed=seed)

    def totals(self) -> ShardTotals:
        return self.buffer.totals()

    def take(self, targets, assumed_total: float) -> tuple[dict[str, np.ndarray], ShardTotals]:
        """(`ReplayShard.take` at the routed `targets`, this shard's totals after it)."""
        part = self.buffer.take(targets, assumed_total)
        self.sampled += len(part["indices"])
        return part, self.buffer.totals()

    def write_back(self, indices, priorities) -> ShardTotals:
        """New priorities for ids this shard gave out (ids overwritten since are skipped);
        this shard's totals after them."""
        self.buffer.update_priorities(indices, priorities)
        return self.buffer.totals()

    def stats(self) -> dict:
        """`ReplayStore.stats` plus this shard's total priority and the node it runs on."""
        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
        return {**super().stats(), "total": self.buffer.tree.total, "node": node}


#: `ShardStoreActor.remote(capacity, spec, alpha=0.6)`: a `ShardStore` in its own process
#: (`shard_sampler.start_shards` places one on each node)
ShardStoreActor = ray.remote(ShardStore)
