"""REINFORCE with a baseline in one process: the config, the policy network, sampling whole
episodes, discounted returns and baselines, the loss and one update, greedy evaluation.

Each step is a plain function that tests and notebook 02 call on their own; `course_lib.pg.parallel`
runs the same functions in Ray actors.

    grad J(theta) ~= mean over steps t of  grad log pi(a_t | s_t) * (G_t - b_t)
    G_t = r_t + gamma * r_{t+1} + gamma^2 * r_{t+2} + ...   (to the end of t's episode)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from course_lib.config import Config
from course_lib.envs import evaluate_policy, make_env, play_episode
from course_lib.nets import mlp, set_weights
from course_lib.trainer import evaluation_request


@dataclass
class PGConfig(Config):
    """Hyperparameters of parallel REINFORCE. Full mode: greedy CartPole-v1 return >= 450."""

    QUICK: ClassVar[dict] = {"max_iterations": 15, "eval_every": 5, "eval_episodes": 3,
                             "confirm_episodes": 3}
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
    eval_episodes: int = 10           # episodes per greedy evaluation (fresh seeds each time)
    confirm_episodes: int = 20        # more fresh episodes of the same weights before a stop
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
    """A PolicyNet sized for `env` (its observations flattened: a Discrete one counts as a
    one-hot vector, as `envs.make_env` gives it); refuses anything but a discrete action space.
    Feed it observations of an env from `envs.make_env`, as every function here does."""
    if not isinstance(env.action_space, gym.spaces.Discrete):
        raise ValueError(f"policy gradient here needs a Discrete action space; "
                         f"{env.spec.id if env.spec else env} has {env.action_space}")
    obs_dim = gym.spaces.flatdim(env.observation_space)
    return PolicyNet(obs_dim, int(env.action_space.n), hidden)


# ---------------------------------------------------------------------------------------------
# 2. Sampling experiences
# ---------------------------------------------------------------------------------------------

def sample_episodes(env: gym.Env, policy: PolicyNet, min_steps: int,
                    rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Play whole episodes with `policy` (`envs.play_episode`, storing every step) until at
    least `min_steps` steps are collected.

    Only whole episodes, so every step's return G_t is known exactly (no bootstrapping).
    `env` comes from `envs.make_env` (flat float32 observations). Seed the env once before the
    first call (`env.reset(seed=...)`); later resets continue its random stream. A batch holds
    N steps from E episodes, laid end to end:

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

    def store(obs, action, reward, next_obs, terminated, truncated) -> None:
        obs_list.append(obs)
        actions.append(action)
        rewards.append(reward)
        dones.append(terminated or truncated)

    while len(rewards) < min_steps:
        obs, _ = env.reset()
        ep_return, ep_length = play_episode(env, lambda o: policy.act(o, rng), obs,
                                            on_step=store)
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


@torch.no_grad()
def greedy_returns(policy: PolicyNet | dict[str, np.ndarray], env_id: str = "CartPole-v1",
                   episodes: int = 10, seed: int = 0,
                   hidden: tuple[int, ...] = (64, 64)) -> np.ndarray:
    """Undiscounted returns (episodes,) of the greedy policy (argmax action), all episodes side
    by side (`envs.evaluate_policy`, on `envs.make_env` envs).

    `policy` is a PolicyNet or a weights dict from `get_weights` (then `hidden` must match).
    Episode i starts from `env.reset(seed=seed + i)`, so two calls see the same start states.
    """
    if isinstance(policy, dict):
        env = make_env(env_id)
        weights, policy = policy, make_policy(env, hidden)
        env.close()
        set_weights(policy, weights)
    return evaluate_policy(lambda obs: policy(torch.as_tensor(obs)).argmax(dim=1).numpy(),
                           env_id, episodes, seed)


def mean_greedy_return(policy: PolicyNet | dict[str, np.ndarray], env_id: str = "CartPole-v1",
                       episodes: int = 10, seed: int = 0,
                       hidden: tuple[int, ...] = (64, 64)) -> float:
    """Mean undiscounted return of `greedy_returns` (same arguments)."""
    return float(np.mean(greedy_returns(policy, env_id, episodes, seed, hidden)))


def evaluate_confirmed(policy: PolicyNet, cfg: PGConfig, evaluations: int
                       ) -> tuple[list[float], int]:
    """The greedy returns of one evaluation of `policy` by the rule every trainer follows
    (`trainer.evaluation_request`): `cfg.eval_episodes` fresh episodes and, when their mean
    meets `cfg.target_return`, `cfg.confirm_episodes` more; no two evaluations share a seed.
    `evaluations` counts the run's evaluations so far; returns (returns, the new count)."""
    returns: list[float] = []
    while (request := evaluation_request(cfg, returns, evaluations)) is not None:
        episodes, seed = request
        returns += greedy_returns(policy, cfg.env_id, episodes, seed).tolist()
        evaluations += 1
    return returns, evaluations
