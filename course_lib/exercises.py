"""Checkers for the notebook exercises.

Convention (every notebook): an exercise cell tagged `exercise` holds a TODO stub; a hidden cell
tagged `solution` holds the worked answer; a cell tagged `check` calls one `check_...` function
below. The attendee edition (scripts/notebooks.py) turns each solution into a collapsed Markdown
block after its check, so Run All never runs it.

A checker tests behaviour (results, ordering, calls made, time taken), never source text, and
never raises: it returns a `CheckResult` that shows as a green tick, or as a red cross with what
is wrong and a hint. Each is declared once with `@checker(notebook, exercise, success)` and
listed in `CHECKERS`, notebook by notebook.
"""

from __future__ import annotations

import contextlib
import functools
import html
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import ray

from course_lib.errors import first_line


@dataclass
class CheckResult:
    exercise: str
    passed: bool
    message: str
    hint: str = ""

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        if self.passed:
            return f"✅ {self.exercise}: {self.message}"
        return f"❌ {self.exercise}: {self.message}\n   Hint: {self.hint}"

    def _repr_html_(self) -> str:
        color = "#1a7f37" if self.passed else "#cf222e"
        text = html.escape(repr(self)).replace("\n", "<br>")
        return f"<div style='color:{color};font-family:monospace'>{text}</div>"


class _Failed(Exception):
    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message, self.hint = message, hint


CHECKERS: dict[str, Callable[..., CheckResult]] = {}
"""Every checker by function name, in the order the notebooks use them (notebook 01 first)."""


def checker(notebook: int, exercise: str, success: str):
    """Declare a checker: the decorated function raises `_Failed` on the first mistake it finds
    and returns normally when the attendee's code is right.

    The wrapper turns that into a `CheckResult` and never raises, so Run All goes on past an
    unfinished exercise: `_Failed` gives its message and hint, `NotImplementedError` (a TODO
    stub, also when raised inside a Ray task or actor) says "not implemented yet", and any other
    exception from the attendee's code is reported as one line.
    """
    def declare(body: Callable[..., None]) -> Callable[..., CheckResult]:
        @functools.wraps(body)
        def check(*args, **kwargs) -> CheckResult:
            try:
                body(*args, **kwargs)
            except _Failed as fail:
                return CheckResult(exercise, False, fail.message, fail.hint)
            except NotImplementedError:
                return CheckResult(exercise, False, "not implemented yet.",
                                   "Fill in the exercise cell where it says TODO, then run it "
                                   "again.")
            except Exception as err:  # the attendee's code raised: report it as one line
                cause = getattr(err, "cause", None) or err
                return CheckResult(exercise, False, f"your code raised {first_line(cause)}",
                                   "Run the exercise cell on a tiny input and read the error.")
            return CheckResult(exercise, True, success)

        check.notebook, check.exercise = notebook, exercise
        CHECKERS[body.__name__] = check
        return check
    return declare


@contextlib.contextmanager
def _forbid_ray_get(hint: str):
    """Make any `ray.get` inside the block fail with `hint`."""
    original = ray.get

    def refuse(*args, **kwargs):
        raise _Failed("it calls ray.get, which waits for results before it has to.", hint)

    ray.get = refuse
    try:
        yield
    finally:
        ray.get = original


# ---------------------------------------------------------------- notebook 01: Ray core

@checker(1, "tree_sum",
         "one future for the whole sum, no waiting in between.")
def check_tree_sum(tree_sum):
    """tree_sum(refs) must return ONE ObjectRef of the sum, built from add tasks, no ray.get."""
    for n in (1, 2, 5, 8):
        refs = [ray.put(i) for i in range(n)]
        with _forbid_ray_get("Pass ObjectRefs straight into add.remote(...): Ray resolves "
                             "them for you, and only the final ray.get waits."):
            out = tree_sum(refs)
        if not isinstance(out, ray.ObjectRef):
            raise _Failed(f"for {n} inputs it returned {type(out).__name__}, not an ObjectRef.",
                          "Return the last reference itself; the caller calls ray.get.")
        if ray.get(out) != sum(range(n)):
            raise _Failed(f"for inputs 0..{n - 1} the sum came out as {ray.get(out)}, "
                          f"expected {sum(range(n))}.",
                          "With an odd count, carry the last reference to the next round.")


