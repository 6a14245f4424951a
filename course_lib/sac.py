"""Soft actor-critic (Haarnoja et al. 2018), split across Ray actors the way practitioners run it.

    rollout workers (N actors)      replay (1 actor)          learner (1 actor, GPU if any)
    env + own copy of the policy --> uniform buffer --sample--> SACLearner.update
    random actions first, then        batches of ~50            twin Q, Polyak targets,
    a ~ pi(.|s)                                                 automatic entropy tuning
          ^                                                            |
          +-- pull at episode end and every K steps <-- parameter server <-- push every N
                                                    tester (1 actor): deterministic episodes
                                                    with the newest weights, logged

The maths, one small function each (tests and notebook 06 call exactly these):

    a = tanh(u),  u = mu(s) + sigma(s) * eps,  eps ~ N(0, I)          `squashed_gaussian`
    log pi(a|s) = log N(u; mu, sigma) - sum_i log(1 - tanh(u_i)^2)
    y  = r + gamma * (1 - terminated) * (min_j Q'_j(s', a') - alpha * log pi(a'|s')),
         a' ~ pi(.|s')                                                 `q_target`
    L_Q  = mean (Q_1(s, a) - y)^2 + mean (Q_2(s, a) - y)^2             `critic_loss`
    L_pi = mean (alpha * log pi(a~|s) - min_j Q_j(s, a~)),  a~ ~ pi(.|s)   `actor_loss`
    L_alpha = -mean log(alpha) * (log pi(a~|s) + H_target),  H_target = -dim(A)  `alpha_loss`
    theta'  <- (1 - tau) * theta' + tau * theta                        `polyak_update`

A time-limit end (`truncated`) is NOT a terminal state: the target still bootstraps from s'.

The roles, each a Ray actor: `RolloutWorker`, `Learner` (wraps `SACLearner`, a plain class
that tests use without Ray), `Tester`; the replay actor is `replay.ReplayActor` (uniform) and
the parameter server `param_server.ParameterServer`. `SACTrainer` is the driver: it hands out
chunks of work and holds the update-to-data ratio (learner updates per env step) at
`utd_ratio`; `train_sac` runs it through the shared loop of `course_lib.results`.
"""

from __future__ import annotations

import copy
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import ray
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.config import Config
from course_lib.dqn import batch_to_tensors, default_device, device_of
from course_lib.driver import Driver, mean_or_nan, share_cpus, train_with
from course_lib.envs import check_finite, evaluate_policy, make_env
from course_lib.nets import get_weights, mlp, to_cpu
from course_lib.param_server import ParameterServer, get_result, pull_into
from course_lib.ray_setup import init_ray
from course_lib.replay import ReplayActor, stack_transitions, transition_spec
from course_lib.results import Algorithm


