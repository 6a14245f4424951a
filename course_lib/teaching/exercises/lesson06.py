"""Checkers for notebook 06, parallel SAC."""

from __future__ import annotations

import math

import ray

from course_lib.teaching.exercises.core import _Failed, checker


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


class _PrefersHalf:
    """A fixed pair of critics that both score the action a = 0.5 best: Q = -10 (a - 0.5)^2."""

    def __call__(self, obs, action):
        q = -10.0 * (action.squeeze(-1) - 0.5) ** 2
        return q, q + 0.1


@checker(6, "actor_step",
         "the critics score the policy's own reparameterised sample, so their gradient reaches "
         "the actor.")
def check_actor_step(actor_step):
    """Find the bug: actor_step(actor, critic, optimizer, batch, alpha) is one gradient step of
    the policy, L_pi = mean(alpha log pi(a~|s) - min(Q1, Q2)(s, a~)), a~ ~ pi(.|s); it returns
    (L_pi, log pi(a~|s) detached), as `sac.actor_step` does."""
    import copy

    import torch

    from course_lib.sac.learner import SquashedGaussianActor, actor_loss

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    batch = {"obs": torch.randn(64, 3, generator=g),
             "action": torch.rand(64, 1, generator=g) * 2 - 1}    # the replay's actions
    actor, critic = SquashedGaussianActor(3, 1, (32, 32)), _PrefersHalf()
    reference = copy.deepcopy(actor)
    torch.manual_seed(2)
    got = actor_step(actor, critic, torch.optim.SGD(actor.parameters(), lr=1e-2), batch, 0.05)
    torch.manual_seed(2)
    new_action, log_prob = reference(batch["obs"])
    expected = actor_loss(log_prob, *critic(batch["obs"], new_action), 0.05)
    optimizer = torch.optim.SGD(reference.parameters(), lr=1e-2)
    optimizer.zero_grad()
    expected.backward()
    optimizer.step()
    same = all(torch.allclose(a, b, atol=1e-6) for a, b in
                zip(actor.parameters(), reference.parameters(), strict=True))
    if not same:
        start = torch.tanh(reference.mean(reference.trunk(batch["obs"]))).mean().item()
        optimizer = torch.optim.Adam(actor.parameters(), lr=1e-2)
        for _ in range(60):
            actor_step(actor, critic, optimizer, batch, 0.05)
        end = actor(batch["obs"], deterministic=True)[0].mean().item()
        raise _Failed(f"against critics that score a = 0.5 best, 60 steps moved the policy's "
                      f"mean action from {start:.2f} to {end:.2f}, not towards 0.5.",
                      "Print the policy's mean action after each of a few steps against these "
                      "critics: its loss falls, yet the action does not move where the critics "
                      "point. Through which tensors can the loss's gradient reach the actor?",
                      line="`critic(obs, batch[\"action\"])` scores the replay's actions, "
                      "which do not depend on the actor: score its own sample, "
                      "`critic(obs, new_action)`.")
    loss = got[0] if isinstance(got, tuple) and len(got) == 2 else got
    if not isinstance(loss, float) or abs(loss - expected.item()) > 1e-4:
        raise _Failed(f"it returned the loss {loss!r}, expected {expected.item():.4f}.",
                      "Return loss.item(), the loss of the step it took, and log_prob.")
    if not (isinstance(got[1], torch.Tensor) and torch.allclose(got[1], log_prob.detach(),
                                                                 atol=1e-5)):
        raise _Failed("it did not return log pi(a~|s) of its sample as its second value.",
                      "Return (loss.item(), log_prob.detach()): the temperature's update "
                      "uses the log-probability.")


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


class _Recorder:
    """Stands in for a part of a rollout worker and records what the loop did with it."""

    def __init__(self, actor=None, env=None):
        self.actor, self.env, self.calls = actor, env, []

    def act(self, obs):                     # the policy: its sampled actions, recorded
        actions = self.actor.act(obs)
        self.calls.append(actions.copy())
        return actions

    def step(self, item):                   # the env's torque, or a follower's episode_done
        self.calls.append(item)
        return self.env.step(item) if self.env is not None else None

    def __call__(self, batch):              # send
        self.calls.append(list(batch))

    def __getattr__(self, name):            # the env's action_space, reset, ...
        return getattr(self.env, name)


