"""Ape-X DQN (Horgan et al. 2018) on Ray core: many explorers, one prioritized replay, one learner.

    explorers (N actors)         replay (1 actor)           learner (1 actor)
    env + own copy of Q  --add-> prioritized buffer --sample-> DQNLearner.update
    eps_i-greedy, n-step         batches of ~50 with        priorities written back
    initial priorities           priorities                  weights published
          ^                                                         |
          +------ pull every ~400 steps <-- parameter server <------+
                  (only when the version changed)        evaluator: greedy, newest weights

Every piece of DQN maths is `course_lib.dqn` (the same functions the single-process baseline
calls); this module only adds the distribution:

- `Explorer`: its own env, a fixed eps_i = eps^(1 + alpha i/(N-1)), an NStepBuffer, and its
  own network to compute the initial priorities |TD error| of the batches it sends.
- `Learner`: keeps `prefetch` sample requests in flight (`ray.wait` takes whichever is ready),
  so it trains while the replay actor samples; each request brings `sample_batches` batches.
- `Evaluator`: greedy episodes with the newest weights.
- `ApexTrainer`: the driver. It hands out work in chunks (explorer: so many env steps;
  learner: so many updates) and holds the *replay ratio*, learner samples per inserted
  transition, near `replay_ratio`: the learner gets updates only as data arrives, and the
  explorers pause while the learner is behind. So more explorers mean the same data per
  update (faster in wall-clock), never a starved or a flooded learner.

Fault tolerance: a dead explorer is restarted by Ray (`max_restarts=-1`), which also sends
the lost chunk again (`max_task_retries=-1`); the driver counts restarts by the explorers'
pids and resends a chunk itself if Ray gives up on it. The driver writes checkpoints and
`ApexTrainer(cfg, restore=checkpoint)` resumes: network, optimiser and counters continue,
the replay buffer refills.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import ray
import torch

from course_lib.config import Config
from course_lib.dqn import (
    DuelingQNet,
    env_dims,
    epsilon_for_explorer,
    epsilon_greedy,
    evaluate_greedy,
    greedy_policy,
    make_env,
    make_learner,
    require_discrete,
    td_errors,
    updates_due,
)
from course_lib.driver import Driver, mean_or_nan, share_cpus, train_with
from course_lib.param_server import ParameterServer, pull_into
from course_lib.ray_setup import init_ray
from course_lib.replay import NStepBuffer, ReplayActor, stack_transitions, transition_spec
from course_lib.results import Algorithm


@dataclass
class ApexConfig(Config):
    """Ape-X DQN hyperparameters. Full mode: greedy CartPole-v1 return >= 475 (10 episodes)."""

    QUICK: ClassVar[dict] = {"max_env_steps": 4_000, "max_time_s": 120.0, "target_return": None,
                             "num_workers": 2, "eval_every_s": 2.0, "eval_episodes": 3,
                             "learning_starts": 500}
    env_id: str = "CartPole-v1"       # any gymnasium env with a discrete action space
    num_workers: int = 4              # explorer actors (cheap: they wait while the learner works)
    # -- the learner (as in course_lib.dqn) --
    hidden: tuple[int, ...] = (128, 128)  # hidden layer sizes of the dueling Q network's trunk
    lr: float = 2e-3                  # Adam learning rate
    gamma: float = 0.99               # discount factor
    n_step: int = 3                   # rewards summed before bootstrapping
    batch_size: int = 64              # transitions per gradient step
    target_update_every: int = 250    # learner updates between hard target-network copies
    grad_clip: float = 10.0           # max global gradient norm
    # -- replay --
    buffer_size: int = 100_000        # replay capacity (FIFO)
    learning_starts: int = 1_000      # transitions stored before the learner starts
    replay_ratio: float = 16.0        # learner samples per inserted transition (the throttle)
    priority_alpha: float = 0.6       # P(i) ~ p_i^alpha
    priority_beta: float = 0.4        # importance-sampling exponent
    # -- explorers --
    eps: float = 0.4                  # eps_i = eps^(1 + eps_alpha * i / (N-1))
    eps_alpha: float = 7.0            # how fast eps_i falls from explorer 0 to N-1
    send_every: int = 50              # transitions per batch an explorer sends to replay
    pull_every: int = 400             # explorer env steps between weight pulls
    publish_every: int = 25           # learner updates between weight publications
    # -- the driver --
    explorer_chunk: int = 200         # env steps per explorer task
    learner_chunk: int = 50           # updates per learner task
    prefetch: int = 2                 # sample requests the learner keeps in flight
    sample_batches: int = 4           # batches fetched per sample request (fewer round trips)
    max_lag_updates: int = 100        # explorers pause while the learner is this far behind
    eval_every_s: float = 3.0         # seconds per iteration: one evaluation, one progress row
    eval_episodes: int = 10           # greedy episodes per evaluation
    # -- Ray resources (logical CPUs; explorers share what the others leave) --
    learner_cpus: float = 0.5         # the learner actor (plus one GPU if the cluster has one)
    explorer_cpus: float = 0.25       # each explorer, at most
    # -- stopping --
    target_return: float | None = 475.0  # stop: greedy mean return reached (None: no goal)
    max_env_steps: int | None = 100_000  # stop: env step budget (None: unlimited)
    max_time_s: float | None = 600.0  # stop: wall-clock budget in seconds (None: unlimited)
    seed: int = 0                     # seeds the networks, the envs and the exploration


# ---------------------------------------------------------------------------------------------
# Explorers
# ---------------------------------------------------------------------------------------------

WEIGHTS = "q"   # the name the learner publishes its online network under


def pull_newer(params, net: torch.nn.Module, version: int) -> int:
    """Load the parameter server's newest weights into `net` if they are newer than
    `version`; returns the version `net` now has (unchanged if nothing was published yet)."""
    return pull_into(params, WEIGHTS, net, version)


@ray.remote(max_restarts=-1, max_task_retries=-1)
class Explorer:
    """One env and a copy of the Q network; plays eps_i-greedy and feeds the replay actor.

    `run(num_steps)` plays that many env steps and returns what happened:

    | key             | value                                                   |
    | --------------- | ------------------------------------------------------- |
    | env_steps       | num_steps                                               |
    | sent            | transitions stored in the replay actor during the call |
    | episode_returns | returns of the episodes that ended during the call      |
    | pid             | this process (a new pid means the actor was restarted)  |

    If the process dies, Ray starts a new one (`max_restarts=-1`) and runs `__init__` again
    with the same arguments: the explorer finds the replay actor and the parameter server by
    name, gets a fresh env and pulls the newest weights. The `run` call that was under way is
    sent again by Ray (`max_task_retries=-1`), and the driver notices the restart by the new
    pid. (Names rather than actor handles as arguments: Ray keeps handle arguments in the
    object store, and warns that a restart fails if they are gone by then.)
    """

    def __init__(self, index: int, cfg: ApexConfig, epsilon: float, prefix: str, seed: int):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.cfg, self.index, self.epsilon = cfg, index, epsilon
        self.replay = ray.get_actor(f"{prefix}-replay")
        self.params = ray.get_actor(f"{prefix}-params")
        self.rng = np.random.default_rng(seed)
        self.env = make_env(cfg.env_id)
        self.obs_dim, self.n_actions = env_dims(self.env)
        self.net = DuelingQNet(self.obs_dim, self.n_actions, tuple(cfg.hidden))
        self.nstep = NStepBuffer(cfg.n_step, cfg.gamma)
        self.obs, _ = self.env.reset(seed=seed)
        self.episode_return = 0.0
        self.outbox: list[dict] = []          # n-step transitions not sent yet
        self.adding = None                    # the replay add still in flight (at most one)
        self.version = -1
        self.steps_since_pull = 0
        self.pull_weights()

    def pid(self) -> int:
        """This explorer's process id (a new one after a restart)."""
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this explorer runs on (on a cluster: which machine)."""
        return ray.get_runtime_context().get_node_id()

    def pull_weights(self) -> None:
        """Fetch the newest weights, if the learner published any since the last pull."""
        self.version = pull_newer(self.params, self.net, self.version)
        self.steps_since_pull = 0

    def run(self, num_steps: int) -> dict[str, Any]:
        returns, sent = [], 0
        for _ in range(num_steps):
            action = epsilon_greedy(self.net, self.obs, self.epsilon, self.rng, self.n_actions)
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            self.outbox += self.nstep.add(self.obs, action, reward, next_obs, terminated,
                                          truncated)
            self.episode_return += reward
            self.obs = next_obs                   # carry the next observation over
            if terminated or truncated:
                returns.append(self.episode_return)
                self.obs, _ = self.env.reset()
                self.episode_return = 0.0
            if len(self.outbox) >= self.cfg.send_every:
                sent += self.send()
            self.steps_since_pull += 1
            if self.steps_since_pull >= self.cfg.pull_every:
                self.pull_weights()
        if self.adding is not None:               # what we report as sent is really stored
            ray.get(self.adding)
            self.adding = None
        return {"env_steps": num_steps, "sent": sent, "episode_returns": returns,
                "pid": os.getpid()}

    def send(self) -> int:
        """Send the outbox to the replay actor, with priorities from our own network."""
        batch = stack_transitions(self.outbox)
        self.outbox = []
        priorities = td_errors(batch, self.net)   # own copy as both online and target net
        if self.adding is not None:               # back-pressure: one add in flight at most
            ray.get(self.adding)
        self.adding = self.replay.add.remote(batch, priorities)
        return len(priorities)


# ---------------------------------------------------------------------------------------------
# The learner
# ---------------------------------------------------------------------------------------------

@ray.remote
class Learner:
    """A DQNLearner fed by the replay actor; publishes weights to the parameter server.

    `train(num_updates)` runs that many updates and returns the update count and mean loss.
    Sampling is pipelined: `prefetch` sample requests stay in flight, `ray.wait` takes the
    first one ready and a new request replaces it at once, so the replay actor samples while
    the learner trains. Each request fetches `sample_batches` batches in one round trip (one
    prioritized sample of k * batch_size, shuffled and cut in k), and their new priorities
    go back together, without waiting for an answer: Ray calls, not maths, are the cost here.
    """

    def __init__(self, cfg: ApexConfig, obs_dim: int, n_actions: int, replay, params,
                 state: dict | None = None):
        torch.set_num_threads(1)
        torch.manual_seed(cfg.seed)
        self.cfg, self.replay, self.params = cfg, replay, params
        self.learner = make_learner(cfg, obs_dim, n_actions)
        if state is not None:
            self.learner.load_state_dict(state)
        self.rng = np.random.default_rng(cfg.seed)
        self.in_flight: list = []            # sample requests sent to the replay actor
        self.batches: list[dict] = []        # fetched batches not trained on yet
        self.done: list[tuple[np.ndarray, np.ndarray]] = []  # (ids, new priorities) to send
        self.publish()

    def publish(self) -> None:
        """Weights to the parameter server, which puts each version in the object store once
        for every reader. Not awaited: the learner goes straight back to training."""
        self.params.push.remote(WEIGHTS, self.learner.get_weights())

    def next_batch(self) -> dict[str, np.ndarray]:
        """The next batch to train on, keeping `prefetch` sample requests in flight."""
        cfg = self.cfg
        if not self.batches:
            while len(self.in_flight) < cfg.prefetch:
                self.in_flight.append(self.replay.sample.remote(
                    cfg.batch_size * cfg.sample_batches, cfg.priority_beta))
            [ready], self.in_flight = ray.wait(self.in_flight, num_returns=1)
            self.in_flight.append(self.replay.sample.remote(
                cfg.batch_size * cfg.sample_batches, cfg.priority_beta))
            big = ray.get(ready)
            parts = np.array_split(self.rng.permutation(len(big["indices"])), cfg.sample_batches)
            self.batches = [{name: array[part] for name, array in big.items()} for part in parts]
        return self.batches.pop()

    def train(self, num_updates: int) -> dict[str, Any]:
        cfg, losses = self.cfg, []
        for _ in range(num_updates):
            batch = self.next_batch()
            info = self.learner.update(batch)
            losses.append(info["loss"])
            self.done.append((batch["indices"], info["priorities"]))
            if not self.batches:                 # the fetched group is used up
                ids, priorities = (np.concatenate(x) for x in zip(*self.done, strict=True))
                self.replay.update_priorities.remote(ids, priorities)
                self.done = []
            if self.learner.updates % cfg.publish_every == 0:
                self.publish()
        return {"updates": self.learner.updates, "loss": float(np.mean(losses))}

    def state_dict(self) -> dict[str, Any]:
        return self.learner.state_dict()

    def get_weights(self) -> dict[str, np.ndarray]:
        return self.learner.get_weights()


# ---------------------------------------------------------------------------------------------
# The evaluator
# ---------------------------------------------------------------------------------------------

@ray.remote
class Evaluator:
    """Scores the newest published weights with the greedy policy."""

    def __init__(self, cfg: ApexConfig, obs_dim: int, n_actions: int, params):
        torch.set_num_threads(1)
        self.cfg, self.params = cfg, params
        self.net = DuelingQNet(obs_dim, n_actions, tuple(cfg.hidden))
        self.version = -1

    def evaluate(self) -> dict[str, Any]:
        self.version = pull_newer(self.params, self.net, self.version)
        returns = evaluate_greedy(self.net, self.cfg.env_id, self.cfg.eval_episodes)
        return {"eval_return": float(returns.mean()), "version": self.version}


# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------

def actor_cpus(cfg: ApexConfig, total_cpus: float) -> dict[str, float]:
    """Logical CPUs per actor so that everything fits in `total_cpus` (Ray would otherwise
    wait forever for an actor it cannot place). Explorers share what the others leave.

    Logical CPUs only decide where actors may run; the operating system shares the real cores
    between all of them, so fractions are how a learner, a replay actor and several explorers
    fit on a 2-core laptop."""
    small, explorer = share_cpus(total_cpus, cfg.learner_cpus, cfg.num_workers,
                                 cfg.explorer_cpus)
    return {"learner": cfg.learner_cpus, "replay": small, "evaluator": small,
            "explorer": explorer}   # the parameter server: 0


class ApexTrainer(Driver):
    """The Ape-X driver: starts the actors, hands out work, records one row per iteration.

    The driver never waits on one actor: `ray.wait` returns whichever task finishes first
    (an explorer's chunk, a learner's updates, an evaluation), the driver books it and hands
    out new work, so every actor stays busy unless the replay ratio tells it to wait.

    | call / attribute   | meaning                                                    |
    | ------------------ | ---------------------------------------------------------- |
    | `step()`           | one iteration (`eval_every_s` of training plus one greedy  |
    |                    | evaluation), returns a progress row                        |
    | `state()`          | a checkpoint (learner state, counters, config)             |
    | `explorers`        | the Explorer actor handles (kill one to watch it restart)  |
    | `explorer_nodes`   | the Ray node id each explorer started on                   |
    | `explorer_returns` | per explorer: a list of (env_steps, episode return)        |
    | `close()`          | kill the actors (Ray itself keeps running)                 |
    """

    algo = "apex"

    def __init__(self, config: ApexConfig, restore: dict | None = None):
        cfg = self.cfg = config
        if cfg.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {cfg.num_workers}")
        env = make_env(cfg.env_id)
        require_discrete(env, "Ape-X")
        obs_dim, n_actions = env_dims(env)
        env.close()
        init_ray()
        cpus = actor_cpus(cfg, ray.cluster_resources().get("CPU", 1))
        gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
        spec = transition_spec((obs_dim,), n_step=True)
        prefix = f"apex-{uuid.uuid4().hex[:8]}"  # explorers find these two actors by name
        self.replay = ReplayActor.options(name=f"{prefix}-replay", num_cpus=cpus["replay"]).remote(
            cfg.buffer_size, spec, alpha=cfg.priority_alpha, seed=cfg.seed)
        self.params = ParameterServer.options(name=f"{prefix}-params").remote()
        self.learner = Learner.options(num_cpus=cpus["learner"], num_gpus=gpus).remote(
            cfg, obs_dim, n_actions, self.replay, self.params,
            restore["learner"] if restore else None)
        self.epsilons = [epsilon_for_explorer(i, cfg.num_workers, cfg.eps, cfg.eps_alpha)
                         for i in range(cfg.num_workers)]
        self.counters = {"iteration": 0, "env_steps": 0, "inserted": 0, "episodes": 0,
                         "learner_updates": 0, "time_s": 0.0, "explorer_restarts": 0}
        if restore is not None:
            self.counters.update(restore["counters"])
        restarted = self.counters["iteration"]    # new seeds after a resume
        self.explorers = [                        # SPREAD: across the nodes of a cluster
            Explorer.options(num_cpus=cpus["explorer"], scheduling_strategy="SPREAD").remote(
                i, cfg, eps, prefix, cfg.seed * 10_000 + 100 * restarted + i)
            for i, eps in enumerate(self.epsilons)]
        self.evaluator = Evaluator.options(num_cpus=cpus["evaluator"]).remote(
            cfg, obs_dim, n_actions, self.params)
        self.explorer_returns: list[list[tuple[int, float]]] = [[] for _ in self.explorers]
        # the process ids, to notice restarts (this also waits until every explorer is up)
        self.pids: list[int] = ray.get([explorer.pid.remote() for explorer in self.explorers])
        self.explorer_nodes = ray.get([explorer.node_id.remote() for explorer in self.explorers])
        self.resend_at = [0.0] * len(self.explorers)
        self.tasks: dict[ray.ObjectRef, tuple[str, int]] = {}  # in flight: (kind, explorer)
        self.updates_submitted = self.counters["learner_updates"]
        self.stored_now = 0                       # transitions stored since this start
        self.start = time.perf_counter() - self.counters["time_s"]

    # -- handing out work ---------------------------------------------------------------

    def _schedule(self) -> None:
        """Give the learner the updates the replay ratio allows; let explorers play unless
        the learner is behind."""
        cfg, c = self.cfg, self.counters
        ready = self.stored_now >= max(cfg.learning_starts, cfg.batch_size * cfg.sample_batches)
        due = updates_due(c["inserted"], cfg.replay_ratio, cfg.batch_size) if ready else 0
        # two learner tasks queued at most, so the learner never waits for the driver
        while self._running("learn") < 2 and self.updates_submitted < due:
            n = min(cfg.learner_chunk, due - self.updates_submitted)
            self.tasks[self.learner.train.remote(n)] = ("learn", 0)
            self.updates_submitted += n
        if due - c["learner_updates"] > cfg.max_lag_updates:
            return                                # the learner is behind: explorers wait
        now = time.perf_counter()
        for i, explorer in enumerate(self.explorers):
            if not self._running("explore", i) and now >= self.resend_at[i]:
                self.tasks[explorer.run.remote(cfg.explorer_chunk)] = ("explore", i)

    def _book(self, ref: ray.ObjectRef) -> dict | None:
        """Book a finished task; returns an evaluation's result."""
        kind, i = self.tasks.pop(ref)
        c = self.counters
        if kind == "explore":
            try:
                out = ray.get(ref)
            except ray.exceptions.RayActorError:    # Ray gave up on the call: send it again
                self.resend_at[i] = time.perf_counter() + 1.0   # soon, not in a busy loop
                return None
            if out["pid"] != self.pids[i]:
                c["explorer_restarts"] += 1         # a new process: Ray restarted it
            self.pids[i] = out["pid"]
            c["env_steps"] += out["env_steps"]
            c["inserted"] += out["sent"]
            self.stored_now += out["sent"]
            c["episodes"] += len(out["episode_returns"])
            self._new_returns += out["episode_returns"]
            self.explorer_returns[i] += [(c["env_steps"], r) for r in out["episode_returns"]]
        elif kind == "learn":
            out = ray.get(ref)
            c["learner_updates"] = out["updates"]
            self._losses.append(out["loss"])
        else:
            return ray.get(ref)
        return None

    # -- one iteration ------------------------------------------------------------------

    def step(self) -> dict[str, Any]:
        """Train for `eval_every_s` seconds with one greedy evaluation running alongside."""
        cfg, c = self.cfg, self.counters
        steps0, updates0 = c["env_steps"], c["learner_updates"]
        self._new_returns, self._losses = [], []
        evaluation, elapsed = self._train_for(cfg.eval_every_s, self.evaluator.evaluate.remote())
        c["iteration"] += 1
        c["time_s"] = time.perf_counter() - self.start
        return {
            "iteration": c["iteration"], "time_s": c["time_s"], "env_steps": c["env_steps"],
            "learner_updates": c["learner_updates"], "eval_return": evaluation["eval_return"],
            "train_return": mean_or_nan(self._new_returns), "episodes": c["episodes"],
            "loss": mean_or_nan(self._losses),
            "replay_ratio": c["learner_updates"] * cfg.batch_size / max(1, c["inserted"]),
            "replay_size": min(self.stored_now, cfg.buffer_size),
            "env_steps_per_s": (c["env_steps"] - steps0) / elapsed,
            "updates_per_s": (c["learner_updates"] - updates0) / elapsed,
            "explorer_restarts": c["explorer_restarts"],
        }

    # -- checkpoints and the end ---------------------------------------------------------

    def state(self) -> dict[str, Any]:
        self._losses = []                     # the losses of a drained chunk are not reported
        return super().state()

    def extras(self) -> dict[str, Any]:
        return {"explorer_returns": self.explorer_returns, "epsilons": self.epsilons,
                "explorer_nodes": self.explorer_nodes}

    def _actors(self) -> list:
        return [*self.explorers, self.evaluator, self.learner, self.replay, self.params]


def train_apex(config: ApexConfig, progress=None, run=None, restore: dict | str | None = None):
    """Train Ape-X until a stop criterion of `config` holds; a `results.TrainResult` (see
    `driver.train_with` for progress, run and restore). Starts Ray if it is not running."""
    return train_with(ApexTrainer, config, progress=progress, run=run, restore=restore)


#: what `python -m course_lib train --algo apex` runs (see `course_lib.cli`)
ALGORITHM = Algorithm(ApexConfig, train_apex, greedy_policy,
                      lambda env: require_discrete(env, "Ape-X"))
