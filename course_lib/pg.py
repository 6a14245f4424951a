"""Parallel policy gradient (REINFORCE with a baseline) on CartPole, on Ray core.

The four steps of the RLlib talk's example, each a plain function you can call on its own:

1. a policy network: observations -> logits of a categorical distribution over actions;
2. sample experiences: `sample_episodes` plays whole episodes with the current policy;
3. postprocess: `discounted_returns` (temporal discounting), then `advantages` (minus a baseline);
4. the loss: `policy_gradient_loss`, whose gradient is the policy gradient.

Parallelism: `EpisodeSampler` actors run steps 1-3 on their own cores; the driver (the learner)
runs step 4. `train_sync` waits for every worker each iteration; `train_async` updates on
whichever batch arrives first (`ray.wait`) and sends that worker fresh weights at once.

The policy gradient (Williams 1992) with a baseline b, estimated from a batch of episodes:

    grad J(theta) ~= mean over steps t of  grad log pi(a_t | s_t) * (G_t - b_t)
    G_t = r_t + gamma * r_{t+1} + gamma^2 * r_{t+2} + ...   (to the end of t's episode)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import ray
import torch
from torch import nn
from torch.distributions import Categorical

from course_lib.config import Config
from course_lib.nets import get_weights, mlp, set_weights
from course_lib.param_server import pull_weights


@dataclass
class PGConfig(Config):
    """Hyperparameters of parallel REINFORCE. Full mode: greedy CartPole-v1 return >= 450."""

    QUICK: ClassVar[dict] = {"max_iterations": 15, "eval_every": 5, "eval_episodes": 3}
    env_id: str = "CartPole-v1"       # a gymnasium env with a discrete action space
    num_workers: int = 2              # rollout actors, one CPU each
    steps_per_worker: int = 1000      # env steps each worker collects per batch (whole episodes)
    gamma: float = 0.99               # discount factor
    lr: float = 0.003                 # Adam learning rate
    hidden: tuple[int, ...] = (64, 64)  # hidden layer sizes of the policy network
    baseline: str = "time"            # "time": other episodes' mean return at t; "none": 0
    normalize: bool = True            # scale advantages to zero mean, unit std per batch
    max_iterations: int = 300         # policy updates before giving up
    target_return: float = 450.0      # stop once the greedy evaluation reaches this
    eval_every: int = 5               # evaluate the greedy policy every N updates
    eval_episodes: int = 10           # episodes per greedy evaluation
    seed: int = 0                     # seeds the network, the workers' envs and their actions


# ---------------------------------------------------------------------------------------------
# 1. The policy network
# ---------------------------------------------------------------------------------------------

class PolicyNet(nn.Module):
    """pi(a | s): an MLP from observations to the logits of a categorical distribution.

    | call              | input      | output                         |
    | ----------------- | ---------- | ------------------------------ |
    | `forward(obs)`    | (B, obs)   | logits (B, n_actions)          |
    | `act(obs, rng)`   | (obs,)     | int action, sampled from pi    |
    | `greedy(obs)`     | (obs,)     | int action, argmax of logits   |
    """

    def __init__(self, obs_dim: int, n_actions: int, hidden: tuple[int, ...] = (64, 64)):
        super().__init__()
        self.net = mlp([obs_dim, *hidden, n_actions])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)

    @torch.no_grad()
    def act(self, obs: np.ndarray, rng: np.random.Generator) -> int:
        logits = self(torch.as_tensor(obs, dtype=torch.float32))
        probs = torch.softmax(logits.double(), dim=-1).numpy()   # float64: sums to 1 exactly
        return int(rng.choice(len(probs), p=probs))

    @torch.no_grad()
    def greedy(self, obs: np.ndarray) -> int:
        return int(self(torch.as_tensor(obs, dtype=torch.float32)).argmax())


def make_policy(env: gym.Env, hidden: tuple[int, ...] = (64, 64)) -> PolicyNet:
    """A PolicyNet sized for `env`; refuses anything but a discrete action space."""
    if not isinstance(env.action_space, gym.spaces.Discrete):
        raise ValueError(f"policy gradient here needs a Discrete action space; "
                         f"{env.spec.id if env.spec else env} has {env.action_space}")
    return PolicyNet(env.observation_space.shape[0], int(env.action_space.n), hidden)


# ---------------------------------------------------------------------------------------------
# 2. Sampling experiences
# ---------------------------------------------------------------------------------------------

def sample_episodes(env: gym.Env, policy: PolicyNet, min_steps: int,
                    rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Play whole episodes with `policy` until at least `min_steps` steps are collected.

    Only whole episodes, so every step's return G_t is known exactly (no bootstrapping).
    Seed the env once before the first call (`env.reset(seed=...)`); later resets continue its
    random stream. A batch holds N steps from E episodes, laid end to end:

    | key        | shape        | dtype   | meaning                                        |
    | ---------- | ------------ | ------- | ---------------------------------------------- |
    | obs        | (N, obs_dim) | float32 | s_t                                            |
    | action     | (N,)         | int64   | a_t ~ pi(. | s_t)                              |
    | reward     | (N,)         | float32 | r_t                                            |
    | done       | (N,)         | bool    | True on the last step of each episode          |
    | ep_return  | (E,)         | float32 | undiscounted return of each episode            |
    | ep_length  | (E,)         | int64   | steps in each episode (they sum to N)          |

    An episode ends when it is terminated (the pole fell) or truncated (CartPole-v1 stops at
    500 steps). Both count as `done` here: REINFORCE only sums the rewards it saw.
    """
    obs_list, actions, rewards, dones, ep_returns, ep_lengths = [], [], [], [], [], []
    while len(rewards) < min_steps:
        obs, _ = env.reset()
        ep_return, ep_length, done = 0.0, 0, False
        while not done:
            action = policy.act(obs, rng)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            obs_list.append(obs)
            actions.append(action)
            rewards.append(reward)
            dones.append(done)
            ep_return += reward
            ep_length += 1
            obs = next_obs
        ep_returns.append(ep_return)
        ep_lengths.append(ep_length)
    return {
        "obs": np.asarray(obs_list, dtype=np.float32),
        "action": np.asarray(actions, dtype=np.int64),
        "reward": np.asarray(rewards, dtype=np.float32),
        "done": np.asarray(dones, dtype=bool),
        "ep_return": np.asarray(ep_returns, dtype=np.float32),
        "ep_length": np.asarray(ep_lengths, dtype=np.int64),
    }