def _ends_once(at: int):
    """Pendulum with a time limit of 100 steps whose first episode ends for real (terminated,
    as if the pendulum fell off) at its `at`-th step."""
    import gymnasium as gym

    class EndsOnce(gym.Wrapper):
        episodes = t = 0

        def reset(self, **kwargs):
            self.episodes, self.t = self.episodes + 1, 0
            return self.env.reset(**kwargs)

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.t += 1
            return obs, reward, terminated or (self.episodes, self.t) == (1, at), truncated, info

    return EndsOnce(gym.make("Pendulum-v1", max_episode_steps=100))


@checker(6, "rollout",
         "the policy's action stored, the env's torque played, true ends stored and time limits "
         "bootstrapped, sent in lists of send_every, the follower told of every step.")
def check_rollout(rollout):
    """rollout(env, actor, follower, send, num_steps, send_every, seed): a rollout worker's
    loop, assembled from the policy's `act`, `sac.scale_action`, the env, `send` and the
    follower. The env's first episode ends for real at step 70, its second at its time limit
    (step 170): the stored `terminated` flags must say which is which."""
    import numpy as np
    import torch

    from course_lib.sac.learner import SquashedGaussianActor, scale_action

    torch.manual_seed(0)
    env = _Recorder(env=_ends_once(70))
    actor = _Recorder(actor=SquashedGaussianActor(3, 1, (16,)))
    follower, send = _Recorder(), _Recorder()
    returns = rollout(env, actor, follower, send, 230, 50, 7)
    env.env.close()
    sizes = [len(batch) for batch in send.calls]
    if sizes != [50, 50, 50, 50, 30]:
        raise _Failed(f"230 steps with send_every=50 were sent in lists of {sizes}, expected "
                      "[50, 50, 50, 50, 30].",
                      "Send the outbox when it holds send_every transitions, empty it, and send "
                      "what is left after the loop.")
    sent = [t for batch in send.calls for t in batch]
    played = np.array(env.calls).reshape(230, -1)
    acted = np.concatenate(actor.calls)
    stored = np.array([t["action"] for t in sent]).reshape(230, -1)
    if len(acted) != 230 or not np.allclose(played, scale_action(acted, -2.0, 2.0)):
        raise _Failed("the env was not stepped with the policy's actions scaled to its bounds.",
                      "a = actor.act(obs[None])[0], then env.step(sac.scale_action(a, low, "
                      "high)).")
    if not np.allclose(stored, acted):
        raise _Failed("the stored actions are not the policy's (in [-1, 1]): the critics would "
                      "learn Q of the env's torque while the actor asks them about tanh(u).",
                      "Store the policy's action; only the env gets the scaled one.")
    ends = [i for i, t in enumerate(sent) if bool(t["terminated"])]
    if 169 in ends:
        raise _Failed("it stored a time-limit end as terminated.",
                      "Store `terminated` only: a truncated step still bootstraps.")
    if 69 not in ends:
        raise _Failed("the episode that ended for real at step 70 was stored with "
                      "terminated=False: the critics would bootstrap past a true end.",
                      "Store the `terminated` that env.step returned for that step.")
    if ends != [69]:
        raise _Failed(f"it stored terminated=True at steps {[i + 1 for i in ends if i != 69]}, "
                      "where no episode ended.",
                      "Store the `terminated` that env.step returned for that step.")
    if follower.calls != [False] * 69 + [True] + [False] * 99 + [True] + [False] * 60:
        raise _Failed("the follower was not told of every step, with episode_done True only "
                      "at the episodes' ends (steps 70 and 170).",
                      "Call follower.step(terminated or truncated) after every env step.")
    starts = (70, 170)
    if any(np.allclose(sent[i]["obs"], sent[i - 1]["next_obs"]) for i in starts) or not all(
            np.allclose(sent[i + 1]["obs"], sent[i]["next_obs"]) for i in range(229)
            if i + 1 not in starts):
        raise _Failed("the observations do not chain: each step must start where the last "
                      "ended, and a new episode from env.reset().",
                      "obs = next_obs after a step; obs = env.reset()[0] after an end.")
    finished = [float(sum(t["reward"] for t in sent[a:b])) for a, b in ((0, 70), (70, 170))]
    if len(returns) != 2 or not np.allclose(returns, finished, atol=1e-3):
        raise _Failed(f"it returned {returns}, expected the two finished episodes' returns "
                      f"{np.round(finished, 1).tolist()}.",
                      "Sum the rewards of each episode; append at its end.")
