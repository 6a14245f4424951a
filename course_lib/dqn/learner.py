"""The pieces of DQN that the single-process baseline and Ape-X share, one plain function or
small class each: the dueling network, epsilon-greedy acting, the n-step double-Q target, the
importance-weighted loss, `DQNLearner` (one update), and greedy scoring.

    a*   = argmax_a Q_online(s', a)
    y    = R + discount * (1 - terminated) * Q_target(s', a*)
    L    = mean_i  w_i * huber(y_i - Q_online(s_i, a_i))     new priority p_i = |delta_i|
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.envs import env_dims, evaluate_policy, make_env
from course_lib.nets import (
    adam,
    batch_to_tensors,
    default_device,
    device_of,
    get_weights,
    mlp,
    to_cpu,
)
from course_lib.trainer import TrainerConfig


@dataclass
class DQNSettings(TrainerConfig):
    """The DQN learner and its prioritized replay: what single-process DQN and Ape-X share."""

    LIMITS: ClassVar[dict[str, str]] = {
        "n_step": ">= 1", "replay_ratio": "> 0", "target_update_every": ">= 1",
        "grad_clip": "> 0", "priority_alpha": "[0, 1]", "priority_beta": "[0, 1]"}

    env_id: str = "CartPole-v1"       # any gymnasium env with a discrete action space
    n_step: int = 3                   # rewards summed before bootstrapping
    replay_ratio: float = 16.0        # learner samples per inserted transition
    target_update_every: int = 250    # learner updates between hard target-network copies
    grad_clip: float = 10.0           # max global gradient norm
    priority_alpha: float = 0.6       # P(i) ~ p_i^alpha
    priority_beta: float = 0.4        # importance-sampling exponent


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


# ---------------------------------------------------------------------------------------------
# 2. Acting: epsilon-greedy
# ---------------------------------------------------------------------------------------------

def epsilon_for_explorer(i: int, n: int, eps: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X's fixed exploration rate of explorer i of n:  eps_i = eps^(1 + alpha * i / (n-1)).

    Explorer 0 explores most (eps), the last least (eps^(1+alpha)); a single explorer gets eps.

    >>> [round(epsilon_for_explorer(i, 3), 4) for i in range(3)]
    [0.4, 0.0162, 0.0007]
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


@torch.no_grad()
def epsilon_greedy_batch(q_net: nn.Module, obs: np.ndarray, epsilon: float,
                         rng: np.random.Generator, n_actions: int) -> np.ndarray:
    """`epsilon_greedy` for a batch of observations (N, obs_dim) in one forward pass: each of
    the N actions is random with probability epsilon, else argmax_a Q(obs_i, a). (N,) ints."""
    greedy = q_net(torch.as_tensor(obs, dtype=torch.float32, device=device_of(q_net)))
    actions = greedy.argmax(dim=1).cpu().numpy()
    explore = rng.random(len(actions)) < epsilon
    actions[explore] = rng.integers(n_actions, size=int(explore.sum()))
    return actions


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
def greedy_returns(q_net: nn.Module, env_id: str, episodes: int = 10,
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

