"""SAC's maths and one learner update, without Ray: the tanh-squashed Gaussian policy, the twin
critics, the target and the three losses (one small function each, as the package docstring
writes them), Polyak averaging, and `SACLearner`, which tests use on their own and the
`SACLearnerActor` of `course_lib.sac.parallel` wraps.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.nets import (
    adam,
    batch_to_tensors,
    default_device,
    device_of,
    get_weights,
    mlp,
    to_cpu,
)

# ---------------------------------------------------------------------------------------------
# 1. The policy: a tanh-squashed Gaussian
# ---------------------------------------------------------------------------------------------

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def squashed_log_prob(u: torch.Tensor, mean: torch.Tensor,
                      log_std: torch.Tensor) -> torch.Tensor:
    """log pi(tanh(u)) of a pre-squash sample u (B, A) of N(mean, exp(log_std)^2), shape (B,).

    Change of variables: a = tanh(u) has density N(u) / |da/du| with da/du = 1 - tanh(u)^2, so

        log pi(a) = sum_i [ log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2) ]

    and log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), which stays finite when tanh(u)
    rounds to +-1 (the naive form gives log 0 = -inf there).
    """
    log_normal = -0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
    log_jacobian = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))
    return (log_normal - log_jacobian).sum(dim=-1)


def squashed_gaussian(mean: torch.Tensor, log_std: torch.Tensor, deterministic: bool = False,
                      log_prob=squashed_log_prob) -> tuple[torch.Tensor, torch.Tensor]:
    """A sample a = tanh(u), u ~ N(mean, exp(log_std)^2), and its log-density log pi(a)
    (`log_prob(u, mean, log_std)`: `squashed_log_prob`, or an attendee's in its place).

    | argument / result | shape      | meaning                                          |
    | ----------------- | ---------- | ------------------------------------------------ |
    | mean, log_std     | (B, A)     | the Gaussian before squashing                    |
    | action            | (B, A)     | tanh(u), in (-1, 1); deterministic: tanh(mean)   |
    | log_prob          | (B,)       | log pi(a), summed over the A action dimensions   |

    The sample is reparameterised (u = mean + std * eps), so gradients flow into mean and
    log_std.
    """
    u = mean if deterministic else mean + log_std.exp() * torch.randn_like(mean)
    return torch.tanh(u), log_prob(u, mean, log_std)


class SquashedGaussianActor(nn.Module):
    """pi(.|s): an MLP trunk, then a mean head and a log-std head (clamped to [-20, 2]).

    | call                          | input         | output                            |
    | ----------------------------- | ------------- | --------------------------------- |
    | `forward(obs, deterministic)` | (B, obs_dim)  | action (B, A) in (-1, 1), log_prob (B,) |

    `log_prob` is the log-density it uses (`squashed_log_prob`, or SAC's slot of that name).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...] = (128, 128),
                 log_prob=squashed_log_prob):
        super().__init__()
        self.log_prob = log_prob
        self.trunk = nn.Sequential(mlp([obs_dim, *hidden], nn.ReLU), nn.ReLU())
        self.mean = nn.Linear(hidden[-1], act_dim)
        self.log_std = nn.Linear(hidden[-1], act_dim)

    def forward(self, obs: torch.Tensor, deterministic: bool = False):
        h = self.trunk(obs)
        log_std = self.log_std(h).clamp(LOG_STD_MIN, LOG_STD_MAX)
        return squashed_gaussian(self.mean(h), log_std, deterministic, self.log_prob)

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


def actor_step(actor: SquashedGaussianActor, critic: TwinQ, optimizer: torch.optim.Optimizer,
               batch: dict[str, torch.Tensor], alpha: float | torch.Tensor
               ) -> tuple[float, torch.Tensor]:
    """One gradient step of the policy on a batch's states: L_pi (`actor_loss`) on a~, a fresh
    reparameterised sample of pi(.|s). The critics score a~, not the replay's action: only
    through an action the actor itself just sampled does their gradient reach the actor.
    Returns (L_pi, log pi(a~|s) detached: the temperature's loss needs it)."""
    obs = batch["obs"]
    new_action, log_prob = actor(obs)
    loss = actor_loss(log_prob, *critic(obs, new_action), alpha)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item(), log_prob.detach()


@torch.no_grad()
def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """theta' <- (1 - tau) * theta' + tau * theta for every parameter, in place."""
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.lerp_(s, tau)


# ---------------------------------------------------------------------------------------------
# 3. One learner update
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SACMaths:
    """The functions one `SACLearner.update` calls: course_lib's, or those given in their place
    (`sac.SACSlots`, each checked there against these)."""

    squashed_log_prob: Callable = squashed_log_prob
    q_target: Callable = q_target
    actor_step: Callable = actor_step
    polyak_update: Callable = polyak_update


class SACLearner:
    """The actor, twin critics and their Polyak targets, log(alpha), and one update.

    | call                 | returns                                                     |
    | -------------------- | ----------------------------------------------------------- |
    | `update(batch)`      | {"critic_loss", "actor_loss", "alpha", "entropy", "q_mean"} |
    | `get_weights()`      | the actor as {name: numpy array} (what workers act with)    |
    | `state_dict()`       | networks, optimisers, log(alpha), update count (checkpoint) |

    `batch` holds obs (B, obs_dim), action (B, A) in [-1, 1], reward (B,), next_obs,
    terminated (B,). The device is `device`, else the first GPU if one is visible, else the
    CPU. `maths` holds the functions it calls (`SACMaths`: course_lib's, or SAC's slots).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...] = (128, 128),
                 lr: float = 1e-3, alpha_lr: float = 1e-3, init_alpha: float = 1.0,
                 gamma: float = 0.99, tau: float = 0.005,
                 device: torch.device | str | None = None, maths: SACMaths | None = None):
        self.device = torch.device(device) if device is not None else default_device()
        self.maths = maths = maths or SACMaths()
        self.actor = SquashedGaussianActor(obs_dim, act_dim, hidden,
                                           maths.squashed_log_prob).to(self.device)
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
            y = self.maths.q_target(t["reward"], t["terminated"],
                                    *self.critic_target(t["next_obs"], next_action),
                                    next_log_prob, alpha, self.gamma)
        q1, q2 = self.critic(obs, action)
        loss_q = critic_loss(q1, q2, y)
        self.critic_opt.zero_grad()
        loss_q.backward()
        self.critic_opt.step()
        # -- actor: the critics are frozen, only the policy moves --------------------------------
        self.critic.requires_grad_(False)
        loss_pi, log_prob = self.maths.actor_step(self.actor, self.critic, self.actor_opt, t,
                                                  alpha)
        self.critic.requires_grad_(True)
        # -- temperature: move alpha so the entropy approaches its target ----------------------
        loss_alpha = alpha_loss(self.log_alpha, log_prob, self.target_entropy)
        self.alpha_opt.zero_grad()
        loss_alpha.backward()
        self.alpha_opt.step()
        # -- targets: a slow Polyak average of the critics ------------------------------------
        self.maths.polyak_update(self.critic_target, self.critic, self.tau)
        self.updates += 1
        return {"critic_loss": loss_q.item(), "actor_loss": float(loss_pi),
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


class LearnerSettings(Protocol):
    """The config fields `make_learner` reads (`parallel.SACConfig` has them; this module
    does not import it: the dependency goes one way, parallel -> learner)."""

    hidden: tuple[int, ...]
    lr: float
    alpha_lr: float
    init_alpha: float
    gamma: float
    tau: float


def make_learner(cfg: LearnerSettings, obs_dim: int, act_dim: int, device=None,
                 maths: SACMaths | None = None) -> SACLearner:
    return SACLearner(obs_dim, act_dim, tuple(cfg.hidden), cfg.lr, cfg.alpha_lr, cfg.init_alpha,
                      cfg.gamma, cfg.tau, device, maths)

