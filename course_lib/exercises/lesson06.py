"""Checkers for notebook 06, parallel SAC."""

from __future__ import annotations

import math

import ray

from course_lib.exercises.core import _Failed, checker


@checker(6, "squashed_log_prob",
         "log N(u) minus the tanh correction, stable at the edges.")
def check_squashed_log_prob(squashed_log_prob):
    """squashed_log_prob(u, mean, log_std): log pi(tanh(u)) summed over the action dims,
    finite also where tanh(u) rounds to +-1."""
    import torch

    g = torch.Generator().manual_seed(0)
    mean, log_std = torch.randn(5, 2, generator=g), 0.5 * torch.randn(5, 2, generator=g)
    u = mean + log_std.exp() * torch.randn(5, 2, generator=g)
    normal = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).sum(-1)
    correction = torch.log(1 - torch.tanh(u) ** 2).sum(-1)
    got = torch.as_tensor(squashed_log_prob(u, mean, log_std), dtype=torch.float32)
    if got.shape != (5,):
        raise _Failed(f"for a batch of 5 two-dimensional actions it returned shape "
                      f"{tuple(got.shape)}, expected (5,).",
                      "Sum the per-dimension terms over the last axis: .sum(dim=-1).")
    if torch.allclose(got, normal, atol=1e-4):
        raise _Failed("it is the Gaussian log-density of u, without the tanh correction.",
                      "Subtract sum_i log(1 - tanh(u_i)^2): squashing changes the density.")
    if torch.allclose(got, normal + correction, atol=1e-4):
        raise _Failed("the tanh correction has the wrong sign.",
                      "log pi(a) = log N(u) - sum_i log(1 - tanh(u_i)^2).")
    if not torch.allclose(got, normal - correction, atol=1e-4):
        raise _Failed(f"it gave {got.numpy().round(3)}, expected "
                      f"{(normal - correction).numpy().round(3)}.",
                      "log N(u; m, s) = -((u - m)/s)^2 / 2 - log s - log(2 pi) / 2, "
                      "per dimension.")
    far = torch.tensor([[30.0]])
    value = torch.as_tensor(squashed_log_prob(far, torch.zeros(1, 1), torch.zeros(1, 1)))
    expected = -0.5 * 30.0**2 - 0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - 30.0)
    if not torch.isfinite(value).all() or abs(float(value) - expected) > 1e-3:
        raise _Failed(f"for u = 30, where tanh(u) rounds to 1, it gave {float(value):.2f} "
                      f"instead of {expected:.2f}.",
                      "Use the stable identity log(1 - tanh(u)^2) = "
                      "2 * (log 2 - u - softplus(-2u)) (torch.nn.functional.softplus).")


@checker(6, "soft_target",
         "min of the twin critics, entropy bonus, no bootstrap after a true end.")
def check_soft_target(soft_target):
    """soft_target(reward, terminated, next_q1, next_q2, next_log_prob, alpha, gamma)."""
    import torch

    reward = torch.tensor([1.0, 1.0, 0.0])
    terminated = torch.tensor([False, True, False])  # the last one: a time limit, bootstrap
    q1, q2 = torch.tensor([5.0, 5.0, 2.0]), torch.tensor([4.0, 6.0, 3.0])
    log_prob = torch.tensor([-1.0, -1.0, 0.5])
    alpha, gamma = 0.2, 0.9
    expected = reward + gamma * (~terminated) * (torch.min(q1, q2) - alpha * log_prob)
    got = torch.as_tensor(soft_target(reward, terminated, q1, q2, log_prob, alpha, gamma),
                          dtype=torch.float32)
    if got.shape != expected.shape:
        raise _Failed(f"it returned shape {tuple(got.shape)}, expected (3,).",
                      "Work element-wise on the (B,) tensors.")
    if abs(float(got[1]) - 1.0) > 1e-5:
        raise _Failed("it bootstraps from a terminal state.",
                      "Multiply the bootstrap term by (1 - terminated.float()).")
    if abs(float(got[0]) - float(reward[0] + gamma * (5.0 - alpha * -1.0))) < 1e-5:
        raise _Failed("it uses the larger of the two critics.",
                      "Take torch.min(next_q1, next_q2): the smaller estimate curbs "
                      "overestimation.")
    if abs(float(got[0]) - float(reward[0] + gamma * (4.0 + alpha * -1.0))) < 1e-5:
        raise _Failed("the entropy term has the wrong sign.",
                      "Subtract alpha * log pi(a'|s'): a likely action (high log pi) is "
                      "worth less.")
    if not torch.allclose(got, expected, atol=1e-5):
        raise _Failed(f"it gave {got.numpy().round(3)}, expected {expected.numpy().round(3)}.",
                      "y = r + gamma * (1 - terminated) * (min(Q1', Q2') - alpha * log pi).")


