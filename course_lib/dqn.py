"""DQN with the pieces of Ape-X's learner: dueling net, n-step double-Q targets, prioritized replay.

Every piece is a plain function or a small class that a test or a notebook can call on its own,
and the distributed version (`course_lib.apex`) calls exactly the same ones:

1. the network: `DuelingQNet`, Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a');
2. acting: `epsilon_greedy`, with `epsilon_for_explorer` (Ape-X's fixed eps per explorer) or
   `linear_epsilon` (the single-process baseline's decaying eps);
3. the target: `n_step_double_q_target`, the Bellman backup over n steps, double-Q style;
4. the loss: `dqn_loss`, importance-weighted Huber; its |TD errors| are the new priorities;
5. one update: `DQNLearner.update` (gradient clipping, hard target-network copy every N updates);
6. scoring: `evaluate_greedy`, the greedy policy over several episodes run side by side.

`train_dqn` is the single-process baseline: one env, one prioritized buffer, the same learner.

The update rule, for a batch of n-step transitions (s, a, R, s', discount = gamma^k, terminated)
sampled with probability P(i) and importance weights w_i:

    a*   = argmax_a Q_online(s', a)                                (the online net chooses ...)
    y    = R + discount * (1 - terminated) * Q_target(s', a*)      (... the target net scores)
    delta = y - Q_online(s, a)
    L    = mean_i  w_i * huber(delta_i)           new priority p_i = |delta_i|
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.envs import env_dims, evaluate_policy, make_env
from course_lib.nets import adam, get_weights, mlp, to_cpu
from course_lib.replay import (
    NStepBuffer,
    PrioritizedReplayBuffer,
    stack_transitions,
    transition_spec,
)
from course_lib.results import Algorithm
from course_lib.trainer import Trainer, TrainerConfig, mean_or_nan, train_with


@dataclass
class DQNSettings(TrainerConfig):
    """The DQN learner and its prioritized replay: what single-process DQN and Ape-X share."""

    env_id: str = "CartPole-v1"       # any gymnasium env with a discrete action space
    n_step: int = 3                   # rewards summed before bootstrapping
    replay_ratio: float = 16.0        # learner samples per inserted transition
    target_update_every: int = 250    # learner updates between hard target-network copies
    grad_clip: float = 10.0           # max global gradient norm
    priority_alpha: float = 0.6       # P(i) ~ p_i^alpha
    priority_beta: float = 0.4        # importance-sampling exponent


@dataclass
class DQNConfig(DQNSettings):
    """Single-process DQN (dueling, double, n-step, prioritized): the baseline for Ape-X."""

    QUICK: ClassVar[dict] = {"max_env_steps": 3_000, "target_return": None,
                             "learning_starts": 500, "steps_per_iteration": 500,
                             "eval_episodes": 3}
    eps_start: float = 1.0            # exploration epsilon at the first step ...
    eps_end: float = 0.02             # ... decays linearly to this ...
    eps_decay_steps: int = 10_000     # ... over this many env steps
    steps_per_iteration: int = 1_000  # env steps per iteration (one progress row, one eval)


# ---------------------------------------------------------------------------------------------
# 1. The network
# ---------------------------------------------------------------------------------------------

class DuelingQNet(nn.Module):
    """Q(s, .) from a shared trunk and two heads: a state value V(s) and advantages A(s, a).

        Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')

    Subtracting the mean advantage makes the split identifiable (mean_a Q(s, a) = V(s)).

    | call              | input           | output              |
    | ----------------- | --------------- | ------------------- |
    | `forward(obs)`    | (B, obs_dim)    | Q values (B, n_actions) |
    | `value(h)`        | (B, hidden[-1]) | (B, 1)              |
    | `advantage(h)`    | (B, hidden[-1]) | (B, n_actions)      |
    """

    def __init__(self, obs_dim: int, n_actions: int, hidden: tuple[int, ...] = (128, 128)):
        super().__init__()
        if not hidden:
            raise ValueError("hidden must name at least one layer, e.g. (128, 128)")
        self.trunk = nn.Sequential(mlp([obs_dim, *hidden], nn.ReLU), nn.ReLU())
        self.value = nn.Linear(hidden[-1], 1)
        self.advantage = nn.Linear(hidden[-1], n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.trunk(obs)
        adv = self.advantage(h)
        return self.value(h) + adv - adv.mean(dim=-1, keepdim=True)


def require_discrete(env: gym.Env, algo: str = "DQN") -> None:
    """Refuse an env whose actions are not one Discrete choice, with a plain message."""
    if not isinstance(env.action_space, gym.spaces.Discrete):
        raise ValueError(f"{env.spec.id if env.spec else env} has a "
                         f"{type(env.action_space).__name__} action space; {algo} needs "
                         "discrete actions (use --algo sac for continuous actions)")


def make_q_net(env_id: str, hidden: tuple[int, ...]) -> DuelingQNet:
    """A freshly initialised DuelingQNet sized for `env_id`."""
    env = make_env(env_id)
    net = DuelingQNet(*env_dims(env), hidden)
    env.close()
    return net


def default_device() -> torch.device:
    """The first GPU when one is visible, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_of(net: nn.Module) -> torch.device:
    """Where `net`'s parameters live (the CPU for a net without any)."""
    param = next(net.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


# ---------------------------------------------------------------------------------------------
# 2. Acting: epsilon-greedy
# ---------------------------------------------------------------------------------------------

def epsilon_for_explorer(i: int, n: int, eps: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X's fixed exploration rate of explorer i of n:  eps_i = eps^(1 + alpha * i / (n-1)).

    Explorer 0 explores most (eps), the last least (eps^(1+alpha)); a single explorer gets eps.

    >>> [round(epsilon_for_explorer(i, 3), 4) for i in range(3)]
    [0.4, 0.0406, 0.0041]
    """
    if not 0 <= i < n:
        raise ValueError(f"explorer index must be in [0, {n}), got {i}")
    if n == 1:
        return eps
    return eps ** (1 + alpha * i / (n - 1))


def linear_epsilon(step: int, start: float, end: float, decay_steps: int) -> float:
    """eps decaying linearly from `start` at step 0 to `end` at `decay_steps`, then flat."""
    frac = min(1.0, step / decay_steps) if decay_steps > 0 else 1.0
    return start + frac * (end - start)


@torch.no_grad()
def epsilon_greedy(q_net: nn.Module, obs: np.ndarray, epsilon: float,
                   rng: np.random.Generator, n_actions: int) -> int:
    """A random action with probability epsilon, else argmax_a Q(obs, a). obs: (obs_dim,)."""
    if rng.random() < epsilon:
        return int(rng.integers(n_actions))
    obs = torch.as_tensor(obs, dtype=torch.float32, device=device_of(q_net))
    return int(q_net(obs[None]).argmax(dim=1).item())


# ---------------------------------------------------------------------------------------------
# 3. The n-step double-Q target
# ---------------------------------------------------------------------------------------------

@torch.no_grad()
def n_step_double_q_target(reward: torch.Tensor, discount: torch.Tensor,
                           terminated: torch.Tensor, next_obs: torch.Tensor,
                           online: nn.Module, target: nn.Module) -> torch.Tensor:
    """y = R^(n) + discount * (1 - terminated) * Q_target(s', argmax_a Q_online(s', a)).

    | argument   | shape        | meaning                                              |
    | ---------- | ------------ | ---------------------------------------------------- |
    | reward     | (B,)         | R^(n) = r_t + gamma r_{t+1} + ... (k terms, k <= n)   |
    | discount   | (B,)         | gamma^k, from the NStepBuffer                        |
    | terminated | (B,) bool    | s' is a true terminal state (not a time limit)       |
    | next_obs   | (B, obs_dim) | s' = s_{t+k}                                         |
    | returns    | (B,)         | the target y, no gradient                            |

    Double Q: the online net picks the action, the target net values it, which removes the
    overestimation of max_a Q_target. A time-limit end is NOT terminal: it still bootstraps.
    """
    best = online(next_obs).argmax(dim=1, keepdim=True)         # (B, 1)
    next_q = target(next_obs).gather(1, best).squeeze(1)        # (B,)
    not_done = 1.0 - terminated.float()
    return reward + discount * not_done * next_q


# ---------------------------------------------------------------------------------------------
# 4. The loss
# ---------------------------------------------------------------------------------------------

def dqn_loss(q_taken: torch.Tensor, target: torch.Tensor,
             weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Importance-weighted Huber loss and the |TD errors| (the new priorities).

        delta_i = y_i - Q(s_i, a_i)
        L = mean_i w_i * huber(delta_i),  huber(d) = d^2 / 2 if |d| <= 1 else |d| - 1/2

    | argument | shape | meaning                                   |
    | -------- | ----- | ----------------------------------------- |
    | q_taken  | (B,)  | Q_online(s, a) for the actions taken      |
    | target   | (B,)  | y (no gradient)                           |
    | weights  | (B,)  | importance weights w_i (None: all 1)      |
    | returns  | (), (B,) | loss (scalar), |delta| (detached)       |
    """
    delta = target.detach() - q_taken
    per_sample = F.huber_loss(q_taken, target.detach(), reduction="none", delta=1.0)
    if weights is not None:
        per_sample = weights * per_sample
    return per_sample.mean(), delta.detach().abs()


def batch_to_tensors(batch: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """A replay batch as tensors on `device` (copies: arrays from Ray are read-only)."""
    return {name: torch.tensor(value, device=device) for name, value in batch.items()
            if name != "indices"}


@torch.no_grad()
def td_errors(batch: dict[str, np.ndarray], net: nn.Module) -> np.ndarray:
    """|y - Q(s, a)| for a batch, without training: the initial priorities an explorer sends.

    An explorer has only its own copy of the network, so it serves as both the online and the
    target net. Computed on the net's device."""
    t = batch_to_tensors(batch, device_of(net))
    y = n_step_double_q_target(t["reward"], t["discount"], t["terminated"], t["next_obs"],
                               net, net)
    q = net(t["obs"]).gather(1, t["action"][:, None]).squeeze(1)
    return (y - q).abs().cpu().numpy()


# ---------------------------------------------------------------------------------------------
# 5. One learner update
# ---------------------------------------------------------------------------------------------

class DQNLearner:
    """The online and target networks, the optimiser, and one gradient step on a replay batch.

    | call                 | returns                                                  |
    | -------------------- | -------------------------------------------------------- |
    | `update(batch)`      | {"loss": float, "q_mean": float, "priorities": (B,) np}  |
    | `get_weights()`      | the online net as {name: numpy array}                    |
    | `state_dict()`       | online, target, optimiser and update count (checkpoints) |

    `batch` is what the prioritized buffer samples: obs, action, reward, next_obs, terminated,
    discount, and optionally weights (importance weights) and indices (ignored here).
    """

    def __init__(self, obs_dim: int, n_actions: int, hidden: tuple[int, ...] = (128, 128),
                 lr: float = 1e-3, grad_clip: float = 10.0, target_update_every: int = 500,
                 device: torch.device | str | None = None):
        self.device = torch.device(device) if device is not None else default_device()
        self.online = DuelingQNet(obs_dim, n_actions, hidden).to(self.device)
        self.target = DuelingQNet(obs_dim, n_actions, hidden).to(self.device)
        self.target.load_state_dict(self.online.state_dict())
        self.target.requires_grad_(False)
        self.optimizer = adam(self.online.parameters(), lr, self.device)
        self.grad_clip, self.target_update_every = grad_clip, target_update_every
        self.updates = 0

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        """One step: targets, weighted Huber loss, clipped gradient step, maybe a target copy."""
        t = batch_to_tensors(batch, self.device)
        q_taken = self.online(t["obs"]).gather(1, t["action"][:, None]).squeeze(1)
        y = n_step_double_q_target(t["reward"], t["discount"], t["terminated"], t["next_obs"],
                                   self.online, self.target)
        loss, abs_td = dqn_loss(q_taken, y, t.get("weights"))
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.online.parameters(), self.grad_clip)
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.target_update_every == 0:    # hard copy, every N updates
            self.target.load_state_dict(self.online.state_dict())
        return {"loss": loss.item(), "q_mean": q_taken.mean().item(),
                "priorities": abs_td.cpu().numpy()}

    def get_weights(self) -> dict[str, np.ndarray]:
        return get_weights(self.online)

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimiser and update count, on the CPU (a checkpoint loads anywhere)."""
        return to_cpu({"online": self.online.state_dict(), "target": self.target.state_dict(),
                        "optimizer": self.optimizer.state_dict(), "updates": self.updates})

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])


def make_learner(cfg, obs_dim: int, n_actions: int, device=None) -> DQNLearner:
    """A DQNLearner from a config with hidden, lr, grad_clip and target_update_every."""
    return DQNLearner(obs_dim, n_actions, tuple(cfg.hidden), cfg.lr, cfg.grad_clip,
                      cfg.target_update_every, device)


# ---------------------------------------------------------------------------------------------
# 6. Scoring the greedy policy
# ---------------------------------------------------------------------------------------------

@torch.no_grad()
def evaluate_greedy(q_net: nn.Module, env_id: str, episodes: int = 10,
                    seed: int = 10_000) -> np.ndarray:
    """Undiscounted returns (episodes,) of argmax_a Q(s, a), all episodes run side by side
    (`envs.evaluate_policy`: one batched forward pass per time step; episode i starts from
    `reset(seed=seed + i)`)."""
    device = device_of(q_net)

    def act(obs: np.ndarray) -> np.ndarray:
        return q_net(torch.as_tensor(obs, device=device)).argmax(dim=1).cpu().numpy()

    return evaluate_policy(act, env_id, episodes, seed)


def greedy_policy(checkpoint: dict) -> Callable[[np.ndarray], int]:
    """act(obs) -> argmax action, from a DQN or Ape-X checkpoint (for `course_lib evaluate`)."""
    cfg = checkpoint["config"]
    net = make_q_net(checkpoint["env_id"], tuple(cfg["hidden"]))
    net.load_state_dict(checkpoint["learner"]["online"])
    net.eval()

    @torch.no_grad()
    def act(obs: np.ndarray) -> int:
        return int(net(torch.as_tensor(obs, dtype=torch.float32)[None]).argmax(dim=1).item())

    return act


# ---------------------------------------------------------------------------------------------
# Single-process DQN: the baseline
# ---------------------------------------------------------------------------------------------

class DQNTrainer(Trainer):
    """One env, one prioritized buffer, one DQNLearner, in this process.

    `step()` runs one iteration (`steps_per_iteration` env steps, with the learner updates
    that fall due interleaved), then evaluates a snapshot of the learner (`trainer.Trainer`);
    `DQNTrainer(cfg, restore=checkpoint)` continues from one (network, optimiser and
    counters; the replay buffer starts empty and refills).
    """

    algo = "dqn"

    def __init__(self, config: DQNConfig, restore: dict | None = None):
        super().__init__(config, restore)
        cfg = self.cfg
        # Tiny networks: one thread is fastest, and several threads spin-waiting on a busy
        # laptop (Ray workers, Jupyter) made this loop several times slower.
        torch.set_num_threads(1)
        torch.manual_seed(self.seed("learner"))
        self.rng = np.random.default_rng(self.seed("explore"))
        self.env = make_env(cfg.env_id)
        require_discrete(self.env)
        self.obs_dim, self.n_actions = env_dims(self.env)
        spec = transition_spec((self.obs_dim,), n_step=True)
        self.buffer = PrioritizedReplayBuffer(cfg.buffer_size, spec, alpha=cfg.priority_alpha,
                                              seed=self.seed("replay"))
        self.nstep = NStepBuffer(cfg.n_step, cfg.gamma)
        self.learner = make_learner(cfg, self.obs_dim, self.n_actions)
        if restore is not None:
            self.learner.load_state_dict(restore["learner"])
        self.obs, _ = self.env.reset(seed=self.seed("env"))
        self.episode_return = 0.0

    @property
    def updates_per_transition(self) -> float:
        return self.cfg.replay_ratio / self.cfg.batch_size

    def step(self) -> dict[str, Any]:
        cfg, c, learner = self.cfg, self.counters, self.learner
        t0, steps0, updates0 = time.perf_counter(), c["env_steps"], learner.updates
        returns, losses = [], []
        for _ in range(cfg.steps_per_iteration):
            # -- act and store the n-step transitions that are complete --------------------
            eps = linear_epsilon(c["env_steps"], cfg.eps_start, cfg.eps_end, cfg.eps_decay_steps)
            action = epsilon_greedy(learner.online, self.obs, eps, self.rng, self.n_actions)
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            done = self.nstep.add(self.obs, action, reward, next_obs, terminated, truncated)
            if done:
                self.buffer.add(stack_transitions(done))  # new transitions get the max priority
                c["inserted"] += len(done)
            c["env_steps"] += 1
            self.episode_return += reward
            self.obs = next_obs                         # carry the next observation over
            if terminated or truncated:
                returns.append(self.episode_return)
                c["episodes"] += 1
                self.obs, _ = self.env.reset()
                self.episode_return = 0.0
            # -- learn: the updates that are due (none before learning_starts) ------------
            while learner.updates < self.updates_due():
                batch = self.buffer.sample(cfg.batch_size, beta=cfg.priority_beta)
                info = learner.update(batch)
                self.buffer.update_priorities(batch["indices"], info["priorities"])
                losses.append(info["loss"])
        c["learner_updates"] = learner.updates
        elapsed = time.perf_counter() - t0
        # -- evaluate exactly the weights a checkpoint of this iteration would hold ----------
        snapshot = self.snapshot(learner.state_dict(), learner.get_weights(), learner.updates)
        while (request := self.next_evaluation(snapshot)) is not None:
            episodes, seed = request
            snapshot.returns += evaluate_greedy(learner.online, cfg.env_id, episodes,
                                                seed).tolist()
        return self.row(snapshot, elapsed, steps0, updates0, returns,
                        loss=mean_or_nan(losses), epsilon=eps, replay_size=len(self.buffer))

    def close(self) -> None:
        self.env.close()


def train_dqn(config: DQNConfig, progress=None, run=None, restore: dict | str | None = None):
    """Train single-process DQN until a stop criterion of `config` holds; a TrainResult
    (see `trainer.train_with` for progress, run and restore)."""
    return train_with(DQNTrainer, config, progress=progress, run=run, restore=restore)


#: what `python -m course_lib train --algo dqn` runs (see `course_lib.cli`)
ALGORITHM = Algorithm(DQNConfig, train_dqn, greedy_policy, require_discrete)
