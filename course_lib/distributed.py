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
| `LearnerActor`       | `make_learner` (and `after_update`, `sample_args`); decorated with |
|                      | `roles.remote_learner` (its adds run on a thread of their own)     |
| `DistributedTrainer` | `Worker`, `Learner`, `updates_per_transition`, the evaluation net  |

Start-up: the learner publishes its first weights (after `--restore`: the restored ones) and
the driver waits for that before it starts a worker, so no worker ever acts on a random net.

Faults: a worker whose process dies is restarted by Ray (`max_restarts`) and the call under way
is sent again (`max_task_retries=-1`); each result carries how often Ray has restarted that
worker, so two restarts between two results count two. A restarted worker plays with a new
seed. A crash loses what was only in the worker's memory: its outbox (at most `send_every`
transitions), its n-step window, and the env steps of the chunk under way. The transitions
that reached the learner's replay buffer are kept and counted there (the buffer counts
insertions, not the workers), up to the env steps counted: every transition is one env step's, so
`inserted` never exceeds `env_steps`, even when a lost chunk's env steps were not. A worker
that keeps dying ends the run with one line (`WorkerDiedError`) once Ray has restarted it
`max_worker_restarts` times. Any other failure ends the run with one line naming the actor at
fault (`failures.PartFailedError`: "the learner died: ...", "evaluator failed: ..."); a
failed start kills every actor created so far and names the one that could not start
(`failures.StartError`).