@dataclass
class SACConfig(Config):
    """Parallel SAC hyperparameters. Full mode: deterministic Pendulum-v1 return >= -200
    (mean of 10 episodes) within 20K env steps.

    Tuned for wall-clock time on a 2-core laptop, where the learner's updates are the
    bottleneck: small 64x64 networks (about 1.5x the updates per second of 128x128), a high
    learning rate and a fast target (tau 0.05) reach the goal in a median of 750 updates on
    Pendulum, against 2,500 with the textbook 128x128, lr 1e-3 and tau 0.005 (6 seeds each,
    single process, one update per env step: `python bench/sac_settings.py`)."""

    QUICK: ClassVar[dict] = {"max_env_steps": 1_500, "max_time_s": 60.0, "target_return": None,
                             "hidden": (64, 64), "start_steps": 400, "learning_starts": 400,
                             "eval_every_s": 2.0, "eval_episodes": 3}
    env_id: str = "Pendulum-v1"       # any gymnasium env with a 1-D Box action space
    num_workers: int = 2              # rollout worker actors
    # -- the learner --
    hidden: tuple[int, ...] = (64, 64)  # hidden layer sizes of the actor and both critics
    lr: float = 3e-3                  # Adam learning rate of the actor and the critics
    alpha_lr: float = 3e-3            # Adam learning rate of log(alpha)
    init_alpha: float = 1.0           # the entropy coefficient at the start
    gamma: float = 0.99               # discount factor
    tau: float = 0.05                 # Polyak averaging rate of the target critics
    batch_size: int = 256             # transitions per gradient step
    utd_ratio: float = 1.0            # update-to-data ratio: learner updates per env step
    # -- replay --
    buffer_size: int = 100_000        # replay capacity (FIFO, uniform sampling)
    learning_starts: int = 1_000      # transitions stored before the learner starts
    sample_batches: int = 4           # batches fetched per replay call (fewer round trips)
    # -- rollout workers --
    start_steps: int = 1_000          # env steps (all workers together) of uniform random actions
    send_every: int = 50              # transitions per batch a worker sends to the replay actor
    pull_every: int = 100             # K: a worker pulls weights at least every K env steps
    publish_every: int = 50           # N: the learner pushes weights every N updates
    # -- the driver --
    worker_chunk: int = 100           # env steps per rollout-worker task
    learner_chunk: int = 50           # updates per learner task
    max_lag_updates: int = 100        # workers pause while the learner is this far behind
    eval_every_s: float = 1.0         # seconds per iteration: one test, one progress row
    eval_episodes: int = 10           # deterministic episodes per test
    # -- Ray resources (logical CPUs; the workers share what the others leave) --
    learner_cpus: float = 1.0         # the learner actor (plus one GPU if the cluster has one)
    worker_cpus: float = 0.4          # each rollout worker, at most
    # -- stopping --
    target_return: float | None = -200.0  # stop: deterministic mean return reached (None: no goal)
    max_env_steps: int | None = 30_000    # stop: env step budget (None: unlimited)
    max_time_s: float | None = 600.0  # stop: wall-clock budget in seconds (None: unlimited)
    seed: int = 0                     # seeds the networks, the envs and the random actions


# ---------------------------------------------------------------------------------------------
# 1. The policy: a tanh-squashed Gaussian
# ---------------------------------------------------------------------------------------------

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def squashed_gaussian(mean: torch.Tensor, log_std: torch.Tensor,
                      deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """A sample a = tanh(u), u ~ N(mean, exp(log_std)^2), and its log-density log pi(a).

    | argument / result | shape      | meaning                                          |
    | ----------------- | ---------- | ------------------------------------------------ |
    | mean, log_std     | (B, A)     | the Gaussian before squashing                    |
    | action            | (B, A)     | tanh(u), in (-1, 1); deterministic: tanh(mean)   |
    | log_prob          | (B,)       | log pi(a), summed over the A action dimensions   |

    Change of variables: a = tanh(u) has density N(u) / |da/du| with da/du = 1 - tanh(u)^2, so

        log pi(a) = sum_i [ log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2) ]

    and log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), which stays finite when tanh(u)
    rounds to +-1 (the naive form gives log 0 = -inf there). The sample is reparameterised
    (u = mean + std * eps), so gradients flow into mean and log_std.
    """
    std = log_std.exp()
    u = mean if deterministic else mean + std * torch.randn_like(mean)
    log_normal = -0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
    log_jacobian = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))
    return torch.tanh(u), (log_normal - log_jacobian).sum(dim=-1)


