"""Can repeated looks fool "reached"? The stop rule simulated with the trainers' own functions.

    python -m bench.stop_rule [--quick] [--runs 200] [--json bench/results/stop_rule.json]

Each run is the trainer skeleton itself (`trainer.Trainer`: `next_evaluation` asks
`evaluation_request` for episodes, `row` scores them with `scoring.evaluation_columns`) with a
policy whose returns are drawn instead of played: each evaluation's episodes come from one
return distribution, drawn from a generator seeded with the evaluation's own seed (as the
evaluator seeds its envs). The run looks up to `looks` times (one evaluated snapshot per look)
and stops at the first row `results.stop_reason` says reached. Every scenario runs the same
seeds under two rules:

| rule | evaluates                            | stops when                                     |
| ---- | ------------------------------------ | ---------------------------------------------- |
| old  | 10 episodes, 20 more when the 10     | the 20's mean meets the goal (course_lib       |
|      | meet the goal                        | before issue 36, kept here only as the         |
|      |                                      | baseline: `OldRule`)                           |
| new  | the same, and 20 more again when the | their lower confidence bound does, at the      |
|      | 20 all returned the same             | level of the run's k-th goal test              |
|      | (`trainer.evaluation_request`)       | (`results.stop_reason`, `course_lib.scoring`)  |

On the same seed both rules draw the same episodes until one stops or extends a confirmation.

The policies (`SCENARIOS`): plateaus 2% under and 2% over the goal, on CartPole-like returns
(a normal capped at 500, the cap's share growing with the mean: sd 40 at 465.5, the issue's
figure) and Pendulum-like ones (a normal of sd ~120 capped at 0); Pendulum at the level SAC
reaches (-165 and -150 with sd ~90: `bench/goal_holds.py`'s checkpoints score -161 to -169 with
sd 82-99 over 20 episodes); a policy exactly at the goal (no cap: the rule's guarantee); a
converged CartPole policy (every episode 500); two learning curves through the goal; and a
stress case the rule does not claim to handle (CartPole failing one episode in seven at ~270,
so that 20 flawless episodes are common). Per scenario and rule: the share of runs reached,
the share that stopped while the policy was below the goal, the looks and evaluation episodes
to the stop, and how far the stopping row's score and bound sit from the true mean.
`--quick`: 40 runs per scenario, 50 looks at most (a smoke run).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from bench.benchlib import Recording, parser
from course_lib.config import TrainerConfig
from course_lib.results import stop_reason
from course_lib.trainer import Trainer, derive_seed

CARTPOLE_SD = 56.92        # the normal under the 500 cap: sd 40 at a mean of 465.5
PENDULUM_SD = 125.0        # the normal under the 0 cap: sd ~120 at -204
SAC_SD = 90.0              # Pendulum at SAC's level: sd ~85 (goal_holds' checkpoints: 82-99)


@dataclasses.dataclass(frozen=True)
class Capped:
    """Returns ~ Normal(center(look), sd), clipped to [low, high]: `center` moves with the look
    for a learning curve, stays put for a plateau."""

    center: Callable[[int], float]
    sd: float
    low: float = -math.inf
    high: float = math.inf

    def draw(self, look: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.clip(rng.normal(self.center(look), self.sd, n), self.low, self.high)

    def mean(self, look: int) -> float:
        """The true mean of the clipped normal at `look` (exact)."""
        return clipped_mean(self.center(look), self.sd, self.low, self.high)


@dataclasses.dataclass(frozen=True)
class Failing:
    """CartPole that reaches 500 with probability `p` and otherwise falls at ~270 (sd 60)."""

    p: float

    def draw(self, look: int, n: int, rng: np.random.Generator) -> np.ndarray:
        fall = np.clip(rng.normal(270.0, 60.0, n), 8.0, 499.0)
        return np.where(rng.random(n) < self.p, 500.0, fall)

    def mean(self, look: int) -> float:
        return self.p * 500.0 + (1 - self.p) * clipped_mean(270.0, 60.0, 8.0, 499.0)


def clipped_mean(mu: float, sd: float, low: float, high: float) -> float:
    """E[clip(X, low, high)] for X ~ Normal(mu, sd) (low and high may be infinite)."""
    if sd == 0:
        return min(max(mu, low), high)
    cdf = lambda z: 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))        # noqa: E731
    pdf = lambda z: math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)  # noqa: E731
    a, b = (low - mu) / sd, (high - mu) / sd
    inside = mu * (cdf(b) - cdf(a)) - sd * (pdf(b) - pdf(a))
    return (inside + (low * cdf(a) if cdf(a) > 0 else 0.0)
            + (high * (1.0 - cdf(b)) if cdf(b) < 1 else 0.0))


def centered(mean: float, sd: float, low: float = -math.inf, high: float = math.inf) -> Capped:
    """The plateau whose clipped returns have true mean `mean` (the center found by bisection)."""
    lo, hi = mean - 10 * sd, mean + 10 * sd
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if clipped_mean(mid, sd, low, high) < mean else (lo, mid)
    return Capped(lambda look, c=0.5 * (lo + hi): c, sd, low, high)


def ramp(start: float, end: float, looks: int, sd: float, low=-math.inf, high=math.inf):
    """A learning curve: the center moves from `start` to `end` over `looks`, then stays."""
    return Capped(lambda look: start + (end - start) * min(1.0, look / looks), sd, low, high)


CARTPOLE = {"low": 0.0, "high": 500.0}
PENDULUM = {"high": 0.0}
#: name -> (goal, policy, looks, the target on the new rule's reached share or None, and
#: settings of the evaluation other than the trainers' defaults)
SCENARIOS = {
    "CartPole 2% under (465.5)": (475.0, centered(465.5, CARTPOLE_SD, **CARTPOLE), 200, "<= 5%"),
    "CartPole 2% under, 50 looks": (475.0, centered(465.5, CARTPOLE_SD, **CARTPOLE), 50, None),
    "CartPole 2% over (484.5)": (475.0, centered(484.5, CARTPOLE_SD, **CARTPOLE), 50, ">= 95%"),
    "Pendulum 2% under (-204)": (-200.0, centered(-204.0, PENDULUM_SD, **PENDULUM), 200, "<= 5%"),
    "Pendulum 2% under, 50 looks": (-200.0, centered(-204.0, PENDULUM_SD, **PENDULUM), 50, None),
    "Pendulum 2% over (-196)": (-200.0, centered(-196.0, PENDULUM_SD, **PENDULUM), 50, None),
    "Pendulum at SAC's stop (-165)": (-200.0, centered(-165.0, SAC_SD, **PENDULUM), 50, None),
    "Pendulum at SAC's plateau (-150)": (-200.0, centered(-150.0, SAC_SD, **PENDULUM), 50,
                                         ">= 95%"),
    "at the goal, normal, no cap": (475.0, centered(475.0, 40.0), 200, "<= 5%"),
    "CartPole converged (all 500)": (475.0, Capped(lambda look: 500.0, 0.0), 50, None),
    "CartPole learning 300 -> 520 (40 looks)": (475.0, ramp(300.0, 520.0, 40, CARTPOLE_SD,
                                                            **CARTPOLE), 100, None),
    "Pendulum learning -600 -> -140 (20 looks)": (-200.0, ramp(-600.0, -140.0, 20, SAC_SD,
                                                               **PENDULUM), 100, None),
    "stress: CartPole failing 1 in 7 (465.5)": (475.0, Failing(0.85), 200, None),
    "stress, confirm_episodes 50": (475.0, Failing(0.85), 200, None, {"confirm_episodes": 50}),
}
QUICK_RUNS, QUICK_LOOKS = 40, 50


class Simulated(Trainer):
    """The trainer skeleton with its policy's returns drawn from `policy` instead of played."""

    algo = "simulated"
    updates_per_transition = 0.0

    def __init__(self, cfg: TrainerConfig, policy):
        super().__init__(cfg)
        self.policy = policy

    def step(self) -> dict:
        snapshot = self.snapshot({}, {}, 0)
        look = self.counters.iteration
        while (request := self.next_evaluation(snapshot)) is not None:
            episodes, seed = request
            drawn = self.policy.draw(look, episodes, np.random.default_rng(seed))
            snapshot.returns += drawn.tolist()
        return self.row(snapshot)

    def close(self) -> None:
        pass


