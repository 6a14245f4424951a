"""The guards around notebook 06's pieces: SAC's maths in the learner, the attendee's
`squashed_log_prob`, `soft_target`, `actor_step` and `polyak` (SAC's maths slots,
`sac.SACSlots`), and the rollout workers' loop, their `rollout` (its `rollout` slot).

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
from course_lib.sac.learner import actor_loss, q_target, squashed_log_prob
from course_lib.teaching.pieces.guard import Guarded
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


class ActorStep:
    """The learner's `actor_step(actor, critic, optimizer, batch, alpha)`: the attendee's,
    checked on every call against the loss course_lib's would have taken on the same noise
    (their step draws a~ from torch's generator; the check replays that draw on a copy of the
    actor as it was before their step)."""

    def __init__(self, piece: Guarded):
        self.piece = piece

    def __call__(self, actor, critic, optimizer, batch, alpha):
        before = {name: p.detach().clone() for name, p in actor.named_parameters()}
        rng = torch.get_rng_state()
        got = self.piece.call("actor_step()", _with_grad(self.piece.cls, True), actor, critic,
                              optimizer, batch, alpha)
        after = torch.get_rng_state()
        torch.set_rng_state(rng)
        with torch.no_grad():                    # the actor as it was, on the same noise
            action, log_prob = torch.func.functional_call(actor, before, (batch["obs"],))
            expected = actor_loss(log_prob, *critic(batch["obs"], action), alpha)
        torch.set_rng_state(after)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise self.piece.broke(f"it returned {type(got).__name__}, not (loss, log_prob)")
        loss, got_log_prob = got
        if not isinstance(loss, float) or not math.isclose(loss, expected.item(), rel_tol=1e-4,
                                                           abs_tol=1e-3):
            raise self.piece.broke(f"its step's loss was {loss!r} where course_lib's, on the "
                                   f"same sample, is {expected.item():.6g}")
        _compare(self.piece, got_log_prob, log_prob, "as log_prob")
        return loss, got_log_prob.detach()


#: the SAC learner's slots: the attendee's piece (key) -> its guard
MATHS = {"squashed_log_prob": LogProb, "soft_target": SoftTarget, "actor_step": ActorStep,
         "polyak": Polyak}


class WorkerEnv:
    """The env a rollout worker lends the attendee's `rollout`: its own env, with the same
    wait per step (`env_latency_ms`) and finite-value checks as the worker's `EnvBatch`, every
    step counted on the worker (its random first steps go by that count), and each step's
    true end (`terminated`) kept, to check what the loop sends."""

    def __init__(self, worker):
        self.worker, self.env = worker, worker.envs.envs[0]
        self.seconds, self.steps, self.terminated = worker.envs.seconds, 0, []

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        if self.seconds:
            time.sleep(self.seconds)
        out = self.env.step(action)
        check_finite(out[0], "observation", self.worker.cfg.env_id, self.worker.steps)
        self.steps += 1
        self.worker.steps += 1
        self.terminated.append(bool(out[2]))
        return out

    def __getattr__(self, name):            # action_space, observation_space, spec, ...
        return getattr(self.env, name)


class Rollout:
    """A SAC rollout worker's `run` from the attendee's `rollout(env, actor, follower, send,
    num_steps, send_every, seed)` (notebook 06's assemble exercise; SAC's `rollout` slot). The
    worker lends its parts: its env (`WorkerEnv`), its policy as `actor` (random first steps
    included), its follower (the attendee's `WeightsFollower` if given, else course_lib's) and
    `send` into its outbox. The attendee's loop starts each call from `env.reset(seed)`, so a
    task plays whole time limits (`num_steps` rounded up to the env's): on Pendulum no episode
    is cut; where an episode ends early, the one under way when a task ends is cut there (its
    transitions are kept, its return is not reported). Each transition sent must carry its
    step's true end: `terminated`, not `truncated` (a time-limit end must bootstrap)."""

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
        flags = self.env.terminated[self.start + self.sent:][:len(transitions)]
        for j, (t, flag) in enumerate(zip(transitions, flags, strict=False)):
            if bool(t["terminated"]) != flag:
                raise self.piece.broke(
                    f"transition {self.sent + j} of this task says terminated="
                    f"{bool(t['terminated'])}, but its step's terminated was {flag} (store the "
                    "env's terminated: a time limit is not a true end)")
        self.worker.outbox.add(transitions)
        self.sent += len(transitions)

    def run(self, num_steps: int):
        worker, self.sent, self.start = self.worker, 0, len(self.env.terminated)
        steps = -(-num_steps // self.limit) * self.limit         # whole time limits
        seed = derive_seed(worker.seed, "rollout", self.calls)
        self.calls += 1
        before = self.env.steps
        returns = self.piece.call("rollout()", self.piece.cls, self.env, _Policy(worker),
                                  worker.follower, self.send, steps, worker.cfg.send_every,
                                  seed)
        played = self.env.steps - before
        if played != steps:
            raise self.piece.broke(f"asked for {steps} steps it played {played}")
        if not isinstance(returns, list) or not all(math.isfinite(r) for r in returns):
            raise self.piece.broke(f"it returned {returns!r}, not a list of episode returns")
        if self.sent != played:
            raise self.piece.broke(f"it played {played} steps and sent {self.sent} "
                                   "transitions: one per step, each sent once")
        self.env.terminated = []
        return worker.report(played, [float(r) for r in returns])


class _Policy:
    """The worker's policy as the attendee's loop asks for it: `act(obs[None])`."""

    def __init__(self, worker):
        self.act = worker.act