Time: the driver never waits past `max_time_s`; an iteration whose snapshot is not scored by
then is dropped (`results.OutOfTime`) and the run ends on its last scored snapshot.
"""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from abc import abstractmethod
from functools import partial
from typing import Any, ClassVar

import numpy as np
import ray

from course_lib.envs import NonFiniteError, env_dims, make_env
from course_lib.errors import first_line
from course_lib.failures import Parts, WorkerDiedError
from course_lib.param_server import ParameterStoreActor
from course_lib.pieces import Given, check_keys
from course_lib.pieces.drive import Counted
from course_lib.placement import actor_resources, check_gpus, check_pinning, started_here
from course_lib.ray_setup import init_ray
from course_lib.results import OutOfTime
from course_lib.roles import Evaluator
from course_lib.trainer import Snapshot, Trainer, TrainerConfig


@dataclasses.dataclass
class DistributedConfig(TrainerConfig):
    """The settings of every distributed trainer (workers, learner, driver, resources)."""

    LIMITS: ClassVar[dict[str, str]] = {
        "num_workers": ">= 1", "num_envs": ">= 1", "send_every": ">= 1",
        "pull_every": ">= 1", "publish_every": ">= 1", "worker_chunk": ">= 1",
        "learner_chunk": ">= 1", "max_lag_updates": ">= 0", "eval_every_s": ">= 0",
        "learner_cpus": ">= 0", "learner_gpus": ">= 0", "worker_cpus": ">= 0",
        "max_worker_restarts": ">= 0", "piece_timeout_s": "> 0"}

    num_workers: int = 2              # worker actors (Ape-X: explorers)
    num_envs: int = 1                 # envs each worker steps as one batch (one forward pass)
    send_every: int = 50              # transitions per batch a worker sends to the learner
    pull_every: int = 400             # worker env steps between weight pulls
    publish_every: int = 25           # learner updates between weight publications
    worker_chunk: int = 200           # env steps per worker task
    learner_chunk: int = 50           # updates per learner task
    max_lag_updates: int = 100        # workers pause while the learner is this far behind
    eval_every_s: float = 3.0         # seconds per iteration: one evaluation, one row
    learner_cpus: float = 0.5         # logical CPUs of the learner actor
    learner_gpus: float = 0.0         # GPUs of the learner actor (> 0: a cluster adds a GPU node)
    worker_cpus: float = 0.25         # logical CPUs of each worker, at most
    max_worker_restarts: int = 5      # a worker that died more often than this ends the run
    pin_learner: bool = False         # Linux, one machine: the learner alone on the last core
    piece_timeout_s: float = 30.0     # seconds a call of an attendee's piece (pieces=) may take



# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------

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


class DistributedTrainer(Trainer):
    """Starts the actors, hands out work in chunks, books what finishes, one row per iteration.

    The driver never waits on one actor: `ray.wait` returns whichever task finishes first (a
    worker's chunk of env steps, a learner's chunk of updates, a snapshot, an evaluation), the
    driver books it and hands out new work. The learner gets exactly the updates that
    `updates_due()` allows, and the workers pause while it is more than `max_lag_updates`
    behind: on a small machine the workers would otherwise outrun the learner.
    The learner's calls are `learner_chunks` of at most `learner_chunk` updates, at most
    `MAX_LEARNER_CALLS` in flight. With `pieces`, the attendee's throttle (`updates_allowed`)
    and learner calls (`learner_chunks`) take the place of these two rules, guarded
    (`course_lib.pieces.apex`).

    Each iteration starts by asking the learner for a snapshot (it runs after the updates
    already queued), has the evaluator score it while training goes on, and ends when the
    evaluation is back and `eval_every_s` have passed.

    | attribute        | meaning                                                        |
    | ---------------- | -------------------------------------------------------------- |
    | `workers`        | the worker actor handles (kill one to watch it restart)        |
    | `worker_nodes`   | the Ray node id each worker started on                         |
    | `worker_returns` | per worker: a list of (env_steps, episode return)              |
    | `pids`           | each worker's process id, as last seen                         |
    """

    Worker: ClassVar[type]                # the ray.remote worker class
    Learner: ClassVar[type]               # the ray.remote learner class
    worker_name: ClassVar[str] = "worker"  # what the algorithm calls a worker, for messages

    def __init__(self, config: DistributedConfig, restore: dict | None = None,
                 pieces: dict[str, Any] | None = None):
        super().__init__(config, restore)
        cfg = self.cfg
        check_keys(pieces or {})
        self.pieces = pieces or {}            # the attendee's, by key (`course_lib.pieces`)
        given = Given(self.pieces, "the driver", cfg.piece_timeout_s)
        self.throttle = given.throttle(cfg)                     # None: course_lib's own ...
        self.chunks = (given.chunks(cfg.learner_chunk, MAX_LEARNER_CALLS)   # ... rules
                       or partial(learner_chunks, chunk=cfg.learner_chunk))
        self.drive = given.drive()            # None: the loop of `step`
        env = make_env(cfg.env_id)
        self.check_env(env)
        self.dims = env_dims(env)
        env.close()
        init_ray()
        check_gpus(cfg, ray.cluster_resources(), can_add_nodes=not started_here())
        check_pinning(cfg, len(ray.nodes()))
        res = self.resources = actor_resources(cfg, ray.cluster_resources())
        self.parts = Parts()
        try:
            self._start_actors(res, restore)
        except BaseException:                     # also Ctrl-C: free the CPUs for the next run
            self.parts.kill_all()
            raise
        self.worker_returns: list[list[tuple[int, float]]] = [[] for _ in self.workers]
        self.lost = [0] * cfg.num_workers     # chunks lost in a row, per worker
        self.restarts = [0] * cfg.num_workers  # restarts each worker has reported
        self.landed = self.counters.inserted   # transitions in the replay, highest report
        self.resend_at = [0.0] * cfg.num_workers
        self.tasks: dict[ray.ObjectRef, tuple[str, int]] = {}   # in flight: (role, worker)
        self.updates_submitted = self.counters.learner_updates
        self._learn_infos: list[dict] = []    # learner means since the last snapshot

    def _start_actors(self, res: dict[str, float], restore: dict | None) -> None:
        """Create the actors and wait for each in turn, so a failure names its part
        (`failures.Parts.start`); every actor is registered as soon as it exists."""
        cfg, parts = self.cfg, self.parts
        prefix = f"{self.algo}-{uuid.uuid4().hex[:8]}"   # workers find these actors by name
        self.params = parts.add("parameter server",
                                ParameterStoreActor.options(name=f"{prefix}-params").remote())
        replay = {"capacity": cfg.buffer_size, "spec": self.transition_spec(),
                  "seed": self.seed("replay"), **self.replay_options()}
        self.learner = parts.add("learner", self.Learner.options(
            name=f"{prefix}-learner", num_cpus=res["learner"],
            num_gpus=res["learner_gpus"]).remote(
            cfg, self.dims, prefix, restore["learner"] if restore else None, self.seed("learner"),
            replay, Given(self.pieces, "the learner", cfg.piece_timeout_s)))
        # awaited in this order, so that a learner that failed because the parameter server
        # did is not blamed for it
        parts.start("parameter server", self.params.__ray_ready__.remote())
        self.learner_device = parts.start("learner", self.learner.ready.remote())  # published
        self.workers = [parts.add(f"{self.worker_name} {i}", self.Worker.options(
            num_cpus=res["worker"], scheduling_strategy="SPREAD",   # across a cluster's nodes
            max_restarts=cfg.max_worker_restarts, max_task_retries=-1).remote(
                i, cfg, prefix, self.seed("worker", i), **self.worker_options(i),
                given=Given(self.pieces, f"{self.worker_name} {i}", cfg.piece_timeout_s)))
            for i in range(cfg.num_workers)]
        self.evaluator = parts.add("evaluator", Evaluator.options(
            num_cpus=res["evaluator"]).remote(*self.evaluation_functions()))
        # the process ids, to notice restarts (this also waits until every worker is up)
        self.pids: list[int] = [parts.start(f"{self.worker_name} {i}", w.pid.remote())
                                for i, w in enumerate(self.workers)]
        self.worker_nodes = ray.get([w.node_id.remote() for w in self.workers])
        parts.start("evaluator", self.evaluator.__ray_ready__.remote())

    # -- handing out work ---------------------------------------------------------------

    def updates_due(self, stored: int | None = None) -> int:
        """`Trainer.updates_due`, or with the attendee's throttle (`pieces`) the updates it
        allows for the transitions past `learning_start`."""
        if self.throttle is None:
            return super().updates_due(stored)
        stored = self.stored_now if stored is None else stored
        return self._updates_at_start + self.throttle(max(0, stored - self.learning_start))

    def _running(self, role: str, index: int = 0) -> int:
        """How many tasks of `role` (for worker `index`) are in flight."""
        return sum(1 for r, i in self.tasks.values() if (r, i) == (role, index))

    def _schedule(self) -> None:
        """Give the learner the updates now due; let workers play unless the learner is behind."""
        cfg, c = self.cfg, self.counters
        due = self.updates_due()
        for n in self.chunks(due, self.updates_submitted, self._running("learn")):
            self.tasks[self.learner.train.remote(n)] = ("learn", 0)
            self.updates_submitted += n
        if due - c.learner_updates > cfg.max_lag_updates:
            return                                # the learner is behind: workers wait
        now = time.perf_counter()
        for i, worker in enumerate(self.workers):
            if not self._running("collect", i) and now >= self.resend_at[i]:
                self.tasks[worker.run.remote(cfg.worker_chunk)] = ("collect", i)

    def _book(self, ref: ray.ObjectRef) -> None:
        """Record a finished task (see `_result` for a failed one)."""
        role, i = self.tasks.pop(ref)
        if role == "collect":
            self._book_collect(ref, i)
            return
        out = self._result(ref, "evaluator" if role == "evaluate" else "learner")
        if role == "learn":
            self.counters.learner_updates = out.pop("updates")
            self._learn_infos.append(out)
        elif role == "snapshot":
            self._evaluating = self._take_snapshot(out)
            self._evaluate_next()
        else:                                     # an evaluation's returns
            self._evaluating.returns += out
            self._evaluate_next()

    def _result(self, ref: ray.ObjectRef, part: str, worker: int | None = None):
        """The result of a task of `part`. A failure ends the run with one line naming the
        part at fault (`failures.Parts.failure`: the learner, say, when a worker's add failed
        because the learner died); an env's non-finite value reaches the caller as itself.
        A worker that died under its chunk is the exception: None, and the chunk is resent."""
        try:
            out = ray.get(ref)
            return out.result if isinstance(out, Counted) else out   # (the attendee's drive)
        except ray.exceptions.RayError as err:
            if isinstance(getattr(err, "cause", None), NonFiniteError):
                raise err.cause from None
            if worker is not None and self.parts.is_own_death(err, part):
                self._lost_chunk(worker, err)     # Ray gave up on the call: resend it soon
                return None
            raise self.parts.failure(err, part) from None

    def _take_snapshot(self, out: dict) -> Snapshot:
        """The learner's snapshot with the counters of now, closing the training window: the
        learner's means over the updates booked since the previous snapshot, and the
        algorithm's columns as they stand at this moment."""
        c, infos = self.counters, self._learn_infos
        means = {key: float(np.mean([i[key] for i in infos])) if infos else math.nan
                 for key in self.learner_metrics}
        self._learn_infos = []
        return self.snapshot(out["state"], out["weights"], out["updates"], **means,
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
            ref = self.evaluator.evaluate.remote(self._evaluating.weights, episodes, seed)
            self.tasks[ref] = ("evaluate", 0)

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
        out = self._result(ref, f"{self.worker_name} {i}", worker=i)
        if out is None:
            return
        self.lost[i] = 0
        self.pids[i] = out["pid"]
        c.worker_restarts += out["restarts"] - self.restarts[i]   # as the worker counts them
        self.restarts[i] = out["restarts"]
        c.env_steps += out["env_steps"]
        if out["replay_inserted"] is not None:    # counted where the transitions landed ...
            self.landed = max(self.landed, self._inserted_at_start + out["replay_inserted"])
        c.inserted = min(self.landed, c.env_steps)   # ... up to the env steps counted
        c.episodes += len(out["episode_returns"])
        self.book_episodes(out["episode_returns"])
        self.worker_returns[i] += [(c.env_steps, r) for r in out["episode_returns"]]

    # -- one iteration ------------------------------------------------------------------

    def step(self) -> dict[str, Any]:
        """Train for at least `eval_every_s` seconds while the evaluator scores a snapshot.
        Never waits past the run's wall-clock budget: `OutOfTime` if it runs out before the
        snapshot is scored (an env whose episodes are long, say)."""
        cfg = self.cfg
        t0 = time.perf_counter()
        deadline = math.inf if cfg.max_time_s is None else self.start + cfg.max_time_s
        self._evaluating = self._scored = None
        self.tasks[self.learner.snapshot.remote()] = ("snapshot", 0)
        while self._scored is None or time.perf_counter() - t0 < cfg.eval_every_s:
            now = time.perf_counter()
            if self._scored is None and now >= deadline:
                raise OutOfTime(f"the time budget (max_time_s={cfg.max_time_s:g}) ran out while "
                                f"iteration {self.counters.iteration + 1} waited for its "
                                "evaluation; that iteration was dropped")
            if self.drive is not None:            # the attendee's loop trains a round
                self.drive.round(self)
                done, _ = ray.wait(list(self.tasks), num_returns=len(self.tasks), timeout=0)
                for ref in done:                  # the snapshot, the evaluations
                    self._book(ref)
                continue
            self._schedule()
            left = max(0.0, cfg.eval_every_s - (now - t0))
            wait = min(deadline - now, 3600.0) if self._scored is None else left   # (finite)
            if not self.tasks:                    # only a worker waiting to be resent
                time.sleep(min(wait, 0.1))
                continue
            done, _ = ray.wait(list(self.tasks), num_returns=1, timeout=wait)
            for ref in done:
                self._book(ref)
        return self.row(self._scored)

    def extras(self) -> dict[str, Any]:
        return {"worker_returns": self.worker_returns, "worker_nodes": self.worker_nodes,
                "learner_device": self.learner_device, "resources": self.resources}

    def close(self, timeout_s: float = 10.0) -> None:
        """Let the calls under way finish (a second or so), then kill the actors. Killing an
        actor in the middle of a call would make Ray retry the call, and say so."""
        if self.tasks:
            ray.wait(list(self.tasks), num_returns=len(self.tasks), timeout=timeout_s)
        for actor in [*self.workers, self.evaluator, self.learner, self.params]:
            ray.kill(actor)
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