class OldRule(Simulated):
    """The baseline: course_lib's evaluation and stop before issue 36. 10 episodes, 20 more
    when their mean meets the goal (never more), and a stop when the 20's mean meets it."""

    def next_evaluation(self, snapshot) -> tuple[int, int] | None:
        cfg, played = self.cfg, len(snapshot.returns)
        if played == 0 or (played == cfg.eval_episodes
                           and np.mean(snapshot.returns) >= cfg.target_return):
            self.counters.evaluations += 1
            return (cfg.confirm_episodes if played else cfg.eval_episodes,
                    derive_seed(cfg.seed, "evaluation", self.counters.evaluations))
        return None

    @staticmethod
    def stop_reason(row: dict, cfg) -> str | None:
        return "eval_return" if row["eval_return"] >= cfg.target_return else None


class NewRule(Simulated):
    """course_lib's rule: the trainer skeleton's own evaluation and `results.stop_reason`."""

    stop_reason = staticmethod(stop_reason)


RULES = {"old": OldRule, "new": NewRule}


def one_run(goal: float, policy, looks: int, seed: int, rule: str, settings: dict) -> dict:
    """Look at `policy` up to `looks` times; where the run stopped and what it had played."""
    cfg = TrainerConfig(target_return=goal, seed=seed, max_env_steps=None, max_time_s=None,
                        **settings)
    trainer = RULES[rule](cfg, policy)
    episodes = 0
    for look in range(looks):
        row = trainer.step()
        episodes += len(trainer.evaluated.returns)
        if trainer.stop_reason(row, cfg) == "eval_return":
            truth = policy.mean(look)
            return {"reached": True, "below": truth < goal, "looks": look + 1,
                    "episodes": episodes, "score_error": row["eval_return"] - truth,
                    "bound_error": row.get("eval_lower", math.nan) - truth}
    return {"reached": False, "below": False, "looks": looks, "episodes": episodes}