class SquashedGaussianActor(nn.Module):
    """pi(.|s): an MLP trunk, then a mean head and a log-std head (clamped to [-20, 2]).

    | call                          | input         | output                            |
    | ----------------------------- | ------------- | --------------------------------- |
    | `forward(obs, deterministic)` | (B, obs_dim)  | action (B, A) in (-1, 1), log_prob (B,) |
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...] = (128, 128)):
        super().__init__()
        self.trunk = nn.Sequential(mlp([obs_dim, *hidden], nn.ReLU), nn.ReLU())
        self.mean = nn.Linear(hidden[-1], act_dim)
        self.log_std = nn.Linear(hidden[-1], act_dim)

    def forward(self, obs: torch.Tensor, deterministic: bool = False):
        h = self.trunk(obs)
        log_std = self.log_std(h).clamp(LOG_STD_MIN, LOG_STD_MAX)
        return squashed_gaussian(self.mean(h), log_std, deterministic)

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Actions in (-1, 1) for a batch of observations (B, obs_dim), as numpy."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=device_of(self))
        return self(obs_t, deterministic)[0].cpu().numpy()


class TwinQ(nn.Module):
    """Two independent critics Q_1, Q_2 of (s, a); the min of the two curbs overestimation.

    `forward(obs (B, obs_dim), action (B, A))` -> (q1 (B,), q2 (B,)).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...] = (128, 128)):
        super().__init__()
        self.q1 = mlp([obs_dim + act_dim, *hidden, 1], nn.ReLU)
        self.q2 = mlp([obs_dim + act_dim, *hidden, 1], nn.ReLU)

    def forward(self, obs: torch.Tensor, action: torch.Tensor):
        x = torch.cat([obs, action], dim=-1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


def scale_action(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Map an action in [-1, 1] (what the policy outputs and replay stores) to [low, high]."""
    return low + (np.asarray(action) + 1.0) * 0.5 * (high - low)


# ---------------------------------------------------------------------------------------------
# 2. The losses
# ---------------------------------------------------------------------------------------------

def q_target(reward: torch.Tensor, terminated: torch.Tensor, next_q1: torch.Tensor,
             next_q2: torch.Tensor, next_log_prob: torch.Tensor, alpha: float | torch.Tensor,
             gamma: float) -> torch.Tensor:
    """The soft Bellman backup, all shapes (B,):

        y = r + gamma * (1 - terminated) * (min(Q'_1, Q'_2)(s', a') - alpha * log pi(a'|s'))

    with a' sampled from the current policy at s'. Only a true end (terminated) stops the
    bootstrap; a time-limit end (truncated) is not stored as terminated, so it bootstraps.
    """
    soft_value = torch.min(next_q1, next_q2) - alpha * next_log_prob
    return reward + gamma * (1.0 - terminated.float()) * soft_value


def critic_loss(q1: torch.Tensor, q2: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """L_Q = mean (Q_1(s, a) - y)^2 + mean (Q_2(s, a) - y)^2; y carries no gradient."""
    y = y.detach()
    return F.mse_loss(q1, y) + F.mse_loss(q2, y)


def actor_loss(log_prob: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor,
               alpha: float | torch.Tensor) -> torch.Tensor:
    """L_pi = mean (alpha * log pi(a~|s) - min(Q_1, Q_2)(s, a~)), a~ a reparameterised sample:
    high Q and high entropy (low log pi) are both rewarded, traded off by alpha."""
    return (alpha * log_prob - torch.min(q1, q2)).mean()


def alpha_loss(log_alpha: torch.Tensor, log_prob: torch.Tensor,
               target_entropy: float) -> torch.Tensor:
    """L_alpha = -mean log(alpha) * (log pi(a~|s) + H_target), log pi detached.

    Its gradient in log(alpha) is -(H_target - H), H = -mean log pi the policy's entropy:
    gradient descent raises alpha while the entropy is below the target (explore more) and
    lowers it while the entropy is above (exploit more).
    """
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()


@torch.no_grad()
def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """theta' <- (1 - tau) * theta' + tau * theta for every parameter, in place."""
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.lerp_(s, tau)


# ---------------------------------------------------------------------------------------------
# 3. One learner update
# ---------------------------------------------------------------------------------------------

class SACLearner:
    """The actor, twin critics and their Polyak targets, log(alpha), and one update.

    | call                 | returns                                                     |
    | -------------------- | ----------------------------------------------------------- |
    | `update(batch)`      | {"critic_loss", "actor_loss", "alpha", "entropy", "q_mean"} |
    | `get_weights()`      | the actor as {name: numpy array} (what workers act with)    |
    | `state_dict()`       | networks, optimisers, log(alpha), update count (checkpoint) |

    `batch` holds obs (B, obs_dim), action (B, A) in [-1, 1], reward (B,), next_obs,
    terminated (B,). The device is the first GPU if one is visible, else the CPU.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...] = (128, 128),
                 lr: float = 1e-3, alpha_lr: float = 1e-3, init_alpha: float = 1.0,
                 gamma: float = 0.99, tau: float = 0.005,
                 device: torch.device | str | None = None):
        self.device = torch.device(device) if device is not None else default_device()
        self.actor = SquashedGaussianActor(obs_dim, act_dim, hidden).to(self.device)
        self.critic = TwinQ(obs_dim, act_dim, hidden).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(init_alpha), device=self.device,
                                      requires_grad=True)
        self.target_entropy = -float(act_dim)       # the usual heuristic: -dim(A)
        fused = self.device.type in ("cpu", "cuda")   # one kernel for all parameters
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr, fused=fused)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr, fused=fused)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=alpha_lr)
        self.gamma, self.tau = gamma, tau
        self.updates = 0

    @property
    def alpha(self) -> float:
        return self.log_alpha.exp().item()

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        t = batch_to_tensors(batch, self.device)
        obs, action = t["obs"], t["action"]
        alpha = self.log_alpha.exp().detach()
        # -- critics: regress both Q's on the soft Bellman target -----------------------------
        with torch.no_grad():
            next_action, next_log_prob = self.actor(t["next_obs"])
            y = q_target(t["reward"], t["terminated"], *self.critic_target(t["next_obs"],
                                                                            next_action),
                         next_log_prob, alpha, self.gamma)
        q1, q2 = self.critic(obs, action)
        loss_q = critic_loss(q1, q2, y)
        self.critic_opt.zero_grad()
        loss_q.backward()
        self.critic_opt.step()
        # -- actor: the critics are frozen, only the policy moves --------------------------------
        self.critic.requires_grad_(False)
        new_action, log_prob = self.actor(obs)
        loss_pi = actor_loss(log_prob, *self.critic(obs, new_action), alpha)
        self.actor_opt.zero_grad()
        loss_pi.backward()
        self.actor_opt.step()
        self.critic.requires_grad_(True)
        # -- temperature: move alpha so the entropy approaches its target ----------------------
        loss_alpha = alpha_loss(self.log_alpha, log_prob, self.target_entropy)
        self.alpha_opt.zero_grad()
        loss_alpha.backward()
        self.alpha_opt.step()
        # -- targets: a slow Polyak average of the critics ------------------------------------
        polyak_update(self.critic_target, self.critic, self.tau)
        self.updates += 1
        return {"critic_loss": loss_q.item(), "actor_loss": loss_pi.item(),
                "alpha": alpha.item(), "entropy": -log_prob.mean().item(),
                "q_mean": q1.mean().item()}

    def get_weights(self) -> dict[str, np.ndarray]:
        return get_weights(self.actor)

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimisers, log(alpha) and the update count, on the CPU."""
        return to_cpu({"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                        "critic_target": self.critic_target.state_dict(),
                        "log_alpha": self.log_alpha.detach(),
                        "actor_opt": self.actor_opt.state_dict(),
                        "critic_opt": self.critic_opt.state_dict(),
                        "alpha_opt": self.alpha_opt.state_dict(), "updates": self.updates})

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        self.alpha_opt.load_state_dict(state["alpha_opt"])
        self.updates = int(state["updates"])


def make_learner(cfg: SACConfig, obs_dim: int, act_dim: int, device=None) -> SACLearner:
    return SACLearner(obs_dim, act_dim, tuple(cfg.hidden), cfg.lr, cfg.alpha_lr, cfg.init_alpha,
                      cfg.gamma, cfg.tau, device)


def updates_due(inserted: int, utd_ratio: float, learning_starts: int) -> int:
    """Learner updates owed after `inserted` transitions: utd_ratio per transition past
    `learning_starts` (SB3's train_freq=1, gradient_steps=1 is utd_ratio 1)."""
    return int(utd_ratio * max(0, inserted - learning_starts))


# ---------------------------------------------------------------------------------------------
# 4. Environments: continuous actions only
# ---------------------------------------------------------------------------------------------

def require_continuous(env: gym.Env) -> None:
    """Refuse an env SAC cannot drive (ValueError, one line): actions must be a 1-D Box with
    finite bounds, and the first observations must be finite."""
    env_id = env.spec.id if env.spec else str(env)
    space = env.action_space
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"{env_id} has a {type(space).__name__} action space; SAC needs "
                         "continuous (Box) actions (use --algo apex for discrete actions)")
    if len(space.shape) != 1:
        raise ValueError(f"{env_id} has actions of shape {space.shape}; SAC here needs a 1-D "
                         "Box action space")
    if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
        raise ValueError(f"{env_id} has unbounded actions (low {space.low}, high "
                         f"{space.high}); SAC squashes actions into finite bounds")
    obs, _ = env.reset(seed=0)
    check_finite(obs, "observation", env_id, 0)