@ray.remote
def _sleep_then_return(seconds: float, value):
    time.sleep(seconds)
    return value


@checker(1, "as_completed",
         "results arrive in the order tasks finish.")
def check_as_completed(as_completed):
    """as_completed(refs) must yield every value, fastest first (ray.wait, not list order)."""
    slow = _sleep_then_return.remote(1.5, "slow")
    fast = [ray.put(i) for i in range(3)]
    got = list(as_completed([slow, *fast]))
    if sorted(map(str, got)) != sorted(["slow", "0", "1", "2"]):
        raise _Failed(f"it yielded {got!r}; expected each of 'slow', 0, 1, 2 exactly once.",
                      "Remove each finished reference from the pending list.")
    if got[0] == "slow":
        raise _Failed("it waited for the slow task first, in list order.",
                      "Use ready, pending = ray.wait(pending, num_returns=1).")


@checker(1, "RunningMean",
         "each actor keeps its own state, calls run in order.")
def check_running_mean(actor_class):
    """RunningMean must be a Ray actor whose add(x) calls update a private mean."""
    if not hasattr(actor_class, "remote"):
        raise _Failed("it is a plain class, not a Ray actor.",
                      "Decorate the class with @ray.remote and create it with .remote().")
    first, second = actor_class.remote(), actor_class.remote()
    for x in range(1, 11):
        first.add.remote(x)
    second.add.remote(100.0)
    means = ray.get([first.mean.remote(), second.mean.remote()])
    if means != [5.5, 100.0]:
        raise _Failed(f"after adding 1..10 to one actor and 100 to another, the means were "
                      f"{means}, expected [5.5, 100.0].",
                      "Keep the count and the total in self, set in __init__.")


# ---------------------------------------------------------------- notebook 02: parallel rollouts

@checker(2, "reward_to_go",
         "G_t = r_t + gamma * G_{t+1}, computed backwards.")
def check_reward_to_go(reward_to_go):
    """reward_to_go(rewards, gamma) must match G_t = r_t + gamma * G_{t+1} for one episode."""
    import numpy as np

    rewards = np.array([1.0, 0.0, 2.0, 1.0])
    expected = np.array([1 + 0.5 * 0 + 0.25 * 2 + 0.125 * 1, 0 + 0.5 * 2 + 0.25 * 1,
                         2 + 0.5 * 1, 1.0])
    got = np.asarray(reward_to_go(rewards, 0.5), dtype=float)
    if got.shape != expected.shape:
        raise _Failed(f"it returned shape {got.shape}, expected {expected.shape}.",
                      "Return one value per step.")
    if np.allclose(got, np.cumsum(rewards[::-1])[::-1]):
        raise _Failed("it ignores gamma (that is the undiscounted sum).",
                      "Multiply the running sum by gamma before adding r_t.")
    if not np.allclose(got, expected):
        raise _Failed(f"for rewards [1, 0, 2, 1] and gamma 0.5 it gave {np.round(got, 3)}, "
                      f"expected {expected}.",
                      "Loop t from the last step backwards: G_t = r_t + gamma * G_{t+1}.")


@checker(2, "collect",
         "one ray.put, one batch per worker.")