def scenario(name: str, runs: int, quick: bool) -> dict:
    """Both rules on `runs` seeds of one scenario: the shares and means of `one_run`."""
    goal, policy, looks, target, *more = SCENARIOS[name]
    settings = more[0] if more else {}
    looks = min(looks, QUICK_LOOKS) if quick else looks
    sample = policy.draw(0, 200_000, np.random.default_rng(12345))
    out = {"scenario": name, "goal": goal, "true_mean": round(policy.mean(0), 1),
           "final_mean": round(policy.mean(looks - 1), 1), "sd": round(float(sample.std()), 1),
           "looks": looks, "runs": runs, "target": target, "settings": settings}
    for rule in RULES:
        done = [one_run(goal, policy, looks, seed, rule, settings) for seed in range(runs)]
        stopped = [d for d in done if d["reached"]]
        out[f"{rule}_reached"] = sum(d["reached"] for d in done) / runs
        out[f"{rule}_below"] = sum(d["below"] for d in done) / runs
        out[f"{rule}_looks"] = _mean([d["looks"] for d in stopped])
        out[f"{rule}_episodes_to_stop"] = _mean([d["episodes"] for d in stopped])
        out[f"{rule}_episodes"] = _mean([d["episodes"] for d in done])
        out[f"{rule}_score_error"] = _mean([d["score_error"] for d in stopped])
        out[f"{rule}_bound_error"] = _mean([d["bound_error"] for d in stopped])
    return out


