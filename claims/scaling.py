"""Readings of the env-latency ladder (bench/results/scaling.json): RESULTS.md's scaling
section, the FAQ's "when does distribution pay?", notebook 05 and its deck."""

from __future__ import annotations

from claims.registry import claim, holds

RESULTS, FAQ, NB05 = "bench/RESULTS.md", "slides/FAQ.md", "notebooks/05_apex.ipynb"


def _ladder(e) -> dict[float, dict[str, dict]]:
    """latency -> variant -> summary row of bench/results/scaling.json."""
    out: dict[float, dict[str, dict]] = {}
    for row in e.bench("scaling")["summary"]:
        out.setdefault(row["latency_ms"], {})[row["variant"]] = row
    return out


def _apex(rows: dict[str, dict]) -> dict[int, dict]:
    return {int(v.split("-")[1]): r for v, r in rows.items() if v.startswith("apex-")}


@claim("scaling-apex-pulls-ahead",
       {RESULTS: "every Ape-X variant pulls further ahead of single-process DQN",
        FAQ: "as\nevery env step is made to wait (`env_latency_ms`), explorers pull ahead"},
       "bench/results/scaling.json: each Ape-X variant's time / DQN's, latency by latency")
def _(e):
    ladder = _ladder(e)
    latencies = sorted(ladder)
    series = {n: [_apex(ladder[lat])[n]["seconds_vs_dqn"] for lat in latencies]
              for n in _apex(ladder[latencies[0]])}
    falling = all(a > b for s in series.values() for a, b in zip(s, s[1:], strict=False))
    return holds(falling, f"time / DQN's at {latencies} ms: {series}")


@claim("scaling-ahead-of-sb3",
       {RESULTS: "is ahead of SB3's DQN at every latency above zero"},
       "bench/results/scaling.json: every Ape-X variant's time / SB3's at latencies above 0")
def _(e):
    worst = {lat: max(r["seconds_vs_sb3"] for r in _apex(rows).values())
             for lat, rows in _ladder(e).items() if lat > 0}
    return holds(max(worst.values()) < 1, f"slowest Ape-X / SB3 per latency: {worst}")


@claim("scaling-fastest-explorers-grow-with-latency",
       {RESULTS: ("the fastest number of explorers grows: one explorer at\n`env_latency_ms=0.5`, "
                  "two at `2`, four at `5`",
                  "(in the medians: at each latency the seeds' range\nof the fastest overlaps "
                  "the runner-up's)"),
        FAQ: ("in the benchmark's medians it was one explorer at\n`env_latency_ms=0.5`, two at "
              "`env_latency_ms=2` and four at `env_latency_ms=5`",
              "(the seeds'\nranges of the fastest and the runner-up overlap)"),
        "slides/05_apex.md": "the slower the env, the more explorers it takes to fill\nthe waits"},
       "bench/results/scaling.json: the Ape-X variants by median time per latency, and the "
       "ranges of the two fastest")
def _(e):
    best, overlap = {}, {}
    for lat, rows in _ladder(e).items():
        first, second = sorted(_apex(rows).items(), key=lambda kv: kv[1]["median_seconds"])[:2]
        best[lat] = first[0]
        overlap[lat] = (first[1]["max_seconds"] >= second[1]["min_seconds"]
                        and second[1]["max_seconds"] >= first[1]["min_seconds"])
    above = {lat: n for lat, n in best.items() if lat > 0}
    return holds(above == {0.5: 1, 2.0: 2, 5.0: 4} and all(overlap[lat] for lat in above),
                 f"fastest number of explorers per latency: {best}; its range overlaps the "
                 f"runner-up's: {overlap}")


@claim("scaling-eight-explorers-most-cpu",
       {RESULTS: "(eight explorers\nuse the most CPU seconds of the Ape-X rows at every "
                 "latency)",
        FAQ: "(eight explorers use the most\nCPU seconds of the Ape-X rows at every latency)"},
       "bench/results/scaling.json: the median CPU seconds of the Ape-X rows per latency")
