"""The guards around notebook 06's pieces: SAC's maths in the learner, the attendee's
`squashed_log_prob`, `soft_target` and `polyak`, and the rollout workers' loop, their `rollout`
(see `course_lib.pieces`).

Each call of the attendee's function is checked against `course_lib`'s on the same tensors,
every call, and the attendee's result is what the learner then uses (their log-probability
carries the actor's gradient). Every call rather than the first few: a fault may show only on
some inputs (a log-probability that overflows only once the policy saturates, a target that is
wrong only after a true end), and the check costs little: element-wise maths on the batch and
one copy of the critics' parameters, against the forward and backward passes of three networks
that each update runs anyway.
"""

from __future__ import annotations

import math
import time

import torch

from course_lib.envs import check_finite
from course_lib.pieces import Given, Guarded
from course_lib.sac.learner import SACLearner, q_target, squashed_log_prob
from course_lib.trainer import derive_seed

#: relative and absolute tolerances: float32 maths in another order; a Polyak step is exact
TOLERANCE = {"maths": (1e-4, 1e-3), "polyak": (1e-5, 1e-6)}


def _with_grad(fn, enabled: bool):
    """`fn` run with autograd on or off: grad mode is per thread, and a piece runs on its own."""
    def run(*args):
        with torch.set_grad_enabled(enabled):
            return fn(*args)
    return run


