"""How an evaluation is scored, and when a run may say "reached": when a lower confidence bound
clears the goal, at a level the run spends across all the times it tests its goal, so that
looking again and again cannot fool it.

    evaluation_score(cfg, returns)                  -> (eval_return, eval_episodes)
    evaluation_columns(cfg, returns, goal_tests)    -> the row's eval_return, eval_episodes,
                                                       eval_lower (the stop reads it), goal_tests

The problem: a run evaluates a snapshot every iteration, and the old rule stopped at the first
snapshot whose fresh confirming episodes averaged at least the goal. Each confirmation is an
honest look, but a run takes many looks, and stopping at the first one over the goal picks a
lucky one: a policy that has plateaued 2% under the goal (CartPole 465 against 475, 40 of
spread per episode) passes the 10 + 20 episode check about one look in thirty, so over a run
of fifty looks it is "reached" in most runs (`bench/stop_rule.py` measures it beside this
rule).

The rule. A run's k-th *goal test* (a snapshot whose confirming episodes were played: see
`evaluation_columns`) passes when the one-sided lower confidence bound of the
snapshot's true mean return clears the goal:

    mean - t(1 - alpha_k, n - 1) * sd / sqrt(n)  >=  goal,   alpha_k = ALPHA / (k (k + 1))

with n the confirming episodes, sd their standard deviation, t Student's quantile. The levels
sum to ALPHA (1/2 + 1/6 + 1/12 + ... = 1), so a run all of whose snapshots are below the goal
says "reached" with probability at most ALPHA, however many times it looks: the k-th test's
episodes are fresh, played after the decision to test was made (by the first `eval_episodes`,
which choose *whether* to test and never count in it), so each test on its own errs with
probability at most alpha_k. Looking is free; only testing spends, and a run tests only when
its first episodes already meet the goal.

Why this rule and not the others that fix repeated looks:
- a fixed margin (the mean must clear the goal by z standard errors) still errs a fixed
  amount per test: enough looks at a plateau just under the goal pass it eventually;
- a Bonferroni budget (ALPHA / M per test) needs M, the number of tests, before the run
  starts, and a run's looks depend on its clock; a run past M could never stop;
- a sequential probability ratio test needs a known spread and a zone of indifference around
  the goal, and it is one test: run again at every snapshot, its errors add up as before;
- the spending here needs none of these: any number of tests, the spread measured, and the
  first tests (when a learning policy usually crosses the goal) get most of the level.

The cost: the bound asks for more than the mean as tests accumulate, so a policy just over
the goal needs some luck or more looks (with 20 episodes the bound sits 2.4 sd / sqrt(20)
under the mean at the first test, 4.2 at the tenth). Policies that converge (CartPole: most
episodes at 500, sd near 0) pass at their first test. `bench/stop_rule.py` measures the extra
looks and evaluation episodes a run pays.

Few episodes and no spread: the bound needs 2 episodes at least (one says nothing about the
spread; with fewer the bound is minus infinity, and `TrainerConfig.check` refuses a goal tested
on fewer). When every confirming episode returns the same (20 CartPole episodes at the 500
cap) the measured spread is 0, and a bound from it would be that return whatever the test's
level: no protection against looking again. A policy that falls one episode in seven shows 20
flawless episodes 4% of the time, so `trainer.evaluation_request` then plays
`confirm_episodes` more (40 flawless: 0.15%), and the bound is taken on all of them. A policy
that fails rarely and badly can still pass: one fall in forty episodes understates a
one-in-seven failure rate, and the bound reads only the spread it saw (`bench/stop_rule.py`'s
stress rows measure how often; more `confirm_episodes` help, less than in proportion).

What a row reports: `eval_return` is the mean of the confirming episodes, an unbiased estimate
of that snapshot's mean (they were not used to select it), and `eval_lower` the bound the stop
reads. The stopping row is selected by its test, so there the mean leans high and the bound
low, and the true mean usually lies between them (CartPole 2% over the goal: the mean about 8
above the truth, the bound about 4 under; `bench/stop_rule.py`'s "score - truth" columns);
`bench/goal_holds.py` re-scores the saved weights on episodes no test saw.
"""

from __future__ import annotations

import functools
import math

import numpy as np

#: the chance that a run none of whose snapshots meets the goal says "reached", over all of
#: its goal tests: one run in forty. A policy right at the goal's edge is "reached" about that
#: often, so the 5% the course promises for a plateau under the goal holds with room to spare
ALPHA = 0.025


def level_at(test: int) -> float:
    """The level the run's `test`-th goal test spends (1, 2, ...): ALPHA / (test (test + 1)),
    which sum to ALPHA over any number of tests.

    >>> level_at(1), level_at(2), round(sum(level_at(k) for k in range(1, 10**5)), 6)
    (0.0125, 0.004166666666666667, 0.025)
    """
    if test < 1:
        raise ValueError(f"goal tests count from 1, not {test}")
    return ALPHA / (test * (test + 1))