def check_collect(collect):
    """collect(workers, policy, steps) must ray.put the weights once and sample on every worker."""
    import gymnasium as gym

    from course_lib import pg

    workers = [pg.RolloutWorker.remote("CartPole-v1", (16,), 0.99, seed) for seed in (1, 2)]
    policy = pg.make_policy(gym.make("CartPole-v1"), (16,))
    puts, original_put = [], ray.put

    def counting_put(value, *args, **kwargs):
        puts.append(value)
        return original_put(value, *args, **kwargs)

    ray.put = counting_put
    try:
        batches = collect(workers, policy, 20)
    finally:
        ray.put = original_put
        for w in workers:
            ray.kill(w)
    if not isinstance(batches, list) or len(batches) != 2:
        raise _Failed(f"it returned {type(batches).__name__}, expected a list of 2 batches.",
                      "ray.get a list of worker.sample.remote(...) references.")
    if any(len(b["reward"]) < 20 for b in batches):
        raise _Failed("a batch has fewer than `steps` steps.",
                      "Pass `steps` as the second argument of sample.remote.")
    if len(puts) != 1:
        raise _Failed(f"it called ray.put {len(puts)} times; the weights should go into the "
                      "object store once.",
                      "Call ray.put(get_weights(policy)) once, before the loop over workers.")


# ---------------------------------------------------------------- notebook 03: parameter server

@checker(3, "average_gradients",
         "the element-wise mean of every entry.")
def check_average_gradients(average_gradients):
    """average_gradients(list of {name: array}) must return {name: element-wise mean}."""
    import numpy as np

    rng = np.random.default_rng(0)
    grads = [{"w": rng.normal(size=(3, 2)), "b": rng.normal(size=2)} for _ in range(4)]
    got = average_gradients(grads)
    if not isinstance(got, dict) or set(got) != {"w", "b"}:
        raise _Failed(f"it returned {type(got).__name__} with keys "
                      f"{sorted(got) if isinstance(got, dict) else '-'}; expected keys b, w.",
                      "Build the result with one entry per name of the first dict.")
    for name in ("w", "b"):
        expected = sum(g[name] for g in grads) / len(grads)
        if np.shape(got[name]) != expected.shape or not np.allclose(got[name], expected):
            raise _Failed(f"entry {name!r} is not the mean over the workers.",
                          "np.mean([g[name] for g in grads_list], axis=0) averages "
                          "element by element.")


@checker(3, "CachedWeights",
         "copies only when the version changed.")
def check_cached_weights(cached_class):
    """CachedWeights.get must return the newest weights and copy only when the version changed."""
    import numpy as np

    from course_lib.param_server import ParameterServer

    ps = ParameterServer.remote()
    ray.get(ps.push.remote("net", {"w": np.zeros(3, np.float32)}))
    cache = cached_class()
    first = cache.get(ps, "net")
    second = cache.get(ps, "net")
    if first is None or not np.array_equal(first["w"], np.zeros(3)):
        raise _Failed("the first get did not return the pushed weights.",
                      "Start with version -1 so the first pull always copies.")
    if second is not first:
        raise _Failed("the second get copied the weights again although nothing changed.",
                      "Keep the weights you got and return them when the pull gives None.")
    ray.get(ps.push.remote("net", {"w": np.ones(3, np.float32)}))
    third = cache.get(ps, "net")
    if third is None or not np.array_equal(third["w"], np.ones(3)):
        raise _Failed("after a new push, get still returned the old weights.",
                      "Remember the version from each pull and pass it as known_version.")
    ray.kill(ps)


# ---------------------------------------------------------------- notebook 04: replay

@checker(4, "td_target",
         "bootstraps after a time limit, not after a terminal state.")
def check_td_target(td_target):
    """td_target(reward, discount, terminated, next_q): bootstrap unless truly terminated."""
    import numpy as np

    reward = np.array([1.0, 1.0, 0.5])
    discount = np.array([0.99, 0.99**3, 0.99**2])
    terminated = np.array([False, True, False])     # the last one was truncated: bootstrap
    next_q = np.array([10.0, 10.0, 4.0])
    expected = reward + discount * (1 - terminated) * next_q
    got = np.asarray(td_target(reward, discount, terminated, next_q), dtype=float)
    if got.shape != expected.shape:
        raise _Failed(f"it returned shape {got.shape}, expected {expected.shape}.",
                      "Compute it element-wise on the arrays.")
    if np.isclose(got[1], expected[1] + discount[1] * next_q[1]):
        raise _Failed("it bootstraps from a terminal state.",
                      "Multiply the bootstrap term by (1 - terminated).")
    if not np.allclose(got, expected):
        raise _Failed(f"it gave {np.round(got, 3)}, expected {np.round(expected, 3)}.",
                      "target = reward + discount * (1 - terminated) * next_q; the discount "
                      "already holds gamma**k.")