def env_dims(env: gym.Env) -> tuple[int, int]:
    """(obs_dim, act_dim) of a flat-observation, Box-action env."""
    return int(np.prod(env.observation_space.shape)), int(np.prod(env.action_space.shape))


# ---------------------------------------------------------------------------------------------
# 5. The actors: rollout workers, learner, tester
# ---------------------------------------------------------------------------------------------

WEIGHTS = "policy"   # the name the learner publishes the actor's weights under


@ray.remote
class RolloutWorker:
    """One env and a copy of the policy; plays and feeds the replay actor.

    `run(num_steps)` plays that many env steps and returns
    {"env_steps", "sent" (transitions stored), "episode_returns"}. The first `random_steps`
    steps of this worker take uniform random actions (the replay fills with broad data before
    the policy means anything); after that a ~ pi(.|s), sampled, not the mean. Weights are
    pulled at every episode end and at least every `pull_every` steps.
    """

    def __init__(self, cfg: SACConfig, replay, params, seed: int, random_steps: int):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.cfg, self.replay, self.params = cfg, replay, params
        self.rng = np.random.default_rng(seed)
        self.env = make_env(cfg.env_id)
        self.low, self.high = self.env.action_space.low, self.env.action_space.high
        obs_dim, self.act_dim = env_dims(self.env)
        self.actor = SquashedGaussianActor(obs_dim, self.act_dim, tuple(cfg.hidden))
        self.random_steps, self.steps = random_steps, 0
        self.obs, _ = self.env.reset(seed=seed)
        self.episode_return, self.outbox = 0.0, []
        self.version, self.since_pull = pull_into(params, WEIGHTS, self.actor), 0

    def run(self, num_steps: int) -> dict[str, Any]:
        cfg, env_id = self.cfg, self.cfg.env_id
        returns, sent = [], 0
        for _ in range(num_steps):
            if self.steps < self.random_steps:
                action = self.rng.uniform(-1.0, 1.0, self.act_dim).astype(np.float32)
            else:
                action = self.actor.act(self.obs[None])[0]
            check_finite(action, "action", env_id, self.steps)
            next_obs, reward, terminated, truncated, _ = self.env.step(
                scale_action(action, self.low, self.high))
            check_finite(next_obs, "observation", env_id, self.steps)
            check_finite(reward, "reward", env_id, self.steps)
            # a time-limit end is not terminal: only `terminated` is stored
            self.outbox.append({"obs": self.obs, "action": action, "reward": reward,
                                "next_obs": next_obs, "terminated": terminated})
            self.episode_return += float(reward)
            self.obs = next_obs                   # carry the next observation over
            self.steps += 1
            self.since_pull += 1
            if terminated or truncated:
                returns.append(self.episode_return)
                self.obs, _ = self.env.reset()
                self.episode_return = 0.0
            if len(self.outbox) >= cfg.send_every:
                sent += self.send()
            if terminated or truncated or self.since_pull >= cfg.pull_every:
                self.version = pull_into(self.params, WEIGHTS, self.actor, self.version)
                self.since_pull = 0
        if self.outbox:
            sent += self.send()
        return {"env_steps": num_steps, "sent": sent, "episode_returns": returns}

    def send(self) -> int:
        """The outbox to the replay actor; waits, so what run() reports is really stored."""
        n = len(self.outbox)
        get_result(self.replay.add.remote(stack_transitions(self.outbox)))
        self.outbox = []
        return n


