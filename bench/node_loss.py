"""A node lost, learning kept: Ape-X with one replay shard per node on a 3-node cluster on this
machine, one node removed mid-run.

    python -m bench.node_loss [--quick] [--seeds 0] [--json bench/results/node_loss.json]

Each run (`course_lib.node_loss.run_one`, what notebook 08 runs) starts its own cluster here
(`ray.cluster_utils.Cluster`, as Ray's own node-failure tests do: a head node and two more,
`CPUS_PER_NODE` logical CPUs each, the real cores shared), then trains
`course_lib.sharded_apex.ShardedApexTrainer` (4 explorers spread over the nodes, one replay
shard per node) on CartPole-v1 to 475, with a checkpoint at the end. Three runs a seed:

| run    | explorers add to             | a node lost                                          |
| ------ | ---------------------------- | ---------------------------------------------------- |
| local  | the shard on their own node  | no: the reference                                    |
| spread | a random shard, each batch   | no: the bytes locality saves (RLlib's old Ape-X)     |
| lost   | the shard on their own node  | yes, at `LOSE_AT_ENV_STEPS` env steps: a node other  |
|        |                              | than the head's and the learner's, with its shard    |
|        |                              | and its explorers (`Cluster.remove_node`: its raylet |
|        |                              | killed)                                              |

Per run: reached or not, seconds and env steps to the goal, the learner's updates; the bytes of
the explorers' batches sent to a shard on their own node and on another, and of the learner's
batches drawn from a shard on its node and on others (payload bytes counted by the sender and
the learner: on one machine Ray moves them between the nodes' object stores, on a real cluster
over the network). For the lost run: the share of the stored transitions the lost shard held,
the explorers it took, the seconds until Ray's actor table shows each of them alive again on
another node. Every run's checkpoint is scored on 20 fresh episodes.

Targets (issue 40, item 3): the lost run reaches 475, without a hang, and its checkpoint holds
it (within 5%); every explorer lost is back; in the local run no explorer batch crosses nodes.
`--quick`: one seed, 12,000 env steps, the node lost at 3,000, no goal: checks that the script
works.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.benchlib import Recording, parser, private_ray_tmp, seeds_of
from bench.goal_holds import GOALS, within
from course_lib.node_loss import CPUS_PER_NODE, LOSE_AT_ENV_STEPS, NODES, RUNS, line, run_one


def check_targets(runs: list[dict]) -> dict:
    lost = [r for r in runs if r["run"] == "lost"]
    local = [r for r in runs if r["run"] == "local"]
    kept = sum(r["reached"] and within(r["checkpoint_score"], GOALS["apex:CartPole-v1"])
               and (r["node_lost"] or {}).get("back_s") is not None for r in lost)
    crossed = sum(r["adds"]["other node"] for r in local)
    return {"node lost: reached 475, checkpoint held, explorers back": {
                "value": f"{kept}/{len(lost)}", "target": f"{len(lost)}/{len(lost)}",
                "met": kept == len(lost)},
            "with locality, explorer bytes that crossed nodes": {
                "value": crossed, "target": 0, "met": crossed == 0}}


def run(seeds, quick: bool, log=print) -> dict:
    runs = []
    with private_ray_tmp(), tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for name in RUNS:
                runs.append(run_one(seed, quick, name, Path(tmp)))
                log(line(runs[-1]))
    return {"config": {"nodes": NODES, "cpus_per_node": CPUS_PER_NODE,
                       "lose_at_env_steps": LOSE_AT_ENV_STEPS, "seeds": list(seeds),
                       "quick": quick},
            "runs": runs, "targets": check_targets(runs)}


def section(r: dict) -> str:
    """bench/RESULTS.md's block: a table of the runs."""
    from bench.benchreport import table

    rows = [{**x, "adds_other_mb": round(x["adds"]["other node"] / 2**20, 1),
             "adds_same_mb": round(x["adds"]["same node"] / 2**20, 1),
             "draws_other_mb": round(x["draws"]["other node"] / 2**20, 1),
             "lost_at": (x["node_lost"] or {}).get("at_s", ""),
             "share": f"{x['node_lost']['replay_share']:.0%}" if x["node_lost"] else "",
             "back_s": (x["node_lost"] or {}).get("back_s", ""),
             "score": x["checkpoint_score"]} for x in r["runs"]]
    c = r["meta"]["config"]
    return "\n\n".join([
        f"Ape-X, 4 explorers, one replay shard per node, on a {c['nodes']}-node cluster on this "
        f"machine ({c['cpus_per_node']} logical CPU a node); *lost*: a node with a shard and "
        f"explorers removed once the explorers had made {c['lose_at_env_steps']:,} env steps. "
        "MB: payload sent by explorers (adds) and drawn by the learner (draws), to or from a "
        "shard on the same node or another.",
        table(rows, [("run", "run"), ("seed", "seed"), ("reached", "reached"),
                     ("s", "seconds"), ("env steps", "env_steps"), ("updates", "updates"),
                     ("adds, same node MB", "adds_same_mb"),
                     ("adds, other node MB", "adds_other_mb"),
                     ("draws, other node MB", "draws_other_mb"), ("node lost at s", "lost_at"),
                     ("its share of the replay", "share"), ("explorers back in s", "back_s"),
                     ("checkpoint, 20 fresh episodes", "score")])])


def main() -> None:
    args = parser(__doc__, "node_loss", "one seed, 12,000 env steps, no goal",
                  seeds=True).parse_args()
    recording = Recording()
    result = recording.write(run(seeds_of(args, full=(0,)), args.quick), args.json)
    print(section(result))
    for name, t in result["targets"].items():
        print(f"target {name}: {t['value']} vs {t['target']}: {'met' if t['met'] else 'MISSED'}")


if __name__ == "__main__":
    main()