@checker(4, "importance_weights",
         "(N P)^-beta, scaled so the largest is 1.")
def check_importance_weights(importance_weights):
    """importance_weights(probs, beta) = (N P)^-beta normalised by the largest weight."""
    import numpy as np

    probs = np.array([0.5, 0.25, 0.125, 0.125])
    for beta in (0.4, 1.0):
        expected = (len(probs) * probs) ** -beta
        expected = expected / expected.max()
        got = np.asarray(importance_weights(probs, beta), dtype=float)
        if got.shape != probs.shape:
            raise _Failed(f"it returned shape {got.shape}, expected {probs.shape}.",
                          "One weight per sampled probability.")
        if not np.allclose(got, expected):
            raise _Failed(f"for P={probs.tolist()} and beta={beta} it gave "
                          f"{np.round(got, 3)}, expected {np.round(expected, 3)}.",
                          "w = (N * P) ** -beta, then divide by w.max() so that w <= 1.")


@checker(4, "stratified_targets",
         "one uniform draw per segment.")
def check_stratified_targets(stratified_targets):
    """stratified_targets(total, k, rng): one uniform draw in each of k equal segments."""
    import numpy as np

    got = np.asarray(stratified_targets(10.0, 5, np.random.default_rng(0)), dtype=float)
    if got.shape != (5,):
        raise _Failed(f"it returned shape {got.shape}, expected (5,).",
                      "One target per segment.")
    segment = np.floor(got / 2.0)
    if not np.array_equal(segment, np.arange(5)):
        raise _Failed(f"targets {np.round(got, 2)} are not one per segment [0,2), [2,4), ...",
                      "Target i = (i + u_i) * total / k with u_i uniform in [0, 1).")
    again = np.asarray(stratified_targets(10.0, 5, np.random.default_rng(1)), dtype=float)
    if np.allclose(got, again):
        raise _Failed("the targets do not depend on the random generator.",
                      "Draw u with rng.random(k).")


# ---------------------------------------------------------------- notebook 05: Ape-X

@checker(5, "dueling_q",
         "Q = V + A - mean A, row by row.")
def check_dueling_q(dueling_q):
    """dueling_q(value (B, 1), advantages (B, A)) = V + A - mean_a A: the dueling head."""
    import torch

    value = torch.tensor([[1.0], [-2.0]])
    advantages = torch.tensor([[1.0, 2.0, 6.0], [0.0, 0.0, 3.0]])
    expected = value + advantages - advantages.mean(dim=1, keepdim=True)
    got = torch.as_tensor(dueling_q(value, advantages), dtype=torch.float32)
    if got.shape != expected.shape:
        raise _Failed(f"it returned shape {tuple(got.shape)}, "
                      f"expected {tuple(expected.shape)}.",
                      "V has shape (B, 1) and broadcasts over the A actions.")
    if torch.allclose(got, value + advantages):
        raise _Failed("it adds V and A but does not subtract the mean advantage.",
                      "Without it V and A are not identifiable: subtract "
                      "advantages.mean(dim=1, keepdim=True).")
    if torch.allclose(got, value + advantages - advantages.max(dim=1, keepdim=True).values):
        raise _Failed("it subtracts the max advantage; Ape-X (like Wang et al.) uses the mean.",
                      "Use advantages.mean(dim=1, keepdim=True).")
    if not torch.allclose(got, expected):
        raise _Failed(f"it gave {got.tolist()}, expected {expected.tolist()}.",
                      "Q = V + A - mean over actions of A, per row.")


@checker(5, "explorer_epsilons",
         "explorer 0 explores most, the last one least.")