def concat_batches(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One batch from several (each holds whole episodes, so they stack end to end)."""
    return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


# ---------------------------------------------------------------------------------------------
# 3. Postprocessing: discounted returns and advantages
# ---------------------------------------------------------------------------------------------

def discounted_returns(rewards: np.ndarray, dones: np.ndarray, gamma: float) -> np.ndarray:
    """Reward-to-go G_t = r_t + gamma * G_{t+1}, restarting at every episode end.

    Computed backwards: G_t = r_t + gamma * (1 - done_t) * G_{t+1}, so the `done` flag of an
    episode's last step stops the sum from leaking into the previous episode.

    >>> discounted_returns(np.array([1., 1., 1., 1.]), np.array([0, 1, 0, 1], bool), 0.5)
    array([1.5, 1. , 1.5, 1. ], dtype=float32)
    """
    returns = np.zeros(len(rewards), dtype=np.float32)
    future = 0.0
    for t in reversed(range(len(rewards))):
        future = rewards[t] + gamma * (1.0 - dones[t]) * future
        returns[t] = future
    return returns


def time_steps(dones: np.ndarray) -> np.ndarray:
    """Index of each step within its episode: [0, 1, 2, 0, 1, ...] (episodes end at `done`).

    >>> time_steps(np.array([0, 1, 0, 0, 1], bool))
    array([0, 1, 0, 1, 2])
    """
    steps = np.zeros(len(dones), dtype=np.int64)
    for i in range(1, len(dones)):
        steps[i] = 0 if dones[i - 1] else steps[i - 1] + 1
    return steps


def advantages(returns: np.ndarray, dones: np.ndarray, baseline: str = "time",
               normalize: bool = True) -> np.ndarray:
    """A_t = G_t - b_t: how much better than usual the return after step t turned out.

    Subtracting a baseline that does not depend on the action leaves the gradient's expected
    value unchanged and lowers its variance. Two choices:

    - `"time"`: b_t = mean of G_t over the *other* episodes of the batch that lasted at least
      t+1 steps (a leave-one-out mean), and 0 where no other episode reached step t. In
      CartPole the reward-to-go depends mostly on how many steps are left, so this simple
      per-time-step average removes most of the variance (no value network to train).
      Leaving the episode's own return out keeps the baseline independent of its actions:
      with it in, A_t would shrink by the factor (1 - 1/M_t) for M_t episodes at step t, and
      be exactly 0 at the steps only the longest episode reached.
    - `"none"`: b_t = 0.

    `normalize` then rescales A to zero mean and unit standard deviation over the batch (a
    constant baseline plus a step-size scale, which keeps the learning rate meaningful).

    >>> advantages(np.array([3., 2., 1., 1.]), np.array([0, 0, 1, 1], bool), normalize=False)
    array([ 2.,  2.,  1., -2.], dtype=float32)
    """
    adv = np.asarray(returns, dtype=np.float32).copy()
    if baseline == "time":
        t = time_steps(dones)
        sum_at_t, count_at_t = np.bincount(t, weights=adv), np.bincount(t)
        others_sum = sum_at_t[t] - adv          # leave this step's own return out ...
        others = count_at_t[t] - 1              # ... and its own episode from the count
        baseline_t = np.zeros(len(adv))         # b_t = 0 where no other episode reached t
        np.divide(others_sum, others, out=baseline_t, where=others > 0)
        adv -= baseline_t.astype(np.float32)
    elif baseline != "none":
        raise ValueError(f"baseline must be 'time' or 'none', got {baseline!r}")
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    return adv


# ---------------------------------------------------------------------------------------------
# 4. The loss
# ---------------------------------------------------------------------------------------------

def policy_gradient_loss(logits: torch.Tensor, actions: torch.Tensor,
                         advantages: torch.Tensor) -> torch.Tensor:
    """L(theta) = -mean_t [ log pi_theta(a_t | s_t) * A_t ]; its gradient is -grad J.

    | argument   | shape          |
    | ---------- | -------------- |
    | logits     | (N, n_actions) |
    | actions    | (N,) int64     |
    | advantages | (N,) (no grad) |

    Minimising L raises the log-probability of actions with A_t > 0 and lowers it for
    A_t < 0. The advantages are constants: only log pi carries a gradient.
    """
    log_prob = Categorical(logits=logits).log_prob(actions)
    return -(log_prob * advantages.detach()).mean()


def update_policy(policy: PolicyNet, optimizer: torch.optim.Optimizer,
                  batch: dict[str, np.ndarray], cfg: PGConfig) -> float:
    """One gradient step of REINFORCE on `batch` (which carries "ret" from the workers)."""
    # torch.tensor copies: arrays that come out of Ray's object store are read-only
    obs, actions = torch.tensor(batch["obs"]), torch.tensor(batch["action"])
    adv = torch.tensor(advantages(batch["ret"], batch["done"], cfg.baseline, cfg.normalize))
    loss = policy_gradient_loss(policy(obs), actions, adv)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def evaluate_greedy(policy: PolicyNet | dict[str, np.ndarray], env_id: str = "CartPole-v1",
                    episodes: int = 10, seed: int = 0,
                    hidden: tuple[int, ...] = (64, 64)) -> float:
    """Mean undiscounted return of the greedy policy (argmax action) over `episodes` episodes.

    `policy` is a PolicyNet or a weights dict from `get_weights` (then `hidden` must match).
    Episode i starts from `env.reset(seed=seed + i)`, so two calls see the same start states.
    """
    env = gym.make(env_id)
    if isinstance(policy, dict):
        weights, policy = policy, make_policy(env, hidden)
        set_weights(policy, weights)
    total = 0.0
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy.greedy(obs))
            total += reward
            done = terminated or truncated
    env.close()
    return total / episodes


# ---------------------------------------------------------------------------------------------
# The parallel part: rollout workers and the two training loops
# ---------------------------------------------------------------------------------------------

@ray.remote(num_cpus=1)
class EpisodeSampler:
    """An env plus a copy of the policy, in its own process: samples and postprocesses.

    The driver passes the weights as an ObjectRef made once with `ray.put`; Ray resolves it
    before the method runs, so `set_weights`/`sample` see the dict, and every worker reads the
    same object-store copy (zero-copy numpy): a broadcast to N workers is one serialisation.
    """

    def __init__(self, env_id: str, hidden: tuple[int, ...], gamma: float, seed: int):
        torch.set_num_threads(1)          # one core per worker; torch would grab them all
        torch.manual_seed(seed)
        self.env = gym.make(env_id)
        self.env.reset(seed=seed)
        self.rng = np.random.default_rng(seed)
        self.policy = make_policy(self.env, hidden)
        self.gamma = gamma
        self.version = -1                 # policy version pulled from a parameter server

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        set_weights(self.policy, weights)

    def sample(self, weights: dict[str, np.ndarray] | None, min_steps: int) -> dict:
        """Load `weights` (if given), play >= `min_steps` steps, add the returns "ret"."""
        if weights is not None:
            self.set_weights(weights)
        batch = sample_episodes(self.env, self.policy, min_steps, self.rng)
        batch["ret"] = discounted_returns(batch["reward"], batch["done"], self.gamma)
        return batch

    def sample_from_server(self, ps, min_steps: int) -> dict:
        """Like `sample`, but the worker fetches its own weights from the ParameterServer `ps`:
        before every episode (so, at the end of the previous one) it pulls "policy" and copies
        the weights only when the version changed. The batch adds "versions", the policy
        version each episode was played with."""
        episodes, versions, steps = [], [], 0
        while steps < min_steps:
            version, weights = pull_weights(ps, "policy", self.version)
            if weights is not None:
                self.version = version
                self.set_weights(weights)
            episodes.append(sample_episodes(self.env, self.policy, 1, self.rng))
            versions.append(self.version)
            steps += len(episodes[-1]["reward"])
        batch = concat_batches(episodes)
        batch["ret"] = discounted_returns(batch["reward"], batch["done"], self.gamma)
        batch["versions"] = np.asarray(versions)
        return batch


def make_policy_and_optimizer(cfg: PGConfig) -> tuple[PolicyNet, torch.optim.Optimizer]:
    """The driver's policy (the one that learns) and its optimiser, seeded from cfg.seed."""
    torch.manual_seed(cfg.seed)
    env = gym.make(cfg.env_id)
    policy = make_policy(env, cfg.hidden)
    env.close()
    return policy, torch.optim.Adam(policy.parameters(), lr=cfg.lr)


def make_workers(cfg: PGConfig, policy: PolicyNet) -> list:
    """`cfg.num_workers` EpisodeSampler actors (different seeds) holding `policy`'s weights.

    Returns once every worker is up, so training clocks do not count process start-up.
    Fails fast when Ray has fewer CPUs than workers, instead of waiting forever for actors
    that cannot be placed.
    """
    cpus = ray.cluster_resources().get("CPU", 0)
    if cfg.num_workers > cpus:
        raise ValueError(f"num_workers={cfg.num_workers} needs {cfg.num_workers} CPUs but the "
                         f"Ray cluster has {cpus:g}; lower num_workers or start Ray with more.")
    workers = [EpisodeSampler.remote(cfg.env_id, cfg.hidden, cfg.gamma, cfg.seed + 1000 * (i + 1))
               for i in range(cfg.num_workers)]
    weights_ref = ray.put(get_weights(policy))
    ray.get([w.set_weights.remote(weights_ref) for w in workers])
    return workers


@contextmanager
def rollout_workers(cfg: PGConfig, policy: PolicyNet):
    """`make_workers(cfg, policy)` for the length of a `with` block, killed at its end."""
    workers = make_workers(cfg, policy)
    try:
        yield workers
    finally:
        for w in workers:
            ray.kill(w)


def _record(history: list[dict], start: float, batch: dict, loss: float, policy: PolicyNet,
            cfg: PGConfig, progress: Callable[[dict], None] | None, **extra) -> bool:
    """Append the row of the update just made on `batch` (greedy eval every `cfg.eval_every`
    updates), with any `extra` columns, and hand it to `progress`. True once the greedy return
    reaches `cfg.target_return`: the caller stops."""
    iteration = len(history) + 1
    eval_return = float("nan")
    if iteration % cfg.eval_every == 0 or iteration == cfg.max_iterations:
        eval_return = evaluate_greedy(policy, cfg.env_id, cfg.eval_episodes, seed=10_000)
    row = {
        "iteration": iteration,
        "time_s": time.perf_counter() - start,
        "env_steps": (history[-1]["env_steps"] if history else 0) + len(batch["reward"]),
        "episodes": len(batch["ep_return"]),
        "mean_return": float(batch["ep_return"].mean()),
        "loss": loss,
        "eval_return": eval_return,     # NaN when this iteration was not evaluated
        **extra,
    }
    history.append(row)
    if progress:
        progress(row)
    return eval_return >= cfg.target_return


def train_sync(cfg: PGConfig, progress: Callable[[dict], None] | None = None
               ) -> tuple[PolicyNet, list[dict]]:
    """Synchronous parallel PG: broadcast weights, gather every worker's batch, one update.

    Each iteration: `ray.put` the weights once, every worker samples with them, the driver
    concatenates the batches and takes one gradient step. Stops when the greedy evaluation
    reaches `cfg.target_return` or after `cfg.max_iterations`. Needs Ray running.
    Returns the trained policy and the history (one dict per update; `progress` gets each).
    """
    policy, optimizer = make_policy_and_optimizer(cfg)
    history = []
    with rollout_workers(cfg, policy) as workers:
        start = time.perf_counter()
        for _ in range(cfg.max_iterations):
            weights_ref = ray.put(get_weights(policy))              # one copy for all workers
            batch = concat_batches(ray.get(
                [w.sample.remote(weights_ref, cfg.steps_per_worker) for w in workers]))
            loss = update_policy(policy, optimizer, batch, cfg)
            if _record(history, start, batch, loss, policy, cfg, progress):
                break
    return policy, history


def first_finished(in_flight: dict) -> tuple[Any, dict]:
    """The `sample` call that finishes first (`ray.wait`, not the order they were sent):
    (its worker, its batch). The call leaves `in_flight`."""
    [ready], _ = ray.wait(list(in_flight), num_returns=1)
    return in_flight.pop(ready), ray.get(ready)


def train_async(cfg: PGConfig, progress: Callable[[dict], None] | None = None
                ) -> tuple[PolicyNet, list[dict]]:
    """Asynchronous parallel PG: update on whichever batch is ready first.

    Every worker always has one `sample` call in flight. `ray.wait` returns the first batch
    to finish; the driver updates on it and gives that worker the new weights, while the
    other workers keep sampling with weights that are now one or more updates old (the price
    of never waiting: slightly off-policy gradients). One iteration = one update on one
    worker's batch. Same stopping rule, return value and `progress` as `train_sync`.
    """
    policy, optimizer = make_policy_and_optimizer(cfg)
    history = []
    with rollout_workers(cfg, policy) as workers:
        start = time.perf_counter()
        weights_ref = ray.put(get_weights(policy))
        in_flight = {w.sample.remote(weights_ref, cfg.steps_per_worker): w for w in workers}
        for _ in range(cfg.max_iterations):
            worker, batch = first_finished(in_flight)
            loss = update_policy(policy, optimizer, batch, cfg)
            weights_ref = ray.put(get_weights(policy))
            in_flight[worker.sample.remote(weights_ref, cfg.steps_per_worker)] = worker
            if _record(history, start, batch, loss, policy, cfg, progress):
                break
    return policy, history


# ---------------------------------------------------------------------------------------------
# Measuring: sampling throughput against the number of workers
# ---------------------------------------------------------------------------------------------

def measure_sampling_throughput(cfg: PGConfig, worker_counts: list[int],
                                steps_per_worker: int = 4000, rounds: int = 3) -> list[float]:
    """Env steps per second collected by 1, 2, ... workers sampling in parallel.

    Each count gets fresh workers and a short warm-up (start-up is not timed), then `rounds`
    timed rounds in which every worker samples `steps_per_worker` steps with the same
    broadcast weights; the median round counts (other programs on the machine add noise).
    """
    policy, _ = make_policy_and_optimizer(cfg)
    weights_ref = ray.put(get_weights(policy))
    rates = []
    for n in worker_counts:
        with rollout_workers(cfg.updated({"num_workers": n}), policy) as workers:
            ray.get([w.sample.remote(None, 10) for w in workers])          # warm up
            per_round = []
            for _ in range(rounds):
                start = time.perf_counter()
                batches = ray.get([w.sample.remote(weights_ref, steps_per_worker)
                                   for w in workers])
                steps = sum(len(b["reward"]) for b in batches)
                per_round.append(steps / (time.perf_counter() - start))
        rates.append(float(np.median(per_round)))
    return rates


# ---------------------------------------------------------------------------------------------
# The parameter server as RL uses it (notebook 03)
# ---------------------------------------------------------------------------------------------

def train_with_param_server(cfg: PGConfig, ps, progress: Callable[[dict], None] | None = None
                            ) -> tuple[PolicyNet, list[dict]]:
    """Asynchronous PG where the weights travel through a ParameterServer `ps`.

    The learner (this driver) pushes the policy after every update; workers pull it themselves
    at episode boundaries. Each history row adds "version" (the newest version on the server)
    and "policy_lag" (how many versions behind the batch's episodes were, on average).
    """
    policy, optimizer = make_policy_and_optimizer(cfg)
    version = ray.get(ps.push.remote("policy", get_weights(policy)))
    history = []
    with rollout_workers(cfg, policy) as workers:
        start = time.perf_counter()
        in_flight = {w.sample_from_server.remote(ps, cfg.steps_per_worker): w for w in workers}
        for _ in range(cfg.max_iterations):
            worker, batch = first_finished(in_flight)
            loss = update_policy(policy, optimizer, batch, cfg)
            version = ray.get(ps.push.remote("policy", get_weights(policy)))
            in_flight[worker.sample_from_server.remote(ps, cfg.steps_per_worker)] = worker
            lag = float(np.mean(version - 1 - batch["versions"]))
            if _record(history, start, batch, loss, policy, cfg, progress, version=version,
                       policy_lag=lag):
                break
    return policy, history
