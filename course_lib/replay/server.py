"""The shared buffer as a Ray actor: `ReplayStore` (usable locally) and `ReplayStoreActor`.

One naming rule for every plain class that also runs as a Ray actor: the actor is the class's
name plus `Actor` (`ReplayStore` / `ReplayStoreActor` here, `ParameterStore` /
`ParameterStoreActor` in `course_lib.param_server`).
"""

from __future__ import annotations

import numpy as np
import ray

from course_lib.replay.prioritized import PrioritizedReplayBuffer
from course_lib.replay.uniform import ReplayBuffer


class ReplayStore:
    """A prioritized buffer plus counters: what `ReplayStoreActor` runs, usable locally too.

    As a Ray actor it handles one call at a time, so explorers' adds and the learner's
    samples and updates never interleave and need no locks. Arrays that come back through
    Ray can be read-only views of Ray's buffers: copy one before changing it in place.
    """

    def __init__(self, capacity: int, spec, alpha: float = 0.6, eps: float = 1e-6, seed=None,
                 prioritized: bool = True):
        self.prioritized = prioritized            # False: a uniform ReplayBuffer (SAC)
        self.buffer = (PrioritizedReplayBuffer(capacity, spec, alpha=alpha, eps=eps, seed=seed)
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


#: `ReplayStoreActor.remote(capacity, spec, alpha=0.6)` starts a `ReplayStore` in its own process.
ReplayStoreActor = ray.remote(ReplayStore)