def check_explorer_epsilons(explorer_epsilons):
    """explorer_epsilons(n, eps, alpha): Ape-X's eps_i = eps^(1 + alpha i / (n - 1)) for each i."""
    import numpy as np

    from course_lib.dqn import epsilon_for_explorer

    for n in (1, 2, 4, 8):
        expected = [epsilon_for_explorer(i, n, 0.4, 7.0) for i in range(n)]
        got = np.asarray(explorer_epsilons(n, 0.4, 7.0), dtype=float)
        if got.shape != (n,):
            raise _Failed(f"for n={n} it returned {got.size} values, expected {n}.",
                          "One epsilon per explorer, i = 0 .. n-1.")
        if n == 1 and not np.isclose(got[0], 0.4):
            raise _Failed(f"a single explorer got {got[0]:.4g}, expected eps = 0.4.",
                          "With n = 1 the formula divides by zero: give the one explorer "
                          "eps itself.")
        if not np.allclose(got, expected):
            raise _Failed(f"for n={n} it gave {np.round(got, 4).tolist()}, expected "
                          f"{np.round(expected, 4).tolist()}.",
                          "eps ** (1 + alpha * i / (n - 1)) for i in range(n).")


@checker(5, "updates_allowed",
         "updates * batch / inserted stays at the replay ratio.")
def check_updates_allowed(updates_allowed):
    """updates_allowed(inserted, replay_ratio, batch_size): the replay-ratio throttle."""

    cases = [(1_000, 8.0, 64, 125), (1_000, 16.0, 64, 250), (100, 1.0, 64, 1),
             (63, 1.0, 64, 0), (0, 8.0, 64, 0)]
    for inserted, ratio, batch, expected in cases:
        got = updates_allowed(inserted, ratio, batch)
        if not isinstance(got, int):
            raise _Failed(f"it returned {type(got).__name__} {got!r}, expected an int.",
                          "A number of updates is a whole number: round down with int().")
        if got != expected:
            raise _Failed(f"for {inserted} inserted transitions, ratio {ratio:g} and batch "
                          f"{batch} it allowed {got} updates, expected {expected}.",
                          "updates * batch_size / inserted = replay_ratio, solved for "
                          "updates and rounded down.")


# ---------------------------------------------------------------- notebook 06: parallel SAC

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


# ---------------------------------------------------------------- notebook 07: RLlib side by side

@checker(7, "eval_return",
         "the greedy evaluation return, NaN when there is none.")
def check_eval_return(eval_return):
    """eval_return(result): result["evaluation"]["env_runners"]["episode_return_mean"], NaN
    when the iteration ran no evaluation or finished no episode."""
    import math

    full = {"env_runners": {"episode_return_mean": 20.0},
            "evaluation": {"env_runners": {"episode_return_mean": 200.0}}}
    got = eval_return(full)
    if got != 200.0:
        raise _Failed(f"it returned {got!r} for a result whose evaluation return is 200.",
                      'Read result["evaluation"]["env_runners"]["episode_return_mean"]; '
                      'result["env_runners"] holds the exploring (training) episodes.')
    for missing in ({"env_runners": {}}, {"evaluation": {"env_runners": {}}}):
        got = eval_return(missing)
        if not (isinstance(got, float) and math.isnan(got)):
            raise _Failed(f"it returned {got!r} for {missing}, expected nan.",
                          "Use .get(...) with {} at each level and float('nan') at the end.")


@checker(7, "time_to_goal",
         "the first row at the goal, None when never reached.")
def check_time_to_goal(time_to_goal):
    """time_to_goal(history, goal): (time_s, env_steps) of the first row reaching goal, else
    None; a NaN return (no evaluation yet) never counts."""
    nan = float("nan")

    history = [{"time_s": 1.0, "env_steps": 100, "eval_return": nan},
               {"time_s": 2.0, "env_steps": 200, "eval_return": 480.0},
               {"time_s": 3.0, "env_steps": 300, "eval_return": 500.0}]
    got = time_to_goal(history, 475.0)
    if got is None or tuple(got) != (2.0, 200):
        raise _Failed(f"it returned {got!r}, expected (2.0, 200): the first row at the goal.",
                      "Loop over the rows in order and return at the first hit.")
    if time_to_goal(history, 501.0) is not None:
        raise _Failed("it found a goal that no row reaches.", "Return None after the loop.")


