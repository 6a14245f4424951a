"""Where RLlib SAC's time goes on Pendulum-v1: a py-spy profile of notebook 07's RLlib run.

    python -m bench.rllib_profile [--seconds 60] [--json notebooks/figures/rllib_sac_profile.json]

Runs RLlib's SAC exactly as notebook 07 configures it (`rllib_compare.RLlibTrainer`, sampling
and learning in one process: `num_env_runners=0`, so the env runner and the learner are this
one process) under `py-spy record` (it ships with `ray[default]`), then sums the samples taken
inside `algo.train()` by RLlib component and by function (`bench/pyspy.py`). Writes, beside
each other:

- `rllib_sac_profile.json`: the sample counts and shares (notebook 07 prints its tables), with
  the `meta` every benchmark result has (commit, date, machine, load, command);
- `rllib_sac_profile.svg`: the same samples as a flame graph (open it in a browser).

py-spy samples the wall clock: on a shared or busy machine the absolute rates drop, the shares
by function stay informative. Run it as root, or where ptrace is allowed.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.benchlib import REPO, Recording, parser
from bench.pyspy import Part, read_stacks, shares

RATE_HZ = 50               # py-spy's samples per second

#: RLlib's components, inclusive: a sample counts for each one a frame of its stack matches
#: (frames read "Class.function (package/path.py:line)"; "of it" parts are inside the line above)
UPDATE = r"^Learner\.update \("
COMPONENTS = (
    Part("learner update (Learner.update)", (UPDATE,)),
    Part("  of it: learner connector pipeline (batch building)",
         (r"\(ray/rllib/connectors/learner/",)),
    Part("  of it: forward passes (RLModule.forward_train)", (r"^RLModule\.forward_train \(",)),
    Part("  of it: losses (compute_loss_for_module)", ("compute_loss_for_module",)),
    Part("  of it: torch backward pass", (r"^(Tensor\.)?backward \(torch/",)),
    Part("  of it: optimiser steps", (r"\(torch/optim/",)),
    Part("  of it: metrics logging", (r"\(ray/rllib/utils/metrics/",), below=UPDATE),
    Part("env runner sample (SingleAgentEnvRunner.sample)",
         (r"^SingleAgentEnvRunner\.sample \(",)),
    Part("  of it: env-to-module + module-to-env connectors",
         (r"\(ray/rllib/connectors/(env_to_module|module_to_env)/",)),
    Part("  of it: Pendulum env.step", (r"\(gymnasium/envs/classic_control/pendulum\.py",)),
    Part("replay buffer (add, sample)", (r"\(ray/rllib/utils/replay_buffers/",)),
    Part("metrics logging anywhere (MetricsLogger, stats)", (r"\(ray/rllib/utils/metrics/",)),
    Part("all RLlib connector pipelines", (r"\(ray/rllib/connectors/",)),
)
TRAIN = Part("inside algo.train()", (r"^Trainable\.train \(",))
FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^:]+)(:\d+)?\)$")


def record(seconds: float, raw: Path, rates: Path) -> None:
    """py-spy record (raw collapsed stacks) of a child process training RLlib SAC."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    child = [sys.executable, "-m", "bench.rllib_profile", "--child", "--seconds", str(seconds),
             "--rates", str(rates)]
    subprocess.run([spy, "record", "--rate", str(RATE_HZ), "--format", "raw", "--output",
                    str(raw), "--", *child], check=True, cwd=REPO)


def flamegraph(stacks: list, svg: Path) -> None:
    """A minimal flame graph SVG of `stacks` below `algo.train()` (at most 12 levels, widths =
    sample shares), so the picture needs no other tool."""
    counts = collections.Counter()
    total = 0
    for frames, n in stacks:
        idx = next((i for i, f in enumerate(frames) if re.search(TRAIN.patterns[0], f)), None)
        if idx is None:
            continue
        total += n
        below = [_short(f) for f in frames[idx + 1:]]
        for depth in range(1, min(len(below), 12) + 1):
            counts[tuple(below[:depth])] += n
    width, row_h = 1200, 18
    rects, y_max = [], 0

    def draw(prefix: tuple, x0: float, depth: int) -> None:
        nonlocal y_max
        kids = sorted((k for k in counts if len(k) == depth + 1 and k[:depth] == prefix),
                      key=lambda k: -counts[k])
        x = x0
        for kid in kids:
            w = counts[kid] / total * width
            if w < 2:
                continue
            y = depth * row_h
            y_max = max(y_max, y + row_h)
            label = kid[-1] if w > 60 else ""
            rects.append(f'<g><title>{_esc(kid[-1])}: {counts[kid] / total:.1%}</title>'
                         f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 1}" '
                         f'fill="hsl({(hash(kid[-1]) % 40) + 10},80%,60%)"/>'
                         f'<text x="{x + 3:.1f}" y="{y + 13}" font-size="11">'
                         f'{_esc(label[: int(w / 7)])}</text></g>')
            draw(kid, x, depth + 1)
            x += w

    if total:
        draw((), 0.0, 0)
    svg.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
                   f'height="{y_max + 20}" font-family="monospace">'
                   f'<text x="4" y="{y_max + 15}" font-size="11">RLlib SAC on Pendulum-v1: '
                   f'{total} py-spy samples inside algo.train(), caller on top</text>'
                   + "".join(rects) + "</svg>\n")


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _short(frame: str) -> str:
    """'update (ray/rllib/core/learner/learner.py:123)' -> 'update (core/learner/learner.py)'"""
    m = FRAME.match(frame)
    if not m:
        return frame
    file = m["file"].split("site-packages/")[-1]
    return f"{m['func']} ({file.removeprefix('ray/rllib/')})"


