"""The goal's test: Student's t without scipy, the level a run spends per test, the lower bound,
and the evaluation that extends a confirmation which showed no spread."""

import math

import numpy as np
import pytest

from course_lib import scoring
from course_lib.config import TrainerConfig
from course_lib.scoring import ALPHA, level_at, lower_bound, t_quantile
from course_lib.trainer import derive_seed, evaluation_request


@pytest.mark.parametrize("df", [1, 2, 4, 19, 39, 99])
@pytest.mark.parametrize("upper", [0.5, 0.1, 0.0125, 1e-4, 1e-7])
def test_t_quantile_matches_scipy(df, upper):
    stats = pytest.importorskip("scipy.stats")
    assert t_quantile(upper, df) == pytest.approx(stats.t.isf(upper, df), rel=1e-9)


def test_t_quantile_refuses_what_it_cannot_answer():
    for upper, df in ((0.0, 5), (0.7, 5), (0.1, 0)):
        with pytest.raises(ValueError, match="t_quantile needs"):
            t_quantile(upper, df)


def test_the_levels_of_all_tests_sum_to_alpha_and_shrink():
    levels = [level_at(k) for k in range(1, 100_001)]
    assert sum(levels) == pytest.approx(ALPHA * (1 - 1 / 100_001))
    assert levels[0] == ALPHA / 2 and all(a > b for a, b in zip(levels, levels[1:], strict=False))
    with pytest.raises(ValueError, match="count from 1"):
        level_at(0)


def test_the_bound_is_the_mean_less_t_standard_errors_at_the_tests_level():
    returns = [470.0, 520.0] * 10
    se = np.std(returns, ddof=1) / math.sqrt(20)
    for k in (1, 2, 10):
        assert lower_bound(returns, k) == pytest.approx(495.0 - t_quantile(level_at(k), 19)
                                                        * se)
    assert lower_bound(returns, 1) > lower_bound(returns, 10)    # later tests ask for more
    assert lower_bound([500.0] * 20, 1000) == 500.0              # no spread seen
    assert lower_bound([480.0], 1) == -math.inf                  # one episode bounds nothing
    assert lower_bound([], 1) == -math.inf


def test_the_bound_covers_the_true_mean_as_often_as_its_level_says():
    """Normal returns at mean 475: the bound at the first test's level (1.25%) lies above
    the true mean in about 1.25% of 20-episode samples (4,000 of them: 50 expected, 80 would
    be 4 standard deviations out)."""
    rng = np.random.default_rng(0)
    over = sum(lower_bound(rng.normal(475.0, 40.0, 20), 1) >= 475.0 for _ in range(4_000))
    assert 20 <= over <= 80


def _evaluate(cfg, play):
    """The episodes an evaluation asks for, playing `play(episodes)` each time."""
    returns, asked = [], []
    while (request := evaluation_request(cfg, returns, len(asked))) is not None:
        asked.append(request)
        returns += play(request[0])
    return returns, asked


def test_a_confirmation_that_shows_no_spread_is_extended_once():
    cfg = TrainerConfig(eval_episodes=10, confirm_episodes=20, target_return=475.0, seed=3)
    flawless, asked = _evaluate(cfg, lambda n: [500.0] * n)
    assert [n for n, _ in asked] == [10, 20, 20] and len(flawless) == 50
    assert [seed for _, seed in asked] == [derive_seed(3, "evaluation", k) for k in (1, 2, 3)]
    columns = scoring.evaluation_columns(cfg, flawless, goal_tests=0)
    assert (columns["eval_episodes"], columns["eval_lower"]) == (40, 500.0)
    _, asked = _evaluate(cfg, lambda n: list(np.resize([490.0, 500.0], n)))   # a spread
    assert [n for n, _ in asked] == [10, 20]
    _, asked = _evaluate(cfg, lambda n: [400.0] * n)                          # below the goal
    assert [n for n, _ in asked] == [10]
    none = TrainerConfig(eval_episodes=10, confirm_episodes=0, target_return=475.0)
    assert [n for n, _ in _evaluate(none, lambda n: [500.0] * n)[1]] == [10]