# ---------------------------------------------------------------- notebook 08: the cluster

@checker(8, "job_entrypoint",
         "a list of arguments the command line accepts.")
def check_job_entrypoint(job_entrypoint):
    """job_entrypoint(algo, env_id, num_workers, stop) -> the argv list of the training job."""
    import json

    from course_lib import cli

    stop = {"eval_return": 475, "time_s": 600}
    argv = job_entrypoint("apex", "CartPole-v1", 8, stop)
    if isinstance(argv, str):
        raise _Failed("it returned one string; Ray Jobs (and subprocess) want a list of "
                      "arguments.",
                      "Return a list: ['python', '-m', 'course_lib', 'train', ...]. A single "
                      "string would need shell quoting around the JSON.")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise _Failed(f"it returned {argv!r}; expected a list of strings.",
                      "Numbers too: str(num_workers).")
    if argv[:4] != ["python", "-m", "course_lib", "train"]:
        raise _Failed(f"it starts with {argv[:4]}, expected "
                      "['python', '-m', 'course_lib', 'train'].",
                      "The job runs the workshop's command line with the cluster's Python.")
    try:
        args = cli.build_parser().parse_args(argv[3:])
    except (cli.UsageError, SystemExit) as err:
        raise _Failed(f"the command line refuses it: {err}",
                      "Options: --algo, --env, --num-workers, --stop.") from None
    got = (args.algo, args.env, args.num_workers)
    if got != ("apex", "CartPole-v1", 8):
        raise _Failed(f"algo, env, workers parsed as {got}, expected "
                      "('apex', 'CartPole-v1', 8).",
                      "Pass each value after its option.")
    if json.loads(args.stop) != stop:
        raise _Failed(f"--stop parsed as {args.stop!r}.",
                      "Write the dict as JSON with json.dumps(stop).")


@checker(8, "make_safe",
         "no stopped nodes left behind, dashboard closed to the internet.")
def check_make_safe(make_safe):
    """make_safe(config) fixes what cluster.safety_problems flags, keeping the node types."""
    import copy
    from pathlib import Path

    from course_lib import cluster

    base = cluster.load_cluster_yaml(Path(__file__).parents[1] / "cluster" / "aws.yaml")
    unsafe = copy.deepcopy(base)
    unsafe["provider"]["cache_stopped_nodes"] = True
    unsafe["provider"]["security_group"] = {"IpPermissions": [
        {"FromPort": 22, "ToPort": 22, "IpProtocol": "tcp",
         "IpRanges": [{"CidrIp": "0.0.0.0/0"}]},
        {"FromPort": 8265, "ToPort": 8265, "IpProtocol": "tcp",
         "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]}
    fixed = make_safe(copy.deepcopy(unsafe))
    if not isinstance(fixed, dict):
        raise _Failed(f"it returned {type(fixed).__name__}, expected the config dict.",
                      "Change the dict and return it.")
    problems = cluster.safety_problems(fixed)
    if problems:
        raise _Failed(f"still unsafe: {problems[0]}",
                      "Two fixes: provider.cache_stopped_nodes = False, and no rule that "
                      "opens port 8265 to 0.0.0.0/0 (keep the SSH rule).")
    if set(fixed.get("available_node_types", {})) != set(base["available_node_types"]):
        raise _Failed("it changed the node types.", "Fix the provider section only.")
    rules = (fixed["provider"].get("security_group") or {}).get("IpPermissions") or []
    if not any(rule.get("FromPort") == 22 for rule in rules):
        raise _Failed("it removed the SSH rule too: the launcher, `ray dashboard` and "
                      "`ray rsync-down` all need SSH.",
                      "Keep the rule for port 22; drop only the one for 8265.")