@ray.remote
class Learner:
    """A SACLearner fed by the replay actor; pushes the actor's weights every N updates.

    Ask Ray for a GPU (`Learner.options(num_gpus=1)`) and the SACLearner finds it through
    `torch.cuda.is_available()`; without one it trains on the CPU. One sample request stays in
    flight: the replay actor draws the next `sample_batches` batches while this one trains.
    """

    def __init__(self, cfg: SACConfig, obs_dim: int, act_dim: int, replay, params,
                 state: dict | None = None):
        torch.set_num_threads(1)
        torch.manual_seed(cfg.seed)
        self.cfg, self.replay, self.params = cfg, replay, params
        self.learner = make_learner(cfg, obs_dim, act_dim)
        if state is not None:
            self.learner.load_state_dict(state)
        self.pending, self.batches = None, []
        self.publish()

    def publish(self) -> None:
        """The actor's weights to the parameter server (not awaited)."""
        self.params.push.remote(WEIGHTS, self.learner.get_weights())

    def next_batch(self) -> dict[str, np.ndarray]:
        cfg = self.cfg
        if not self.batches:
            request = (cfg.batch_size * cfg.sample_batches,)
            if self.pending is None:
                self.pending = self.replay.sample.remote(*request)
            big = ray.get(self.pending)
            self.pending = self.replay.sample.remote(*request)      # prefetch the next group
            self.batches = [{name: array[i::cfg.sample_batches] for name, array in big.items()}
                            for i in range(cfg.sample_batches)]
        return self.batches.pop()

    def train(self, num_updates: int) -> dict[str, Any]:
        infos = []
        for _ in range(num_updates):
            infos.append(self.learner.update(self.next_batch()))
            if self.learner.updates % self.cfg.publish_every == 0:
                self.publish()
        out = {key: float(np.mean([i[key] for i in infos])) for key in infos[0]}
        return {**out, "updates": self.learner.updates, "device": str(self.learner.device)}

    def state_dict(self) -> dict[str, Any]:
        return self.learner.state_dict()

    def get_weights(self) -> dict[str, np.ndarray]:
        return self.learner.get_weights()