@functools.lru_cache(maxsize=4096)
def t_quantile(upper: float, df: int) -> float:
    """Student's t with `df` degrees of freedom: the t whose upper tail P(T > t) is `upper`
    (0 < upper <= 0.5). Bisection on the exact tail (no scipy in the core install).

    >>> round(t_quantile(0.025, 19), 3), round(t_quantile(0.0125, 19), 3)
    (2.093, 2.433)
    """
    if not 0.0 < upper <= 0.5 or df < 1:
        raise ValueError(f"t_quantile needs 0 < upper <= 0.5 and df >= 1, not {upper}, {df}")
    low, high = 0.0, 1.0
    while t_tail(high, df) > upper:
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if t_tail(middle, df) > upper:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * high:
            break
    return 0.5 * (low + high)


def t_tail(t: float, df: int) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom, t >= 0:
    half the regularized incomplete beta I_x(df / 2, 1 / 2) at x = df / (df + t^2)."""
    return 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta (modified Lentz's method)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            value *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return value


def lower_bound(returns, test: int) -> float:
    """The one-sided lower confidence bound of the true mean of the policy that played
    `returns` (fresh episodes), at the level of the run's `test`-th goal test: minus infinity
    for fewer than 2 returns; their mean when they are all equal.

    >>> lower_bound([500.0] * 20, 1), round(lower_bound([480.0, 500.0] * 10, 1), 1)
    (500.0, 484.4)
    """
    values = np.asarray(returns, dtype=float)
    if len(values) < 2:
        return -math.inf
    spread = float(np.std(values, ddof=1))
    margin = t_quantile(level_at(test), len(values) - 1) * spread / math.sqrt(len(values))
    return float(np.mean(values)) - margin


def mean_or_nan(values) -> float:
    """The mean, or NaN for no values (a progress row's "nothing measured this time")."""
    return float(np.mean(values)) if len(values) else math.nan


def deciding_returns(cfg, returns: list[float]) -> list[float]:
    """The returns that score one set of weights that played `returns` under
    `trainer.evaluation_request`: the confirming episodes when there are any, every one of them
    (the first `cfg.eval_episodes` only selected the weights for confirmation, so they are a
    lucky draw more often than not), else the first `cfg.eval_episodes`."""
    return returns[cfg.eval_episodes:] or returns


def evaluation_score(cfg, returns: list[float]) -> tuple[float, int]:
    """(score, episodes behind it) of one set of weights that played `returns`: the mean of
    the `deciding_returns`, an unbiased estimate of these weights' mean return (whether they
    reached the goal is `evaluation_columns`' to say).

    >>> from types import SimpleNamespace
    >>> evaluation_score(SimpleNamespace(eval_episodes=2), [500.0, 500.0, 465.0, 467.0])
    (466.0, 2)
    """
    deciding = deciding_returns(cfg, returns)
    return mean_or_nan(deciding), len(deciding)


def evaluation_columns(cfg, returns: list[float], goal_tests: int) -> dict[str, float | int]:
    """A progress row's evaluation columns for one set of weights that played `returns` under
    `trainer.evaluation_request`, in a run that has tested its goal `goal_tests` times before:
    eval_return and eval_episodes (`evaluation_score`), eval_lower (the `lower_bound` of these
    weights' mean that the stop reads; NaN when `returns` test nothing) and goal_tests (the
    run's count, this test included). Every trainer builds its rows' evaluation columns here:
    a row without eval_lower cannot reach a goal (`results.stop_reason`).

    `returns` test the goal when there is one and they hold confirming episodes (or, with
    `cfg.confirm_episodes` 0, always: the first episodes decide then); the bound is taken on
    every confirming episode (twice `cfg.confirm_episodes` when the first ones were all alike).

    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(eval_episodes=2, confirm_episodes=2, target_return=475.0)
    >>> evaluation_columns(cfg, [500.0, 450.0], goal_tests=0)["eval_lower"]   # not tested
    nan
    >>> columns = evaluation_columns(cfg, [500.0, 490.0, 500.0, 500.0], goal_tests=0)
    >>> columns["eval_return"], columns["eval_lower"], columns["goal_tests"]
    (500.0, 500.0, 1)
    """
    deciding = deciding_returns(cfg, returns)
    tested = cfg.target_return is not None and len(returns) > 0 and (
        cfg.confirm_episodes == 0 or len(returns) > cfg.eval_episodes)
    goal_tests += tested
    return {"eval_return": mean_or_nan(deciding), "eval_episodes": len(deciding),
            "eval_lower": lower_bound(deciding, goal_tests) if tested else math.nan,
            "goal_tests": goal_tests}
