"""What Ape-X and parallel SAC share: workers that feed one learner actor, which holds the
replay buffer, one evaluator, a parameter server, and a driver that never waits on one
particular actor.

    workers (N actors)                 learner (1 actor)
    env + policy copy  --add batches--> replay buffer (counts   --sample--> update, publish
    (Ape-X: explorers)                  what lands in it)                   every publish_every
          ^                                                                    |
          +---- pull every pull_every steps <-- parameter server <-------------+
    evaluator (1 actor): plays the driver's snapshot of the learner on fresh episodes

An algorithm subclasses three classes and writes only what differs:

| class                | writes                                                             |
| -------------------- | ------------------------------------------------------------------ |
| `Worker`             | `make_net`, `act`, `transitions` (and `priorities`, `env_action`)  |
| `LearnerActor`       | `make_learner` (and `after_updates`, `sample_args`, `replay_draw`); |
|                      | decorated with `remote_learner` (its adds run on a thread of their |
|                      | own)                                                               |
| `DistributedTrainer` | `Worker`, `Learner`, `Slots`, `updates_per_transition`, the        |
|                      | evaluation net                                                     |

Start-up: the learner publishes its first weights (after `--restore`: the restored ones) and
the driver waits for that before it starts a worker, so no worker ever acts on a random net.

| module       | what is in it                                                              |
| ------------ | -------------------------------------------------------------------------- |
| `config`     | `DistributedConfig` (the numbers) and `Slots` (the parts you can swap)     |
| `worker`     | `Worker`, with course_lib's `Outbox` and `WeightsFollower`                 |
| `learner`    | `LearnerActor` and the `Evaluator`                                         |
| `driver`     | `DistributedTrainer`: rounds, booking, iterations; `learner_chunks`        |
| `run_actors` | placement, start-up deadlines, which actor failed, nothing left behind     |
"""

from course_lib.distributed.config import (
    DistributedConfig as DistributedConfig,
    Slots as Slots,
    check_slots as check_slots,
)
from course_lib.distributed.driver import (
    MAX_LEARNER_CALLS as MAX_LEARNER_CALLS,
    Call as Call,
    DistributedTrainer as DistributedTrainer,
    Role as Role,
    Round as Round,
    learner_chunks as learner_chunks,
)
from course_lib.distributed.learner import (
    Evaluator as Evaluator,
    LearnerActor as LearnerActor,
    LearnerSnapshot as LearnerSnapshot,
    TrainReport as TrainReport,
    remote_learner as remote_learner,
)
from course_lib.distributed.run_actors import RunActors as RunActors
from course_lib.distributed.worker import (
    POLICY as POLICY,
    Outbox as Outbox,
    WeightsFollower as WeightsFollower,
    Worker as Worker,
    WorkerReport as WorkerReport,
)
