"""`python -m course_lib`: train and evaluate from a terminal, modelled on RLlib's command line.

    python -m course_lib train --algo apex --env CartPole-v1 --num-workers 4 \\
        --stop '{"eval_return": 475, "time_s": 600}' --config '{"lr": 0.0005}' \\
        --checkpoint-freq 10 --checkpoint-at-end --keep-checkpoints 3 --results-dir results
    python -m course_lib train --algo sac --env Pendulum-v1 --num-workers 2 \\
        --stop '{"eval_return": -200, "env_steps": 20000}' --checkpoint-at-end
    python -m course_lib train --restore results/apex_CartPole-v1_<time> \\
        --stop '{"env_steps": 200000}'       # its newest checkpoint, trained on to 200K steps
    python -m course_lib evaluate CHECKPOINT --episodes 10 [--render --out episode.gif]

Resuming (`--restore`): the network, the optimiser and the counters continue, and the budgets
count the run as a whole (`env_steps` and `time_s` go on from the checkpoint's, so
`{"env_steps": 200000}` means 200K in all, not 200K more). A `--stop` given with `--restore`
replaces the checkpoint's stop criteria (those it does not name are off); without one the run
continues under the checkpoint's. One line says which, and criteria the checkpoint already
meets are refused: the resumed run would stop at its first evaluation, on the old weights.

A run writes `results/<algo>_<env>_<time>/` (see `course_lib.runs`). Exit status: 0 when
the goal (`eval_return`) was reached, or the budget used up when there was no goal; 1 when
the budget ran out first; 2 for bad input (also an env that returns NaN or inf mid-run),
with one `error: ...` line on stderr; 3 when Ray does not start (one line too); 4 when the
run crashed (one line naming the part that failed, the traceback in the run's `error.txt`);
130 when interrupted.

Adding an algorithm: see `course_lib.algorithms` (a `SPEC` at the end of its module, its name
in `ALGORITHMS`).
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import sys
from pathlib import Path

from course_lib import algorithms, runs
from course_lib.algorithms import ALGORITHMS
from course_lib.errors import CheckpointError, first_line
from course_lib.results import STOP_KEYS

EXIT_REACHED, EXIT_BUDGET, EXIT_USAGE, EXIT_NO_RAY, EXIT_CRASHED, EXIT_INTERRUPTED = (
    0, 1, 2, 3, 4, 130)


class UsageError(Exception):
    """Bad input: reported as one `error: ...` line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print the usage too: keep it to one line
        raise UsageError(f"{message} (see {self.prog} --help)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _workers(text: str) -> int | str:
    return text if text == "auto" else _positive_int(text)


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m course_lib",
                     description="Train and evaluate the workbook's RL algorithms.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    train = commands.add_parser("train", help="train an algorithm, write a run folder")
    train.add_argument("--algo", help=f"one of {', '.join(ALGORITHMS)} "
                       "(default: the checkpoint's with --restore, else apex)")
    train.add_argument("--env", help="gymnasium env id (default: the config's, CartPole-v1)")
    train.add_argument("--num-workers", type=_workers,
                       help="explorers / rollout workers; auto (apex): the count the scaling "
                       "model picks from costs measured on this machine at start-up")
    train.add_argument("--stop", help='JSON, e.g. \'{"eval_return": 475, "env_steps": 100000, '
                       '"time_s": 600}\'; null switches one off. With --restore it replaces '
                       "the checkpoint's criteria; env_steps and time_s count the whole run")
    train.add_argument("--config", default="{}", help="JSON of config overrides, e.g. "
                       '\'{"lr": 0.0005}\'')
    train.add_argument("--checkpoint-freq", type=_non_negative_int, default=0,
                       help="checkpoint every N iterations (0: never)")
    train.add_argument("--checkpoint-at-end", action="store_true",
                       help="checkpoint after the last iteration")
    train.add_argument("--keep-checkpoints", type=_positive_int,
                       help="keep only the newest N checkpoints")
    train.add_argument("--restore", metavar="PATH",
                       help="continue from a checkpoint (or a run folder's newest one)")
    train.add_argument("--results-dir", default="results", help="where run folders go")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--help-config", action="store_true",
                       help="list every --config key of --algo (type, default, meaning), exit")

    evaluate = commands.add_parser("evaluate", help="replay a checkpoint greedily")
    evaluate.add_argument("checkpoint", help="a checkpoint folder, or a run folder")
    evaluate.add_argument("--episodes", type=_positive_int, default=10)
    evaluate.add_argument("--seed", type=int, default=0, help="episode i resets with seed+i")
    evaluate.add_argument("--render", action="store_true",
                          help="record the first episode as an animated GIF")
    evaluate.add_argument("--out", default="episode.gif", help="the GIF's path (--render)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        return train(args) if args.command == "train" else evaluate(args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RuntimeError as err:
        from course_lib.errors import RayStartError
        if not isinstance(err, RayStartError):
            raise
        print(f"error: {err}", file=sys.stderr)
        return EXIT_NO_RAY
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


# ---------------------------------------------------------------------------------------------
# Checking the input (cheap checks first: torch and Ray load only when all of these pass)
# ---------------------------------------------------------------------------------------------

def parse_json_object(text: str, option: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{option} is not valid JSON ({err.msg} at character {err.pos}): "
                         f"{text!r}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{option} must be a JSON object like '{{\"key\": value}}', "
                         f"got {text!r}")
    return value


def parse_stop(text: str) -> dict:
    """--stop JSON -> config overrides (eval_return -> target_return, ...)."""
    stop = parse_json_object(text, "--stop")
    out = {}
    for key, value in stop.items():
        if key not in STOP_KEYS:
            raise UsageError(f"--stop: unknown criterion {key!r}; known: "
                             f"{', '.join(STOP_KEYS)}")
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if value is not None and not (number and math.isfinite(value)):
            raise UsageError(f"--stop: {key} must be a number or null, got {value!r}")
        if key != "eval_return" and value is not None and value < 0:   # returns can be < 0
            raise UsageError(f"--stop: {key} must be >= 0, got {value!r}")
        out[STOP_KEYS[key]] = value
    return out


def load_algorithm(name: str):
    if name not in ALGORITHMS:
        close = difflib.get_close_matches(name, ALGORITHMS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(f"unknown algorithm {name!r}; {hint}known: {', '.join(ALGORITHMS)}")
    return algorithms.load_algorithm(name)


def check_env_id(env_id: str) -> None:
    """Unknown env ids are refused with the closest registered names."""
    import gymnasium as gym

    if ":" in env_id or env_id in gym.registry:   # "module:Env-v0" registers itself on make
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise UsageError(f"unknown environment {env_id!r}{hint}")


def make_checked_env(env_id: str, algorithm, **kwargs):
    """The env, made once to check that it exists and suits the algorithm."""
    import gymnasium as gym

    from course_lib.envs import make_env

    try:
        env = make_env(env_id, **kwargs)
    except gym.error.Error as err:                 # missing dependency (box2d, ...), bad id
        raise UsageError(f"cannot make {env_id}: {first_line(err)}") from None
    if algorithm is not None:
        try:
            algorithm.check_env(env)
        except ValueError as err:
            raise UsageError(str(err)) from None
    return env


# ---------------------------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------------------------

def train(args) -> int:
    if args.help_config:
        algo_name = args.algo or "apex"
        if algo_name not in ALGORITHMS:
            load_algorithm(algo_name)             # raises the unknown-algorithm error
        print(load_algorithm(algo_name).config.describe())
        return 0
    stop = parse_stop(args.stop or "{}")
    overrides = parse_json_object(args.config, "--config")
    if overrides.get("num_workers") == "auto":   # as --num-workers auto
        args.num_workers = overrides.pop("num_workers")
    auto = args.num_workers == "auto"
    meta = None
    if args.restore:
        try:
            meta = runs.read_checkpoint_meta(args.restore, args.algo, args.env)
        except CheckpointError as err:
            raise UsageError(str(err)) from None
    algo_name = args.algo or (meta["algo"] if meta else "apex")
    if algo_name not in ALGORITHMS:
        load_algorithm(algo_name)                 # raises the unknown-algorithm error
    env_id = args.env or (meta["env_id"] if meta else None)
    if env_id is not None:
        check_env_id(env_id)

    algorithm = load_algorithm(algo_name)        # imports torch (and Ray): a few seconds
    try:
        if meta is not None:                     # the checkpoint's config, then the overrides
            cfg = algorithm.config().updated(meta["config"])
            if args.stop is not None:            # a new --stop replaces the old criteria
                cfg = cfg.updated(dict.fromkeys(STOP_KEYS.values()))
        else:
            cfg = algorithm.config.preset()      # quick mode (COURSE_QUICK=1) applies here
        if env_id is not None:
            cfg = cfg.updated({"env_id": env_id})
        if args.num_workers is not None:
            if not hasattr(cfg, "num_workers"):
                raise UsageError(f"--num-workers: {algo_name} runs in a single process")
            if auto and algo_name != "apex":
                raise UsageError(f"--num-workers auto sizes Ape-X's explorers only; give "
                                 f"--algo {algo_name} a number of workers")
            cfg = cfg.updated({"num_workers": cfg.num_workers if auto else args.num_workers})
        cfg = cfg.updated({**overrides, **stop})
        cfg.check()                              # settings that would fail later, now
    except ValueError as err:
        raise UsageError(str(err)) from None
    if cfg.target_return is None and cfg.max_env_steps is None and cfg.max_time_s is None:
        raise UsageError("--stop switches every criterion off: keep at least one of "
                         "eval_return, env_steps, time_s")
    check_env_id(cfg.env_id)                     # also when --config set it
    make_checked_env(cfg.env_id, algorithm).close()
    if auto:                                     # about a second: play and train here, alone
        from course_lib.sizing import auto_explorers

        cfg, choice = auto_explorers(cfg)
        print(f"--num-workers auto: {choice.reason}")
    checkpoint = None
    if meta is not None:
        try:
            checkpoint = runs.load_checkpoint(meta["path"], algo_name, cfg.env_id)
        except CheckpointError as err:
            raise UsageError(str(err)) from None
        try:                                     # do the saved weights fit the new config?
            algorithm.policy({**checkpoint, "config": cfg.to_dict()})
        except (RuntimeError, KeyError, ValueError) as err:
            raise UsageError(f"checkpoint {meta['path']} does not fit this config "
                             f"({first_line(err)})") from None
        print(resume_line(cfg, meta, new_stop=args.stop is not None))

    import torch
    torch.set_num_threads(1)                     # tiny networks: one thread is fastest
    params = {"algo": algo_name, "env_id": cfg.env_id, "config": cfg.to_dict(),
              "restored_from": meta["path"] if meta else None, "argv": sys.argv[1:]}
    run = runs.Run.create(args.results_dir, algo_name, cfg.env_id, params,
                             checkpoint_freq=args.checkpoint_freq,
                             checkpoint_at_end=args.checkpoint_at_end,
                             keep_checkpoints=args.keep_checkpoints)
    from course_lib.errors import NoGPUError, NonFiniteError, OutOfTime
    try:
        result = algorithm.train(cfg, progress=not args.quiet, run=run, restore=checkpoint)
    except (NonFiniteError, NoGPUError, CheckpointError) as err:  # bad env, GPU, counters
        raise UsageError(f"{err}; results so far in {run.path}") from None
    except OutOfTime as err:             # before the first evaluation ended
        print(f"{err}; nothing was evaluated; results so far in {run.path}", file=sys.stderr)
        return EXIT_BUDGET
    except KeyboardInterrupt:
        print(f"interrupted; results so far in {run.path}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:                     # a part of the run failed: say which, once
        print(f"error: {runs.crash_report(err, run.path)}", file=sys.stderr)
        return EXIT_CRASHED
    finally:
        run.close()
    print(result.summary(algo_name, cfg.env_id, cfg.target_return)
          + f"; results in {run.path}"
          + (f"; checkpoint {result.checkpoint}" if result.checkpoint else ""))
    return EXIT_REACHED if result.reached else EXIT_BUDGET


def resume_line(cfg, meta: dict, new_stop: bool) -> str:
    """The one line a resume prints: where it starts and which stop criteria it continues under.
    UsageError if the checkpoint already meets one of them (the run would stop at its first
    evaluation, on the checkpoint's own weights and counters: it would prove nothing)."""
    counters = meta.get("counters", {})
    reached = {"eval_return": meta.get("eval_return"), "env_steps": counters.get("env_steps", 0),
               "time_s": counters.get("time_s", 0.0)}
    shown = {"eval_return": "{:.1f}", "env_steps": "{:,.0f}", "time_s": "{:.1f}"}
    criteria = []
    for key, field in STOP_KEYS.items():
        limit = getattr(cfg, field)
        if limit is None:
            continue
        criteria.append(f"{key} >= {shown[key].format(limit)}")
        if reached[key] is not None and reached[key] >= limit:
            what = "reached the goal" if key == "eval_return" else "used up the budget"
            raise UsageError(f"the checkpoint already {what} {key} >= "
                             f"{shown[key].format(limit)} (it has "
                             f"{shown[key].format(reached[key])}; env_steps and time_s count the "
                             f"whole run): give --stop a higher {key}, or null")
    source = "the new --stop" if new_stop else "the checkpoint's criteria; --stop replaces them"
    scored = "" if reached["eval_return"] is None else f", scored {reached['eval_return']:.1f}"
    return (f"resuming {meta['path']} at {reached['env_steps']:,} env steps, "
            f"{reached['time_s']:.1f} s{scored}: stops at {' or '.join(criteria)} ({source}; "
            "env_steps and time_s count the whole run)")


# ---------------------------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------------------------

def evaluate(args) -> int:
    try:
        meta = runs.read_checkpoint_meta(args.checkpoint)
    except CheckpointError as err:
        raise UsageError(str(err)) from None
    check_env_id(meta["env_id"])
    algorithm = load_algorithm(meta["algo"])
    try:
        checkpoint = runs.load_checkpoint(meta["path"])
    except CheckpointError as err:
        raise UsageError(str(err)) from None
    act = algorithm.policy(checkpoint)
    env = make_checked_env(meta["env_id"], algorithm,
                           **({"render_mode": "rgb_array"} if args.render else {}))
    returns, frames = play(env, act, args.episodes, args.seed, record=args.render)
    env.close()
    mean, std = float(sum(returns) / len(returns)), _std(returns)
    version = checkpoint.get("weights_version", checkpoint["counters"].get("learner_updates"))
    scored = (f"; training scored {checkpoint['eval_return']:.1f} over "
              f"{checkpoint['eval_episodes']} episodes" if "eval_return" in checkpoint else "")
    print(f"{meta['algo']} {meta['env_id']} {Path(meta['path']).name} (weights version "
          f"{version}, the learner's update count{scored}): mean return "
          f"{mean:.1f} +- {std:.1f} over {len(returns)} episodes "
          f"(min {min(returns):.1f}, max {max(returns):.1f})")
    if args.render:
        from course_lib.viz.render import write_gif

        write_gif(frames, args.out)
        print(f"first episode ({len(frames)} frames) written to {args.out}")
    return 0


def play(env, act, episodes: int, seed: int, record: bool = False):
    """Returns of `episodes` episodes of act(obs), and the first one's frames if `record`.
    `env` comes from `envs.make_env`, as in training (flat float32 observations); episode i
    starts from seed + i."""
    from course_lib.envs import play_episode
    from course_lib.viz import render

    returns, frames = [], []
    for i in range(episodes):
        if record and i == 0:
            try:
                frames, total, _ = render.record_episode(env, act, seed)
            except render.RenderError as err:
                raise UsageError(str(err)) from None
            returns.append(total)
            continue
        obs, _ = env.reset(seed=seed + i)
        returns.append(play_episode(env, act, obs)[0])
    return returns, frames


def _std(values) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
