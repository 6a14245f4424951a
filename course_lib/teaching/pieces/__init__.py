"""The attendee's own pieces in the real trainers: each exercise's piece, checked as it runs,
put in the slot the core leaves for it.

    slots, said = exercises.yours(apex.ApexTrainer, outbox=Outbox)          # notebook 05
    apex.ApexTrainer.train(cfg, slots=slots)
    slots, said = exercises.yours(data_parallel.sync_sgd, average_gradients=average_gradients)
    data_parallel.sync_sgd(cfg, **slots)                                    # notebook 03

`slots_for(trainer, pieces)` builds what the trainer takes: a `Slots` object for a trainer
class (`distributed.config.Slots`, `apex.ApexSlots`, `sac.SACSlots`), the keyword slots for
notebook 03's functions. A piece that the trainer never calls is refused before anything
starts, naming the trainer that takes it.

| key                  | the exercise (notebook)                        | its slot                 |
| -------------------- | ---------------------------------------------- | ------------------------ |
| `outbox`             | `Outbox(replay, send_every, priorities)` (05)  | `outbox`                 |
| `weights_follower`   | `WeightsFollower(ps, name, module, pull_every)`| `follower`               |
|                      | (06)                                           |                          |
| `explorer_epsilons`  | `explorer_epsilons(n, eps, alpha)` (05)        | Ape-X's `epsilons`       |
| `updates_allowed`    | `updates_allowed(inserted, replay_ratio,       | `updates_due` (Ape-X)    |
|                      | batch_size)` (05)                              |                          |
| `learner_chunks`     | `learner_chunks(due, submitted, in_flight,     | `learner_chunks`         |
|                      | chunk)` (05, find the bug)                     |                          |
| `drive`              | `drive(explorers, learner, allowed, chunks,    | `round`                  |
|                      | env_steps)` (05, assemble)                     |                          |
| `find_prefix_sum`,   | the steps of a prioritized draw (04), or the   | Ape-X's `draw`           |
| `stratified_targets`,| `prioritized_sample` that assembles them (04)  |                          |
| `importance_weights`,|                                                |                          |
| `prioritized_sample` |                                                |                          |
| `squashed_log_prob`, | SAC's maths (06; `actor_step`: find the bug)   | SAC's `squashed_log_prob`|
| `soft_target`,       |                                                | `q_target`, `actor_step`,|
| `polyak`, `actor_step`|                                               | `polyak_update`          |
| `rollout`            | `rollout(env, actor, follower, send, ...)` (06)| SAC's `rollout`          |
| `versioned_weights`  | `VersionedWeights` actor (03)                  | `train_with_param_server`|
|                      |                                                | `(ps=)`                  |
| `cached_weights`,    | `CachedWeights().get(ps, name)`,               | its `make_pull`; with    |
| `prefetched_weights` | `PrefetchedWeights(ps, name).latest()` (03)    | `worker_step`, the cache |
| `average_gradients`  | `average_gradients(grads_list)` (03)           | `sync_sgd(average=)`     |
| `worker_step`        | `worker_step(ps, cache, compute_gradients, lr)`| `async_sgd(make_step=)`  |
|                      | (03)                                           |                          |

A wrong piece ends the run with one line naming it, never a hang: every call of a piece runs
on a thread of its own and is given `timeout_s` seconds (`PieceError`: "your Outbox did not
return from flush() within 30 s in explorer 0"); what it raises becomes "your Outbox failed in
explorer 0, in add(): ValueError: ..."; every call it makes into a real actor goes through a
handle that checks it ("your drive asked the learner for 0 updates"); and what it must do is
checked as the actor goes (the modules beside this one, one per notebook's pieces).
"""

from course_lib.teaching.pieces.guard import (
    PIECES as PIECES,
    Guarded as Guarded,
    PieceError as PieceError,
    check_keys as check_keys,
)
from course_lib.teaching.pieces.slots import slots_for as slots_for
