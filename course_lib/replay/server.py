"""The shared buffer as a Ray actor: `ReplayServer` (usable locally) and `ReplayActor`."""

from __future__ import annotations

import numpy as np
import ray

from course_lib.replay.prioritized import PrioritizedReplayBuffer
from course_lib.replay.uniform import ReplayBuffer


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

    def sample_batches(self, batch_size: int, count: int,
                       beta: float = 0.4) -> list[dict[str, np.ndarray]]:
        """`count` batches drawn independently, in one call (a learner's round trip buys
        several updates). Each needs only `batch_size` transitions stored, and each batch's
        importance weights are normalised by its own largest, as one `sample` call's are."""
        return [self.sample(batch_size, beta) for _ in range(count)]

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