@checker(6, "polyak",
         "the target moves tau of the way towards the source.")
def check_polyak(polyak):
    """polyak(target, source, tau): theta' <- (1 - tau) theta' + tau theta, in place."""
    import torch

    target, source = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters(), strict=True):
            t.fill_(1.0)
            s.fill_(3.0)
    polyak(target, source, 0.25)
    weight = target.weight.detach()
    if torch.allclose(weight, torch.ones_like(weight)):
        raise _Failed("the target did not change.",
                      "Change the target's parameters in place, under torch.no_grad(): "
                      "t.mul_(1 - tau).add_(tau * s), or t.lerp_(s, tau).")
    if torch.allclose(weight, torch.full_like(weight, 2.5)):
        raise _Failed("it moved the target 1 - tau of the way (tau and 1 - tau swapped).",
                      "The target keeps (1 - tau) of itself and takes tau of the source.")
    if not torch.allclose(weight, torch.full_like(weight, 1.5)):
        raise _Failed(f"with target 1, source 3 and tau 0.25 the target became "
                      f"{weight.flatten()[0].item():.3f}, expected 1.5.",
                      "theta' <- (1 - tau) * theta' + tau * theta.")
    if not torch.allclose(source.weight.detach(), torch.full_like(weight, 3.0)):
        raise _Failed("it changed the source network.", "Only write to the target.")


class _RecordingServer:
    """Wraps a ParameterStoreActor handle: forwards `pull.remote` calls and records them, with the
    step the checker is at."""

    def __init__(self, server):
        self.server, self.step, self.pulls = server, None, []
        self.pull = self

    def remote(self, name, known_version=-1):
        self.pulls.append((self.step, name, known_version))
        return self.server.pull.remote(name, known_version)


@checker(6, "WeightsFollower",
         "the policy only, at every episode end and every pull_every steps, copied when newer.")
def check_weights_follower(follower_class):
    """WeightsFollower(ps, name, module, pull_every): a rollout worker's weight schedule. It
    pulls `name` when created, then after every episode end and after `pull_every` steps
    without a pull, passing the version it has so that unchanged weights are not copied."""
    import torch

    from course_lib.nets import get_weights
    from course_lib.param_server import ParameterStoreActor

    old, new, critic = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1), torch.nn.Linear(3, 1)
    server = ParameterStoreActor.remote()
    try:
        ray.get([server.push.remote("actor", get_weights(old)),
                 server.push.remote("critic", get_weights(critic))])
        recorder, module = _RecordingServer(server), torch.nn.Linear(2, 1)
        follower = follower_class(recorder, "actor", module, 4)
        if not torch.equal(module.weight, old.weight):
            raise _Failed("after it was created the module does not hold the server's weights.",
                          "Pull once in __init__: a worker must not play with random weights.")
        weights_at = {}
        for step, done in enumerate([False, False, True, False, False, False, False, False]):
            if step == 5:
                ray.get(server.push.remote("actor", get_weights(new)))
            recorder.step = step
            follower.step(done)
            weights_at[step] = module.weight.detach().clone()
    finally:
        ray.kill(server)
    names = {name for _, name, _ in recorder.pulls}
    if names != {"actor"}:
        raise _Failed(f"it pulled {sorted(names)}; a rollout worker needs only the policy.",
                      "Pull the name it was given (the actor); the critics stay with the "
                      "learner.")
    steps = [step for step, _, _ in recorder.pulls]
    if steps != [None, 2, 6]:
        raise _Failed(f"with an episode end at step 2 and pull_every=4 it pulled at steps "
                      f"{steps} (None: when created), expected [None, 2, 6].",
                      "Count steps since the last pull; pull when an episode ends or the count "
                      "reaches pull_every, then reset the count.")
    if [known for _, _, known in recorder.pulls][1:] != [1, 1]:
        raise _Failed(f"it passed known versions {[k for _, _, k in recorder.pulls]}, expected "
                      "[-1, 1, 1]: without its version the server sends the weights every time.",
                      "Keep the version pull_into returns and pass it to the next pull.")
    if not torch.equal(weights_at[6], new.weight):
        raise _Failed("after the pull at step 6 the module still holds the old weights.",
                      "pull_into(ps, name, module, version) loads newer weights into module.")