def summarise(stacks: list) -> dict:
    """Shares of the samples inside `algo.train()`: by component (inclusive) and by function
    (self time: the innermost frame, and inclusive)."""
    inside = [(frames, n) for frames, n in stacks if TRAIN.holds(frames)]
    self_time, inclusive = collections.Counter(), collections.Counter()
    for frames, n in inside:
        self_time[_short(frames[-1])] += n
        inclusive.update({f: n for f in {_short(f) for f in frames}})
    total = sum(n for _, n in inside)
    share = (lambda c: round(c / total, 4)) if total else (lambda c: 0.0)
    return {"samples_in_train": total,
            "components": shares(inside, COMPONENTS) or {p.name: 0.0 for p in COMPONENTS},
            "top_self": [[f, share(c)] for f, c in self_time.most_common(12)],
            "top_inclusive_rllib": [[f, share(c)] for f, c in inclusive.most_common(300)
                                    if "(ray/" not in f and "(" in f and "/" in f
                                    and not f.startswith(("Trainable.", "Algorithm.", "child",
                                                          "main", "<module>", "RLlibTrainer"))
                                    ][:15]}


def child(seconds: float, rates: Path) -> None:
    """Train RLlib SAC on Pendulum-v1 as notebook 07 does, for `seconds` of training."""
    from course_lib import init_ray
    from course_lib.teaching.rllib_compare import RLlibConfig, RLlibTrainer

    init_ray()
    cfg = RLlibConfig.for_algo("sac", quick=False, learning_starts=256, checkpoint_every=0,
                               checkpoint_at_end=False)
    trainer = RLlibTrainer(cfg)
    t0, rows = time.perf_counter(), []
    while time.perf_counter() - t0 < seconds:
        rows.append(trainer.step())
    first, last = rows[0], rows[-1]      # rates between the first and the last iteration
    span = max(last["time_s"] - first["time_s"], 1e-9)
    rates.write_text(json.dumps({
        "iterations": len(rows), "env_steps": last["env_steps"],
        "learner_updates": last["learner_updates"], "train_s": last["time_s"],
        "updates_per_s": (last["learner_updates"] - first["learner_updates"]) / span,
        "env_steps_per_s": (last["env_steps"] - first["env_steps"]) / span}))
    trainer.algorithm.stop()


def main() -> None:
    cli = parser(__doc__, "rllib_profile", "10 s of training: the script works, nothing more")
    cli.set_defaults(json=str(REPO / "notebooks" / "figures" / "rllib_sac_profile.json"))
    cli.add_argument("--seconds", type=float, default=None,
                     help="training time profiled (default 60, --quick 10)")
    cli.add_argument("--work", default=None, help="keep the raw stacks here (default: a "
                     "temp dir); with --summarise-only, read them from here")
    cli.add_argument("--summarise-only", action="store_true",
                     help="no new profile: summarise the stacks already in --work")
    cli.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    cli.add_argument("--rates", help=argparse.SUPPRESS)
    args = cli.parse_args()
    seconds = args.seconds or (10.0 if args.quick else 60.0)
    if args.child:
        child(seconds, Path(args.rates))
        return
    path = Path(args.json)
    recording = Recording(packages=("py-spy",))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        raw, rates = work / "stacks.txt", work / "rates.json"
        if not args.summarise_only:
            record(seconds, raw, rates)
        stacks = read_stacks(raw.read_text())
        path.parent.mkdir(parents=True, exist_ok=True)
        flamegraph(stacks, path.with_suffix(".svg"))
        summary = summarise(stacks)
        summary["run"] = json.loads(rates.read_text())   # the profiled run's own counters
    summary["config"] = {"seconds": seconds, "rate_hz": RATE_HZ, "quick": args.quick,
                         "note": "on a shared machine the shares by function are "
                                 "informative, the absolute rates are not"}
    recording.write(summary, path)
    print(f"wrote {path.with_suffix('.svg')}")
    for name, share in summary["components"].items():
        print(f"{share:6.1%}  {name}")


if __name__ == "__main__":
    main()