def deterministic_returns(actor: SquashedGaussianActor, env_id: str, episodes: int = 10,
                          seed: int = 10_000) -> np.ndarray:
    """Returns (episodes,) of the deterministic policy a = tanh(mean(s)), scaled to the env."""
    space = make_env(env_id).action_space

    def act(obs: np.ndarray) -> np.ndarray:
        return scale_action(actor.act(obs, deterministic=True), space.low, space.high)

    return evaluate_policy(act, env_id, episodes, seed)


@ray.remote
class Tester:
    """Scores the newest published weights deterministically and keeps a log of the results.

    `evaluate(env_steps)` -> {"eval_return", "version"}; `log()` -> every result so far, each
    with the env steps the driver had counted when it asked.
    """

    def __init__(self, cfg: SACConfig, obs_dim: int, act_dim: int, params):
        torch.set_num_threads(1)
        self.cfg, self.params = cfg, params
        self.actor = SquashedGaussianActor(obs_dim, act_dim, tuple(cfg.hidden))
        self.version, self.results = -1, []

    def evaluate(self, env_steps: int) -> dict[str, Any]:
        self.version = pull_into(self.params, WEIGHTS, self.actor, self.version)
        returns = deterministic_returns(self.actor, self.cfg.env_id, self.cfg.eval_episodes)
        result = {"env_steps": env_steps, "version": self.version,
                  "eval_return": float(returns.mean()), "eval_std": float(returns.std())}
        self.results.append(result)
        return result

    def log(self) -> list[dict]:
        return self.results


# ---------------------------------------------------------------------------------------------
# 6. The driver
# ---------------------------------------------------------------------------------------------

def actor_resources(cfg: SACConfig, cluster: dict) -> dict[str, float]:
    """Logical CPUs per actor (and the learner's GPU) so that everything fits the cluster.

    The learner gets `learner_cpus` and one GPU when the cluster has one; the replay actor and
    the tester 0.1 CPU each; the workers share what is left (at most `worker_cpus` each); the
    parameter server takes none. Logical CPUs only decide placement: the operating system
    shares the real cores between all actors.
    """
    small, worker = share_cpus(cluster.get("CPU", 1), cfg.learner_cpus, cfg.num_workers,
                               cfg.worker_cpus)
    return {"learner": cfg.learner_cpus, "learner_gpus": 1 if cluster.get("GPU", 0) >= 1 else 0,
            "replay": small, "tester": small, "worker": worker}


