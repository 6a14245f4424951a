"""Experience replay for Ape-X style training: uniform, prioritized, n-step, sharded, and as a
Ray actor.

Five pieces, each usable on its own:

- `ReplayBuffer`: a ring of preallocated numpy arrays, one per field; the oldest transitions
  are overwritten first (FIFO), and sampling is uniform.
- `PrioritizedReplayBuffer`: the same ring, sampled in proportion to priority^alpha through a
  sum tree, with importance-sampling weights (Schaul et al. 2016).
- `NStepBuffer`: one per actor; turns 1-step transitions into n-step ones.
- `ReplayStore`: a buffer (prioritized or uniform) with counters, what a learner actor holds;
  `ReplayStoreActor` is the same class as a Ray actor of its own (notebook 04).
- `ShardedReplay`: prioritized replay split into `ReplayShard`s (one per node), sampled
  exactly as one buffer holding their priorities would be; on Ray, `ShardStoreActor` runs a
  shard on its node and `ShardSampler` is the learner's side of them.

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

The modules, one idea each: `uniform` (specs, checks and the ring of arrays), `sumtree` (the
sum and min trees), `prioritized` (proportional sampling and importance weights), `nstep`
(n-step transitions), `sharded` (shards sampled as one buffer), `server` (a buffer or a shard
as a Ray actor) and `shard_sampler` (the learner's side of the shards). Every name below is
importable from `course_lib.replay` itself.
"""

from course_lib.replay.nstep import (
    NStepBuffer as NStepBuffer,
    stack_transitions as stack_transitions,
)
from course_lib.replay.prioritized import (
    PrioritizedReplayBuffer as PrioritizedReplayBuffer,
)
from course_lib.replay.server import (
    ReplayStore as ReplayStore,
    ReplayStoreActor as ReplayStoreActor,
    ShardStore as ShardStore,
    ShardStoreActor as ShardStoreActor,
)
from course_lib.replay.shard_sampler import (
    ShardSampler as ShardSampler,
)
from course_lib.replay.sharded import (
    ReplayShard as ReplayShard,
    ShardedReplay as ShardedReplay,
)
from course_lib.replay.sumtree import (
    SumTree as SumTree,
)
from course_lib.replay.uniform import (
    ReplayBuffer as ReplayBuffer,
    transition_spec as transition_spec,
)