def _compare(piece: Guarded, got, expected: torch.Tensor, what: str,
             tolerance: str = "maths") -> None:
    """A `PieceError` unless `got` is a tensor of `expected`'s shape, close to it."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        raise piece.broke(f"{what} it returned {shape}, expected a tensor of shape "
                          f"{tuple(expected.shape)}")
    rtol, atol = TOLERANCE[tolerance]
    close = torch.isclose(got.detach().to(expected.dtype), expected, rtol=rtol, atol=atol)
    if not close.all():
        i = int((~close).flatten().nonzero()[0])
        raise piece.broke(f"{what} it gave {got.detach().flatten()[i].item():.6g} where "
                          f"course_lib's gives {expected.flatten()[i].item():.6g} "
                          f"({int((~close).sum())} of {close.numel()} values differ)")


class LogProb:
    """The actor's `squashed_log_prob(u, mean, log_std)`: the attendee's, checked."""

    def __init__(self, piece: Guarded):
        self.piece = piece

    def __call__(self, u, mean, log_std):
        got = self.piece.call("squashed_log_prob()",
                              _with_grad(self.piece.cls, torch.is_grad_enabled()),
                              u, mean, log_std)
        with torch.no_grad():
            expected = squashed_log_prob(u, mean, log_std)
        _compare(self.piece, got, expected, f"for a batch u of shape {tuple(u.shape)}")
        return got


class SoftTarget:
    """The learner's `q_target(reward, terminated, next_q1, next_q2, next_log_prob, alpha,
    gamma)`: the attendee's `soft_target`, checked."""

    def __init__(self, piece: Guarded):
        self.piece = piece

    def __call__(self, *args):
        got = self.piece.call("soft_target()", _with_grad(self.piece.cls, False), *args)
        with torch.no_grad():
            expected = q_target(*args)
        _compare(self.piece, got, expected, f"for a batch of {len(expected)} transitions")
        return got


class Polyak:
    """The learner's `polyak_update(target, source, tau)`: the attendee's `polyak`, checked
    (run without autograd, as an in-place update of the target must be)."""

    def __init__(self, piece: Guarded):
        self.piece = piece

    def __call__(self, target, source, tau):
        with torch.no_grad():
            before = [t.detach().clone() for t in target.parameters()]
        self.piece.call("polyak()", _with_grad(self.piece.cls, False), target, source, tau)
        with torch.no_grad():
            for old, new, s in zip(before, target.parameters(), source.parameters(),
                                   strict=True):
                _compare(self.piece, new, old.lerp_(s, tau), f"with tau={tau:g} the target "
                         "did not move tau of the way to the source:", "polyak")


def guard_sac_maths(given: Given, learner) -> None:
    """Make `learner` (a `SACLearner`) call the attendee's pieces of its maths, those given."""
    if not isinstance(learner, SACLearner):
        keys = ", ".join(k for k in ("squashed_log_prob", "soft_target", "polyak")
                         if k in given.pieces)
        raise ValueError(f"pieces: {keys} are pieces of SAC's learner; pass them to "
                         "sac.SACTrainer.train")
    if "squashed_log_prob" in given.pieces:
        learner.actor.squashed_log_prob = LogProb(Guarded("squashed_log_prob", given))
    if "soft_target" in given.pieces:
        learner.q_target = SoftTarget(Guarded("soft_target", given))
    if "polyak" in given.pieces:
        learner.polyak_update = Polyak(Guarded("polyak", given))


class WorkerEnv:
    """The env a rollout worker lends the attendee's `rollout`: its own env, with the same
    wait per step (`env_latency_ms`) and finite-value checks as the worker's `EnvBatch`, and
    every step counted on the worker (its random first steps and pulls go by that count)."""

    def __init__(self, worker):
        self.worker, self.env = worker, worker.envs.envs[0]
        self.seconds, self.steps = worker.envs.seconds, 0

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        if self.seconds:
            time.sleep(self.seconds)
        out = self.env.step(action)
        check_finite(out[0], "observation", self.worker.cfg.env_id, self.worker.steps)
        self.steps += 1
        self.worker.steps += 1
        self.worker.since_pull += 1
        return out

    def __getattr__(self, name):            # action_space, observation_space, spec, ...
        return getattr(self.env, name)


class Rollout:
    """A SAC rollout worker's `run` from the attendee's `rollout(env, actor, follower, send,
    num_steps, send_every, seed)` (notebook 06's assemble exercise). The worker lends its parts:
    its env (`WorkerEnv`), its policy as `actor` (random first steps included), its follower
    (the attendee's `WeightsFollower` if given, else its own pull rule) and `send` into its
    outbox. The attendee's loop starts each call from `env.reset(seed)`, so a task plays whole
    time limits (`num_steps` rounded up to the env's): on Pendulum no episode is cut; where
    an episode ends early, the one under way when a task ends is cut there (its transitions
    are kept, its return is not reported)."""

    KEYS = {"obs", "action", "reward", "next_obs", "terminated"}

    def __init__(self, piece: Guarded, worker):
        if worker.cfg.num_envs != 1:
            raise ValueError(f"pieces: rollout plays one env per worker; num_envs is "
                             f"{worker.cfg.num_envs}: set num_envs=1")
        self.piece, self.worker, self.calls = piece, worker, 0
        self.env = WorkerEnv(worker)
        limit = self.env.spec.max_episode_steps if self.env.spec else None
        self.limit = limit or 1

    def send(self, transitions) -> None:
        if not isinstance(transitions, list) or not all(
                isinstance(t, dict) and set(t) == self.KEYS for t in transitions):
            raise self.piece.broke(f"send() takes a list of transitions, each a dict of "
                                   f"{sorted(self.KEYS)}")
        worker = self.worker
        worker.outbox += transitions
        self.sent += len(transitions)
        sent = worker.send()
        self.inserted = self.inserted if sent is None else sent

    def run(self, num_steps: int) -> dict:
        worker, self.inserted, self.sent = self.worker, None, 0
        steps = -(-num_steps // self.limit) * self.limit         # whole time limits
        seed = derive_seed(worker.seed, "rollout", self.calls)
        self.calls += 1
        before = self.env.steps
        follower = worker.follower or _OwnFollower(worker)
        returns = self.piece.call("rollout()", self.piece.cls, self.env, _Policy(worker),
                                  follower, self.send, steps, worker.cfg.send_every, seed)
        played = self.env.steps - before
        if played != steps:
            raise self.piece.broke(f"asked for {steps} steps it played {played}")
        if not isinstance(returns, list) or not all(math.isfinite(r) for r in returns):
            raise self.piece.broke(f"it returned {returns!r}, not a list of episode returns")
        if self.sent != played:
            raise self.piece.broke(f"it played {played} steps and sent {self.sent} "
                                   "transitions: one per step, each sent once")
        return worker.result(played, [float(r) for r in returns], self.inserted)


class _Policy:
    """The worker's policy as the attendee's loop asks for it: `act(obs[None])`."""

    def __init__(self, worker):
        self.act = worker.act


class _OwnFollower:
    """The worker's own pull rule behind the `step(episode_done)` of a WeightsFollower."""

    def __init__(self, worker):
        self.step = worker.follow
