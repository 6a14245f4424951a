"""n-step transitions: `NStepBuffer` (one per actor) and `stack_transitions` (list -> batch)."""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from course_lib.replay.uniform import positive_int


class _Step(NamedTuple):
    obs: np.ndarray
    action: object
    reward: float
    next_obs: np.ndarray
    terminated: bool


class NStepBuffer:
    """Turns one actor's stream of 1-step transitions into n-step transitions.

    The n-step transition that starts at step t and sums k rewards is

        obs = s_t,  action = a_t,  next_obs = s_{t+k},  discount = gamma^k
        reward = r_t + gamma r_{t+1} + ... + gamma^(k-1) r_{t+k-1}
        terminated = True only if s_{t+k} is a true terminal state

    so the learner's target is  reward + discount * (1 - terminated) * max_a Q(next_obs, a).
    Mid-episode k = n. When an episode ends, every pending step is flushed with the k that is
    left (k < n, also for episodes shorter than n). A truncated episode (time limit) is not a
    terminal state: its transitions keep terminated=False and bootstrap from the last state.

    `add(...)` returns the list of transitions now complete (0 or 1 mid-episode, all pending at
    an episode end); `stack_transitions(list)` turns them into a batch for a replay buffer.
    """

    def __init__(self, n: int = 3, gamma: float = 0.99):
        self.n = positive_int(n, "n")
        if not 0 <= gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
        self.gamma = float(gamma)
        self.window: deque[_Step] = deque()  # at most n - 1 steps between calls

    def add(self, obs, action, reward, next_obs, terminated, truncated) -> list[dict]:
        """Record one env step; return the n-step transitions that are now complete."""
        step = _Step(np.array(obs), action, float(reward), np.array(next_obs), bool(terminated))
        self.window.append(step)
        if terminated or truncated:
            return self.flush()
        if len(self.window) == self.n:
            return [self._pop_oldest()]
        return []

    def flush(self) -> list[dict]:
        """Emit every pending step (as at a time limit: bootstrap from the last state)."""
        return [self._pop_oldest() for _ in range(len(self.window))]

    def _pop_oldest(self) -> dict:
        """The transition from the oldest pending step to the newest; then drop the oldest."""
        rewards = [step.reward for step in self.window]
        last = self.window[-1]
        first = self.window.popleft()
        return {
            "obs": first.obs,
            "action": first.action,
            "reward": sum(self.gamma**k * r for k, r in enumerate(rewards)),
            "next_obs": last.next_obs,
            "terminated": last.terminated,
            "discount": self.gamma ** len(rewards),
        }


def stack_transitions(transitions: list[dict]) -> dict[str, np.ndarray]:
    """[{name: value}, ...] -> {name: array with a leading batch axis}."""
    if not transitions:
        raise ValueError("no transitions to stack")
    return {name: np.stack([t[name] for t in transitions]) for name in transitions[0]}