def _mean(values: list[float]) -> float | None:
    return round(float(np.mean(values)), 2) if values else None


def check_targets(rows: list[dict]) -> dict:
    """Each scenario's target on the new rule's reached share."""
    targets = {}
    for row in rows:
        if row["target"] is None:
            continue
        sign, limit = row["target"].split()
        share, bound = row["new_reached"], float(limit.rstrip("%")) / 100
        targets[f"{row['scenario']}, {row['looks']} looks: new rule reached"] = {
            "value": f"{share:.1%}", "target": row["target"],
            "met": share <= bound if sign == "<=" else share >= bound,
            "note": f"old rule {row['old_reached']:.1%} of the same runs"}
    return targets


def bench_stop_rule(runs: int = 200, quick: bool = False, log=print) -> dict:
    rows = []
    for name in SCENARIOS:
        row = scenario(name, QUICK_RUNS if quick else runs, quick)
        rows.append(row)
        log(f"{name:<42} true {row['true_mean']:7.1f} sd {row['sd']:5.1f}, {row['looks']:>3} "
            f"looks: reached old {row['old_reached']:6.1%} new {row['new_reached']:6.1%}; "
            f"episodes to the stop old {_show(row['old_episodes_to_stop'])} new "
            f"{_show(row['new_episodes_to_stop'])}", flush=True)
    return {"config": {"quick": quick, "runs": QUICK_RUNS if quick else runs,
                       "eval_episodes": TrainerConfig.eval_episodes,
                       "confirm_episodes": TrainerConfig.confirm_episodes},
            "scenarios": rows, "targets": {} if quick else check_targets(rows)}


def _show(value: float | None) -> str:
    return "    –" if value is None else f"{value:5.0f}"


def section(r: dict) -> str:
    """The RESULTS.md table: per scenario, both rules on the same seeds."""
    cfg = r["meta"]["config"]
    head = (f"{cfg['runs']} runs per scenario, the same seeds under both rules. Each look "
            f"evaluates {cfg['eval_episodes']} episodes and {cfg['confirm_episodes']} more "
            "when they meet the goal (the new rule: as many again when those all returned the "
            "same). *reached*: share of runs that stopped on the goal; *below*: share that "
            "stopped while the policy was under the goal; *looks to stop*, *episodes*: looks "
            "and evaluation episodes up to the stop (runs that stopped); *score - truth*, "
            "*bound - truth*: the stopping row's eval_return and eval_lower minus the true "
            "mean.\n\n")
    lines = ["| policy | true mean | sd | looks | reached old | reached new | below old | "
             "below new | looks to stop old | new | episodes old | new | score - truth old | "
             "new | bound - truth new |", "|" + " --- |" * 15]
    for s in r["scenarios"]:
        truth = f"{s['true_mean']:g}" + (f" → {s['final_mean']:g}"
                                          if s["final_mean"] != s["true_mean"] else "")
        cells = [s["scenario"], truth, f"{s['sd']:g}", str(s["looks"]),
                 f"{s['old_reached']:.1%}", f"{s['new_reached']:.1%}", f"{s['old_below']:.1%}",
                 f"{s['new_below']:.1%}"]
        cells += [_cell(s[f"{rule}_{key}"]) for key in ("looks", "episodes_to_stop")
                  for rule in RULES]
        cells += [_cell(s["old_score_error"]), _cell(s["new_score_error"]),
                  _cell(s["new_bound_error"])]
        lines.append("| " + " | ".join(cells) + " |")
    return head + "\n".join(lines)


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def main() -> None:
    cli = parser(__doc__, "stop_rule", "40 runs per scenario, 50 looks at most")
    cli.add_argument("--runs", type=int, default=200, help="runs per scenario (default 200)")
    args = cli.parse_args()
    recording = Recording()
    result = bench_stop_rule(args.runs, args.quick)
    print(section(recording.write(result, args.json)))


if __name__ == "__main__":
    main()