def _(e):
    most = {lat: max(_apex(rows).items(), key=lambda kv: kv[1]["median_cpu_s"])[0]
            for lat, rows in _ladder(e).items()}
    return holds(set(most.values()) == {8}, f"most CPU seconds per latency: {most} explorers")


@claim("scaling-vec-behind-best-apex",
       {RESULTS: "One process stepping eight envs as one batch (`vec-8`) collects much of\nthe "
                 "same overlap without Ray, and stays behind the best Ape-X at every latency "
                 "above zero."},
       "bench/results/scaling.json: vec-8 against DQN and against the best Ape-X per latency")
def _(e):
    seen, ok = {}, True
    for lat, rows in _ladder(e).items():
        if lat > 0:
            best = min(r["median_seconds"] for r in _apex(rows).values())
            vec = rows["vec-8"]
            ok &= vec["median_seconds"] > best and vec["seconds_vs_dqn"] <= 0.6
            seen[lat] = (vec["seconds_vs_dqn"], round(vec["median_seconds"] / best, 2))
    return holds(ok, f"vec-8 per latency: (time / DQN's, time / best Ape-X's) {seen}")


@claim("scaling-level-at-latency-zero",
       {RESULTS: "the best Ape-X and\nsingle-process DQN are level within the seeds' wide spread",
        FAQ: ("with CartPole as it is (latency 0), Ape-X is no faster than one process",
              "no slower, and no clear win either",
              "so on CartPole the distributed system about matches one process\nhere"),
        NB05: "there, at latency 0, Ape-X is no faster than one process",
        "slides/05_apex.md": "at latency 0 the best Ape-X is level with one\nprocess, within the "
                             "seeds' spread"},
       "bench/results/scaling.json's 0 ms rung: the best Ape-X against DQN, medians and ranges")
def _(e):
    rows = _ladder(e)[0.0]
    best = min(_apex(rows).values(), key=lambda r: r["median_seconds"])
    dqn = rows["dqn"]
    overlap = (best["min_seconds"] <= dqn["max_seconds"]
               and dqn["min_seconds"] <= best["max_seconds"])
    return holds(0.8 <= best["seconds_vs_dqn"] <= 1.25 and overlap,
                 f"best Ape-X ({best['variant']}) {best['seconds_vs_dqn']} of DQN's time; ranges "
                 f"{best['min_seconds']}-{best['max_seconds']} s and "
                 f"{dqn['min_seconds']}-{dqn['max_seconds']} s")


@claim("scaling-sb3-fastest-at-zero",
       {RESULTS: "SB3's DQN, with far fewer env\nsteps to the goal, is fastest in this rung",
        FAQ: "SB3's DQN is faster than 4 explorers in both benchmarks that run it"},
       "scaling.json's 0 ms rung, and sb3.json against apex.json's four explorers")
def _(e):
    rows = _ladder(e)[0.0]
    fastest = min(rows, key=lambda v: rows[v]["median_seconds"])
    fewer = rows["sb3"]["median_env_steps"] <= 0.5 * rows["dqn"]["median_env_steps"]
    sb3 = e.row(e.bench("sb3")["summary"], task="CartPole-v1")["median_time_s"]
    four = e.row(e.bench("apex")["summary"], variant="apex-4")["median_seconds"]
    return holds(fastest == "sb3" and fewer and sb3 < four,
                 f"fastest at 0 ms: {fastest} ({rows['sb3']['median_env_steps']:,.0f} env steps "
                 f"against DQN's {rows['dqn']['median_env_steps']:,.0f}); sb3.json {sb3} s "
                 f"against apex-4's {four} s")


@claim("scaling-above-the-bound",
       {RESULTS: "All variants stay above Amdahl's bound",
        FAQ: "though every variant\nstays above the dashed bound"},
       "bench/results/scaling.json: every row's median time against its bound")
def _(e):
    rows = [r for r in e.bench("scaling")["summary"] if r["bound_s"] is not None]
    closest = min(rows, key=lambda r: r["median_seconds"] / r["bound_s"])
    return holds(closest["median_seconds"] > closest["bound_s"],
                 f"closest to its bound: {closest['latency_ms']:g} ms {closest['variant']}, "
                 f"{closest['median_seconds']} s against {closest['bound_s']} s")
