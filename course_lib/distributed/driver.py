"""A distributed run's driver: it starts the actors, hands out work in chunks, books what
finishes, and ends each iteration with an evaluated snapshot (`trainer.Trainer`'s rule).

    driver round:  learner.train(n) while updates are due (at most 2 calls in flight)
                   worker.run(worker_chunk) for each idle worker, unless the learner is behind
                   ray.wait -> book whichever call finished first
    each iteration: learner.snapshot() -> evaluator.evaluate(...) -> a row

Time: the driver never waits past `max_time_s`; an iteration whose snapshot is not scored by
then is dropped (`errors.OutOfTime`) and the run ends on its last scored snapshot.

Faults: a worker whose process dies is restarted by Ray (`max_restarts`) and the call under way
is sent again (`max_task_retries=-1`); each report carries how often Ray has restarted that
worker, so two restarts between two reports count two. A restarted worker plays with a new
seed. A crash loses what was only in the worker's memory: its outbox (at most `send_every`
transitions), its n-step window, and the env steps of the chunk under way. The transitions
that reached the replay are kept and counted there (the buffer counts insertions, not the
workers), up to the env steps counted: every transition is one env step's, so `inserted` never
exceeds `env_steps`. The parameter server and the evaluator are restarted too (the learner
publishes again within `publish_every` updates; an evaluation is played again). A worker that
keeps dying ends the run with one line (`WorkerDiedError`) once Ray has restarted it
`max_worker_restarts` times; the learner's death ends it too (`LearnerDiedError`: its network
and optimiser lived only there; the run's last checkpoint continues it). Any other failure
ends the run with one line naming the actor at fault (`run_actors.RunActors`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import time
import uuid
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
import ray

from course_lib.distributed.config import DistributedConfig, Slots, check_slots
from course_lib.distributed.learner import Evaluator, LearnerSnapshot
from course_lib.distributed.run_actors import (
    RunActors,
    actor_resources,
    check_gpus,
    check_pinning,
    check_room,
    settled_free_cpus,
)
from course_lib.distributed.worker import WorkerReport
from course_lib.envs import env_dims, make_env
from course_lib.errors import (
    LearnerDiedError,
    NonFiniteError,
    OutOfTime,
    WorkerDiedError,
    first_line,
)
from course_lib.param_server import ParameterStoreActor
from course_lib.ray_tools import init_ray, started_here
from course_lib.trainer import Snapshot, Trainer

#: learner calls the driver keeps queued at most: the learner never waits for the driver, and a
#: slow learner does not collect a pile of calls that run long after they were due
MAX_LEARNER_CALLS = 2


def learner_chunks(due: int, submitted: int, in_flight: int, chunk: int) -> list[int]:
    """The learner calls to send now, as their numbers of updates: what is due and not yet
    submitted, in chunks of at most `chunk`, while fewer than `MAX_LEARNER_CALLS` are in flight.

    >>> learner_chunks(due=120, submitted=0, in_flight=0, chunk=50), learner_chunks(120, 0, 1, 50)
    ([50, 50], [50])
    """
    sizes = []
    while in_flight < MAX_LEARNER_CALLS and submitted < due:
        sizes.append(min(chunk, due - submitted))
        submitted += sizes[-1]
        in_flight += 1
    return sizes


class Role(enum.Enum):
    """What a call in flight is: the driver books each kind its own way."""

    COLLECT = "collect"               # a worker's run: env steps
    LEARN = "learn"                   # the learner's train: updates
    SNAPSHOT = "snapshot"             # the learner's snapshot: what the iteration evaluates
    EVALUATE = "evaluate"             # the evaluator's episodes


@dataclasses.dataclass(frozen=True)
class Call:
    """A call in flight: its role and, for a worker's run, which worker."""

    role: Role
    worker: int = 0


class Round:
    """course_lib's round of the driver (the `round` slot): hand out what is due, then book
    the first call to finish, waiting at most `wait_s`."""

    def __init__(self, driver: DistributedTrainer):
        self.driver = driver

    def run(self, wait_s: float) -> None:
        driver = self.driver
        driver.hand_out()
        if not driver.tasks:                      # only a worker waiting to be resent
            time.sleep(min(wait_s, 0.1))
            return
        done, _ = ray.wait(list(driver.tasks), num_returns=1, timeout=wait_s)
        for ref in done:
            driver.book(ref)


