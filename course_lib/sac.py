"""Soft actor-critic (Haarnoja et al. 2018), split across Ray actors the way practitioners run it.

    rollout workers (N actors)      replay (1 actor)          learner (1 actor, GPU if any)
    env + own copy of the policy --> uniform buffer --sample--> SACLearner.update
    random actions first, then        batches of ~50            twin Q, Polyak targets,
    a ~ pi(.|s)                                                 automatic entropy tuning
          ^                                                            |
          +-- pull at episode end and every K steps <-- parameter server <-- push every N
                                 evaluator (1 actor): deterministic episodes of a snapshot

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

The roles, each a Ray actor, fill in the shared bases of `course_lib.roles`: `RolloutWorker`
and `Learner` (wraps `SACLearner`, a plain class that tests use without Ray); the evaluator,
the replay actor (uniform here) and the parameter server are the shared ones. `SACTrainer` is
the driver (`course_lib.distributed`): it hands out chunks of work and holds the
update-to-data ratio (learner updates per env step) at `utd_ratio`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import ray
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.distributed import DistributedConfig, DistributedTrainer
from course_lib.dqn import batch_to_tensors, default_device, device_of
from course_lib.envs import check_finite, env_dims, evaluate_policy, make_env
from course_lib.nets import adam, get_weights, mlp, to_cpu
from course_lib.replay import transition_spec
from course_lib.results import Algorithm
from course_lib.roles import LearnerActor, Worker
from course_lib.trainer import train_with


@dataclass
class SACConfig(DistributedConfig):
    """Parallel SAC hyperparameters. Full mode: deterministic Pendulum-v1 return >= -200
    (mean of 10 episodes, confirmed on 20 more) within 20K env steps.

    Tuned for wall-clock time on a 2-core laptop, where the learner's updates are the
    bottleneck: small 64x64 networks (about 1.5x the updates per second of 128x128), a high
    learning rate and a fast target (tau 0.05) reach the goal in a median of 750 updates on
    Pendulum, against 2,500 with the textbook 128x128, lr 1e-3 and tau 0.005 (6 seeds each,
    single process, one update per env step: `python bench/sac_settings.py`)."""

    QUICK: ClassVar[dict] = {"max_env_steps": 1_500, "max_time_s": 60.0, "target_return": None,
                             "hidden": (64, 64), "start_steps": 400, "learning_starts": 400,
                             "eval_every_s": 2.0, "eval_episodes": 3}
    env_id: str = "Pendulum-v1"       # any gymnasium env with a 1-D Box action space
    hidden: tuple[int, ...] = (64, 64)  # hidden layer sizes of the actor and both critics
    lr: float = 3e-3                  # Adam learning rate of the actor and the critics
    alpha_lr: float = 3e-3            # Adam learning rate of log(alpha)
    init_alpha: float = 1.0           # the entropy coefficient at the start
    tau: float = 0.05                 # Polyak averaging rate of the target critics
    batch_size: int = 256             # transitions per gradient step
    utd_ratio: float = 1.0            # update-to-data ratio: learner updates per env step
    start_steps: int = 1_000          # env steps (all workers together) of uniform random actions
    pull_every: int = 100             # a worker pulls weights at least every K env steps
    publish_every: int = 50           # the learner pushes weights every N updates
    worker_chunk: int = 100           # env steps per rollout-worker task
    eval_every_s: float = 1.0         # seconds per iteration: one evaluation, one row
    learner_cpus: float = 1.0         # the learner actor (plus one GPU if the cluster has one)
    worker_cpus: float = 0.4          # each rollout worker, at most
    target_return: float | None = -200.0  # stop: deterministic mean return reached (None: no goal)
    max_env_steps: int | None = 30_000    # stop: env step budget (None: unlimited)


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
        self.actor_opt = adam(self.actor.parameters(), lr, self.device)
        self.critic_opt = adam(self.critic.parameters(), lr, self.device)
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


# ---------------------------------------------------------------------------------------------
# 5. The actors: rollout workers and the learner
# ---------------------------------------------------------------------------------------------

@ray.remote
class RolloutWorker(Worker):
    """A worker that plays a ~ pi(.|s) (sampled, not the mean) and sends 1-step transitions.

    Its first `random_steps` steps take uniform random actions (the replay fills with broad
    data before the policy means anything; a restarted worker does not do that again).
    Weights are pulled at every episode end and at least every `pull_every` steps.
    """

    pull_at_episode_end = True

    def __init__(self, index: int, cfg: SACConfig, prefix: str, seed: int, random_steps: int):
        super().__init__(index, cfg, prefix, seed)
        self.random_steps = 0 if self.restarted else random_steps
        self.low, self.high = self.env.action_space.low, self.env.action_space.high

    def make_net(self, obs_dim: int, act_dim: int) -> SquashedGaussianActor:
        self.act_dim = act_dim
        return SquashedGaussianActor(obs_dim, act_dim, tuple(self.cfg.hidden))

    def act(self, obs: np.ndarray) -> np.ndarray:
        if self.steps < self.random_steps:
            action = self.rng.uniform(-1.0, 1.0, self.act_dim).astype(np.float32)
        else:
            action = self.net.act(obs[None])[0]
        check_finite(action, "action", self.cfg.env_id, self.steps)
        return action

    def env_action(self, action: np.ndarray) -> np.ndarray:
        return scale_action(action, self.low, self.high)

    def transitions(self, obs, action, reward, next_obs, terminated, truncated) -> list[dict]:
        check_finite(reward, "reward", self.cfg.env_id, self.steps)
        # a time-limit end is not terminal: only `terminated` is stored
        return [{"obs": obs, "action": action, "reward": reward, "next_obs": next_obs,
                 "terminated": terminated}]


@ray.remote
class Learner(LearnerActor):
    """A SACLearner on uniform batches. Ask Ray for a GPU (`Learner.options(num_gpus=1)`) and
    the SACLearner finds it through `torch.cuda.is_available()`; without one it trains on the
    CPU."""

    def make_learner(self, cfg: SACConfig, obs_dim: int, act_dim: int) -> SACLearner:
        return make_learner(cfg, obs_dim, act_dim)


def deterministic_returns(actor: SquashedGaussianActor, env_id: str, episodes: int = 10,
                          seed: int = 10_000) -> np.ndarray:
    """Returns (episodes,) of the deterministic policy a = tanh(mean(s)), scaled to the env."""
    env = make_env(env_id)
    low, high = env.action_space.low, env.action_space.high
    env.close()

    def act(obs: np.ndarray) -> np.ndarray:
        return scale_action(actor.act(obs, deterministic=True), low, high)

    return evaluate_policy(act, env_id, episodes, seed)


# ---------------------------------------------------------------------------------------------
# 6. The driver
# ---------------------------------------------------------------------------------------------

class SACTrainer(DistributedTrainer):
    """The parallel-SAC driver (`distributed.DistributedTrainer`) with rollout workers, a
    uniform replay and a SAC learner, holding the update-to-data ratio at `utd_ratio`.

    `SACTrainer(cfg, restore=checkpoint)` continues: networks, optimisers, alpha and counters;
    the replay buffer refills (the policy acts from the start: no random steps again).
    """

    algo = "sac"
    Worker, Learner = RolloutWorker, Learner
    worker_name = "rollout worker"
    learner_metrics = ("critic_loss", "actor_loss", "alpha", "entropy", "q_mean")

    @property
    def updates_per_transition(self) -> float:
        return self.cfg.utd_ratio

    def check_env(self, env) -> None:
        require_continuous(env)

    def transition_spec(self) -> dict:
        obs_dim, act_dim = self.dims
        return transition_spec((obs_dim,), action_shape=(act_dim,), action_dtype=np.float32)

    def replay_options(self) -> dict[str, Any]:
        return {"prioritized": False}

    def worker_options(self, index: int) -> dict[str, Any]:
        cfg = self.cfg
        random = 0 if self.counters["starts"] else math.ceil(cfg.start_steps / cfg.num_workers)
        return {"random_steps": random}

    def evaluation_functions(self) -> tuple:
        return (partial(SquashedGaussianActor, *self.dims, tuple(self.cfg.hidden)),
                partial(deterministic_returns, env_id=self.cfg.env_id))

    def row_extras(self) -> dict[str, float]:
        c = self.counters
        return {"utd": c["learner_updates"] / max(1, c["inserted"] - self.cfg.learning_starts)}


def train_sac(config: SACConfig, progress=None, run=None, restore: dict | str | None = None):
    """Train parallel SAC until a stop criterion of `config` holds; a `results.TrainResult`
    (see `trainer.train_with` for progress, run and restore). Starts Ray if it is not running."""
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