class SACTrainer(Driver):
    """The parallel-SAC driver: starts the actors, hands out work, one row per iteration
    (the loop itself is `driver.Driver`'s).

    Work goes out in chunks (a worker: `worker_chunk` env steps; the learner: `learner_chunk`
    updates) and `ray.wait` takes whichever finishes first. The learner is given exactly the
    updates the update-to-data ratio allows (`updates_due`), and the workers pause while it
    is more than `max_lag_updates` behind: on a small machine the workers would otherwise
    outrun the learner and the run would use more env steps than the ratio says.

    | call / attribute   | meaning                                                    |
    | ------------------ | ---------------------------------------------------------- |
    | `step()`           | `eval_every_s` of training with one test alongside; a row  |
    | `state()`          | a checkpoint (learner state, counters, config)             |
    | `worker_returns`   | per worker: a list of (env_steps, episode return)          |
    | `close()`          | kill the actors (Ray itself keeps running)                 |

    `SACTrainer(cfg, restore=checkpoint)` continues: networks, optimisers, alpha and counters;
    the replay buffer refills (the policy acts from the start: no random steps again).
    """

    algo = "sac"

    def __init__(self, config: SACConfig, restore: dict | None = None):
        cfg = self.cfg = config
        if cfg.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {cfg.num_workers}")
        env = make_env(cfg.env_id)
        require_continuous(env)
        obs_dim, act_dim = env_dims(env)
        env.close()
        init_ray()
        res = self.resources = actor_resources(cfg, ray.cluster_resources())
        spec = transition_spec((obs_dim,), action_shape=(act_dim,), action_dtype=np.float32)
        prefix = f"sac-{uuid.uuid4().hex[:8]}"
        self.replay = ReplayActor.options(name=f"{prefix}-replay", num_cpus=res["replay"]).remote(
            cfg.buffer_size, spec, seed=cfg.seed, prioritized=False)
        self.params = ParameterServer.options(name=f"{prefix}-params").remote()
        self.learner = Learner.options(num_cpus=res["learner"],
                                       num_gpus=res["learner_gpus"]).remote(
            cfg, obs_dim, act_dim, self.replay, self.params,
            restore["learner"] if restore else None)
        self.counters = {"iteration": 0, "env_steps": 0, "inserted": 0, "episodes": 0,
                         "learner_updates": 0, "time_s": 0.0}
        if restore is not None:
            self.counters.update(restore["counters"])
        restarted = self.counters["iteration"]    # new seeds after a resume
        random_steps = 0 if restore else math.ceil(cfg.start_steps / cfg.num_workers)
        self.workers = [RolloutWorker.options(num_cpus=res["worker"]).remote(
            cfg, self.replay, self.params, cfg.seed * 10_000 + 100 * restarted + i, random_steps)
            for i in range(cfg.num_workers)]
        self.tester = Tester.options(num_cpus=res["tester"]).remote(
            cfg, obs_dim, act_dim, self.params)
        self.worker_returns: list[list[tuple[int, float]]] = [[] for _ in self.workers]
        self.tasks: dict[ray.ObjectRef, tuple[str, int]] = {}   # in flight: (role, worker)
        self.updates_submitted = self.counters["learner_updates"]
        self.stored_now = 0                       # transitions stored since this start
        self.device = "?"
        self.start = time.perf_counter() - self.counters["time_s"]

    # -- handing out work ---------------------------------------------------------------

    def _schedule(self) -> None:
        cfg, c = self.cfg, self.counters
        ready = self.stored_now >= max(cfg.learning_starts, cfg.batch_size * cfg.sample_batches)
        due = updates_due(c["inserted"], cfg.utd_ratio, cfg.learning_starts) if ready else 0
        while self._running("learn") < 2 and self.updates_submitted < due:
            n = min(cfg.learner_chunk, due - self.updates_submitted)
            self.tasks[self.learner.train.remote(n)] = ("learn", 0)
            self.updates_submitted += n
        if due - c["learner_updates"] > cfg.max_lag_updates:
            return                                # the learner is behind: the workers wait
        for i, worker in enumerate(self.workers):
            if not self._running("rollout", i):
                self.tasks[worker.run.remote(cfg.worker_chunk)] = ("rollout", i)

    def _book(self, ref: ray.ObjectRef) -> dict | None:
        """Record a finished task; returns a test's result. A worker's error (a non-finite
        observation, say) reaches the caller as itself, with its one-line message."""
        role, i = self.tasks.pop(ref)
        out, c = get_result(ref), self.counters
        if role == "rollout":
            c["env_steps"] += out["env_steps"]
            c["inserted"] += out["sent"]
            self.stored_now += out["sent"]
            c["episodes"] += len(out["episode_returns"])
            self._returns += out["episode_returns"]
            self.worker_returns[i] += [(c["env_steps"], r) for r in out["episode_returns"]]
        elif role == "learn":
            c["learner_updates"] = out.pop("updates")
            self.device = out.pop("device")
            self._learn_infos.append(out)
        else:
            return out                            # the tester's result
        return None

    # -- one iteration ------------------------------------------------------------------

    def step(self) -> dict[str, Any]:
        """Train for `eval_every_s` seconds while the tester scores the newest weights."""
        cfg, c = self.cfg, self.counters
        steps0, updates0 = c["env_steps"], c["learner_updates"]
        self._returns, self._learn_infos = [], []
        test, elapsed = self._train_for(cfg.eval_every_s,
                                        self.tester.evaluate.remote(c["env_steps"]))
        c["iteration"] += 1
        c["time_s"] = time.perf_counter() - self.start
        learn = {key: mean_or_nan([i[key] for i in self._learn_infos])
                 for key in ("critic_loss", "actor_loss", "alpha", "entropy", "q_mean")}
        return {
            "iteration": c["iteration"], "time_s": c["time_s"], "env_steps": c["env_steps"],
            "learner_updates": c["learner_updates"], "eval_return": test["eval_return"],
            "train_return": mean_or_nan(self._returns), "episodes": c["episodes"], **learn,
            "utd": c["learner_updates"] / max(1, c["inserted"] - cfg.learning_starts),
            "replay_size": min(self.stored_now, cfg.buffer_size),
            "env_steps_per_s": (c["env_steps"] - steps0) / elapsed,
            "updates_per_s": (c["learner_updates"] - updates0) / elapsed,
            "tested_version": test["version"], "tested_at_steps": test["env_steps"],
        }

    # -- checkpoints and the end ---------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """A checkpoint; first waits for the learner's queued updates (state = counters)."""
        self._learn_infos = []                # the losses of a drained chunk are not reported
        return super().state()

    def extras(self) -> dict[str, Any]:
        return {"worker_returns": self.worker_returns, "tester_log":
                ray.get(self.tester.log.remote()), "learner_device": self.device,
                "resources": self.resources}

    def _actors(self) -> list:
        return [*self.workers, self.tester, self.learner, self.replay, self.params]


def train_sac(config: SACConfig, progress=None, run=None, restore: dict | str | None = None):
    """Train parallel SAC until a stop criterion of `config` holds; a `results.TrainResult`
    (see `driver.train_with` for progress, run and restore). Starts Ray if it is not running."""
    return train_with(SACTrainer, config, progress=progress, run=run, restore=restore)


def deterministic_policy(checkpoint: dict):
    """act(obs) -> the env-scaled action tanh(mean(s)), from a SAC checkpoint (for
    `course_lib evaluate`)."""
    cfg = checkpoint["config"]
    env = make_env(checkpoint["env_id"])
    obs_dim, act_dim = env_dims(env)
    low, high = env.action_space.low, env.action_space.high
    env.close()
    actor = SquashedGaussianActor(obs_dim, act_dim, tuple(cfg["hidden"]))
    actor.load_state_dict(checkpoint["learner"]["actor"])
    actor.eval()

    def act(obs: np.ndarray) -> np.ndarray:
        return scale_action(actor.act(np.asarray(obs)[None], deterministic=True)[0], low, high)

    return act


#: what `python -m course_lib train --algo sac` runs (see `course_lib.cli`)
ALGORITHM = Algorithm(SACConfig, train_sac, deterministic_policy, require_continuous)