class DistributedTrainer(Trainer):
    """Starts the actors, hands out work in chunks, books what finishes, one row per iteration.

    The driver never waits on one actor: `ray.wait` returns whichever call finishes first (a
    worker's chunk of env steps, a learner's chunk of updates, a snapshot, an evaluation), the
    driver books it and hands out new work (a `Round`). The learner gets exactly the updates
    that `updates_due()` allows, in `learner_chunks`, and the workers pause while it is more
    than `max_lag_updates` behind: on a small machine they would otherwise outrun it.

    Each iteration starts by asking the learner for a snapshot (it runs after the updates
    already queued), has the evaluator score it while training goes on, and ends when the
    evaluation is back and `eval_every_s` have passed.

    | attribute        | meaning                                                        |
    | ---------------- | -------------------------------------------------------------- |
    | `workers`        | the worker actor handles (kill one to watch it restart)        |
    | `learner_actor`  | the learner actor's handle                                     |
    | `tasks`          | the calls in flight: ObjectRef -> `Call`                       |
    | `worker_nodes`   | the Ray node id each worker started on                         |
    | `worker_returns` | per worker: a list of (env_steps, episode return)              |
    | `pids`           | each worker's process id, as last seen                         |
    """

    Worker: ClassVar[type]                # the ray.remote worker class
    Learner: ClassVar[type]               # the ray.remote learner class
    Slots: ClassVar[type[Slots]] = Slots  # the slots it takes (an algorithm adds its own)
    worker_name: ClassVar[str] = "worker"  # what the algorithm calls a worker, for messages

    def __init__(self, config: DistributedConfig, restore: dict | None = None,
                 slots: Slots | None = None):
        super().__init__(config, restore)
        cfg = self.cfg
        self.slots = check_slots(slots, self.Slots, type(self).__name__)
        self.chunks = self.slots.learner_chunks or learner_chunks
        env = make_env(cfg.env_id)
        self.check_env(env)
        self.dims = env_dims(env)
        env.close()
        init_ray()
        check_gpus(cfg, ray.cluster_resources(), can_add_nodes=not started_here())
        check_pinning(cfg, len(ray.nodes()))
        prefix = f"{self.algo}-{uuid.uuid4().hex[:8]}"    # workers find the others by name
        cpus = (settled_free_cpus() if started_here()
                else ray.cluster_resources().get("CPU", 1.0))
        res = self.resources = actor_resources(cfg, cpus)
        check_room(res, cfg.num_workers, prefix)
        ran = self.counters.time_s    # a resumed run's clock goes on from its checkpoint, but
        timeout = max(0.0, min(cfg.start_timeout_s, (cfg.max_time_s or math.inf) - ran))
        self.actors = RunActors(prefix, self.start + ran + timeout, timeout)  # start-up: from now
        try:
            self._start_actors(res, restore)
        except BaseException:                     # also Ctrl-C: free the CPUs for the next run
            self.actors.kill_all()
            raise
        self.worker_returns: list[list[tuple[int, float]]] = [[] for _ in self.workers]
        self.lost = [0] * cfg.num_workers     # chunks lost in a row, per worker
        self.restarts = [0] * cfg.num_workers  # restarts each worker has reported
        self.landed = self.counters.inserted   # transitions in the replay, highest report
        self.resend_at = [0.0] * cfg.num_workers
        self.tasks: dict[ray.ObjectRef, Call] = {}
        self.updates_submitted = self.counters.learner_updates
        self._learn_means: list[dict[str, float]] = []    # since the last snapshot
        self.round = (self.slots.round or Round)(self)

    def _start_actors(self, res: dict[str, float], restore: dict | None) -> None:
        """Create the actors and wait for each in turn, so a failure names its actor; every
        actor is registered as soon as it exists."""
        cfg, actors = self.cfg, self.actors
        self.params = actors.add("parameter server", ParameterStoreActor.options(
            name=actors.ray_name("parameter server"), max_restarts=-1,
            max_task_retries=-1).remote(), serves=True)
        replay = {"capacity": cfg.buffer_size, "spec": self.transition_spec(),
                  "seed": self.seed_for("replay"), **self.replay_options()}
        self.learner_actor = actors.add("learner", self.Learner.options(
            name=actors.ray_name("learner"), num_cpus=res["learner"],
            num_gpus=res["learner_gpus"]).remote(
            cfg, self.dims, actors.prefix, restore["learner"] if restore else None,
            self.seed_for("learner"), replay, self.slots), res["learner"], res["learner_gpus"])
        # in this order: a learner that failed because the parameter server did is not blamed
        actors.started("parameter server", self.params.__ray_ready__.remote())
        self.learner_device = actors.started("learner", self.learner_actor.ready.remote())
        self.workers = [actors.add(f"{self.worker_name} {i}", self.Worker.options(
            name=actors.ray_name(f"{self.worker_name} {i}"), num_cpus=res["worker"],
            scheduling_strategy="SPREAD",                  # across a cluster's nodes
            max_restarts=cfg.max_worker_restarts, max_task_retries=-1).remote(
                i, cfg, actors.prefix, self.seed_for("worker", i), self.slots,
                **self.worker_options(i)), res["worker"])
            for i in range(cfg.num_workers)]
        self.evaluator = actors.add("evaluator", Evaluator.options(
            name=actors.ray_name("evaluator"), num_cpus=res["evaluator"], max_restarts=-1,
            max_task_retries=-1).remote(*self.evaluation_functions()), res["evaluator"])
        # the process ids, to notice restarts (this also waits until every worker is up)
        self.pids: list[int] = [actors.started(f"{self.worker_name} {i}", w.pid.remote())
                                for i, w in enumerate(self.workers)]
        self.worker_nodes = [actors.started(f"{self.worker_name} {i}", w.node_id.remote())
                             for i, w in enumerate(self.workers)]
        actors.started("evaluator", self.evaluator.__ray_ready__.remote())

    # -- handing out work ---------------------------------------------------------------

    def updates_due(self, stored: int | None = None) -> int:
        """`Trainer.updates_due`, or the `updates_due` slot's count for the transitions past
        `learning_start`."""
        if self.slots.updates_due is None:
            return super().updates_due(stored)
        stored = self.stored_now if stored is None else stored
        return self._updates_at_start + self.slots.updates_due(
            max(0, stored - self.learning_start), self.cfg)

    def running(self, role: Role, worker: int = 0) -> int:
        """How many calls of `role` (for worker `worker`) are in flight."""
        return sum(1 for call in self.tasks.values() if call == Call(role, worker))

    def hand_out(self) -> None:
        """Give the learner the updates now due; let workers play unless the learner is behind."""
        cfg, c = self.cfg, self.counters
        due = self.updates_due()
        for n in self.chunks(due, self.updates_submitted, self.running(Role.LEARN),
                             cfg.learner_chunk):
            self.submit(self.learner_actor.train.remote(n), Call(Role.LEARN))
            self.updates_submitted += n
        if due - c.learner_updates > cfg.max_lag_updates:
            return                                # the learner is behind: workers wait
        now = time.perf_counter()
        for i, worker in enumerate(self.workers):
            if not self.running(Role.COLLECT, i) and now >= self.resend_at[i]:
                self.submit(worker.run.remote(cfg.worker_chunk), Call(Role.COLLECT, i))

    def submit(self, ref: ray.ObjectRef, call: Call) -> ray.ObjectRef:
        """Keep `ref` in flight as `call`, for `book` to book when it finishes."""
        self.tasks[ref] = call
        return ref

    # -- booking what finished ------------------------------------------------------------

    def book(self, ref: ray.ObjectRef) -> None:
        """Book a finished call (see `result` for one that failed)."""
        call = self.tasks.pop(ref)
        if call.role is Role.COLLECT:
            self._book_collect(ref, call.worker)
            return
        out = self.result(ref, "evaluator" if call.role is Role.EVALUATE else "learner")
        if call.role is Role.LEARN:
            self.counters.learner_updates = out.updates
            if out.means:
                self._learn_means.append(out.means)
        elif call.role is Role.SNAPSHOT:
            self._evaluating = self._take_snapshot(out)
            self._evaluate_next()
        else:                                     # an evaluation's returns
            self._evaluating.returns += out
            self._evaluate_next()

    def result(self, ref: ray.ObjectRef, part: str, worker: int | None = None):
        """The result of a call of `part`. A failure ends the run with one line naming the
        actor at fault (`RunActors.failure`: the learner, say, when a worker's add failed
        because the learner died); an env's non-finite value reaches the caller as itself.
        A worker that died under its chunk is the exception: None, and the chunk is resent."""
        try:
            return ray.get(ref)
        except ray.exceptions.RayError as err:
            if isinstance(getattr(err, "cause", None), NonFiniteError):
                raise err.cause from None
            if worker is not None and self.actors.is_own_death(err, part):
                self._lost_chunk(worker, err)     # Ray gave up on the call: resend it soon
                return None
            failure = self.actors.failure(err, part)
            if str(failure).startswith("the learner died"):
                raise LearnerDiedError(f"{failure}: its network and optimiser state lived "
                                       "only there, so the run ends") from None
            raise failure from None

    def _take_snapshot(self, out: LearnerSnapshot) -> Snapshot:
        """The learner's snapshot with the counters of now, closing the training window: the
        learner's means over the updates booked since the previous snapshot, and the
        algorithm's columns as they stand at this moment."""
        c, means = self.counters, self._learn_means
        window = {key: float(np.mean([m[key] for m in means])) if means else math.nan
                  for key in self.learner_metrics}
        self._learn_means = []
        return self.snapshot(out.state, out.weights, out.updates, **window,
                             **self.row_extras(),
                             replay_size=min(self.stored_now, self.cfg.buffer_size),
                             worker_restarts=c.worker_restarts)

    def _evaluate_next(self) -> None:
        """Send the snapshot's next evaluation, or mark it scored."""
        request = self.next_evaluation(self._evaluating)
        if request is None:
            self._scored = self._evaluating
        else:
            episodes, seed = request
            self.submit(self.evaluator.evaluate.remote(self._evaluating.weights, episodes,
                                                       seed), Call(Role.EVALUATE))

    def _lost_chunk(self, i: int, err: BaseException) -> None:
        """Worker `i` died under a chunk and Ray gave up on the call: resend it in a second,
        unless that happened again and again (Ray stopped restarting the worker)."""
        self.lost[i] += 1
        if self.lost[i] > 3:        # lost again and again after Ray gave up: the actor is gone
            raise WorkerDiedError(
                f"{self.worker_name} {i} kept dying and Ray stopped restarting it "
                f"(max_worker_restarts={self.cfg.max_worker_restarts}); last error: "
                f"{first_line(err)}") from None
        self.resend_at[i] = time.perf_counter() + 1.0   # soon, not in a busy loop

    def _book_collect(self, ref: ray.ObjectRef, i: int) -> None:
        """Book worker `i`'s finished chunk: counters, returns, restarts it reports."""
        c = self.counters
        out: WorkerReport | None = self.result(ref, f"{self.worker_name} {i}", worker=i)
        if out is None:
            return
        self.lost[i] = 0
        self.pids[i] = out.pid
        c.worker_restarts += out.restarts - self.restarts[i]   # as the worker counts them
        self.restarts[i] = out.restarts
        c.env_steps += out.env_steps
        if out.replay_inserted is not None:      # counted where the transitions landed ...
            self.landed = max(self.landed, self._inserted_at_start + out.replay_inserted)
        c.inserted = min(self.landed, c.env_steps)   # ... up to the env steps counted
        c.episodes += len(out.episode_returns)
        self.book_episodes(out.episode_returns)
        self.worker_returns[i] += [(c.env_steps, r) for r in out.episode_returns]

    # -- one iteration ------------------------------------------------------------------

    def step(self) -> dict[str, Any]:
        """Train for at least `eval_every_s` seconds while the evaluator scores a snapshot,
        round after round (`Round`, or the `round` slot). Never waits past the run's
        wall-clock budget: `OutOfTime` if it runs out before the snapshot is scored."""
        cfg = self.cfg
        t0 = time.perf_counter()
        deadline = math.inf if cfg.max_time_s is None else self.start + cfg.max_time_s
        self._evaluating = self._scored = None
        self.submit(self.learner_actor.snapshot.remote(), Call(Role.SNAPSHOT))
        while self._scored is None or time.perf_counter() - t0 < cfg.eval_every_s:
            now = time.perf_counter()
            if self._scored is None and now >= deadline:
                raise OutOfTime(f"the time budget (max_time_s={cfg.max_time_s:g}) ran out while "
                                f"iteration {self.counters.iteration + 1} waited for its "
                                "evaluation; that iteration was dropped")
            left = max(0.0, cfg.eval_every_s - (now - t0))
            self.round.run(min(deadline - now, 3600.0) if self._scored is None else left)
        return self.row(self._scored)

    def extras(self) -> dict[str, Any]:
        return {"worker_returns": self.worker_returns, "worker_nodes": self.worker_nodes,
                "learner_device": self.learner_device, "resources": self.resources}

    def close(self, timeout_s: float = 10.0) -> None:
        """Let the calls under way finish (a second or so), then kill the actors. Killing an
        actor in the middle of a call would make Ray retry the call, and say so."""
        if self.tasks:
            ray.wait(list(self.tasks), num_returns=len(self.tasks), timeout=timeout_s)
        self.actors.kill_all()
        self.tasks.clear()

    # -- what an algorithm writes -----------------------------------------------------------

    learner_metrics: ClassVar[tuple[str, ...]] = ("loss",)   # learner means shown in each row

    def row_extras(self) -> dict[str, float]:
        """The algorithm's own columns of a progress row (Ape-X: the replay ratio)."""
        return {}

    @abstractmethod
    def transition_spec(self) -> dict:
        """The replay buffer's fields (`replay.transition_spec`)."""

    def replay_options(self) -> dict[str, Any]:
        """Keyword arguments of the learner's `ReplayStore` (prioritized or not, alpha)."""
        return {}

    def worker_options(self, index: int) -> dict[str, Any]:
        """Extra keyword arguments of worker `index` (Ape-X: its epsilon)."""
        return {}

    @abstractmethod
    def evaluation_functions(self) -> tuple:
        """(make_net, score) for the evaluator: module-level functions or partials, since
        they travel to the evaluator's process."""

