"""A node lost, learning kept: Ape-X with one replay shard per node on a 3-node cluster on this
machine, one node removed mid-run.

    python -m bench.node_loss [--quick] [--seeds 0] [--json bench/results/node_loss.json]

Each run starts its own cluster here (`ray.cluster_utils.Cluster`, as Ray's own node-failure
tests do: a head node and two more, `CPUS_PER_NODE` logical CPUs each, the real cores shared),
then trains `course_lib.sharded_apex.ShardedApexTrainer` (4 explorers spread over the nodes, one
replay shard per node) on CartPole-v1 to 475, with a checkpoint at the end. Three runs a seed:

| run    | explorers add to             | a node lost                                          |
| ------ | ---------------------------- | ---------------------------------------------------- |
| local  | the shard on their own node  | no: the reference                                    |
| spread | shard `index % 3`, anywhere  | no: the bytes locality saves                         |
| lost   | the shard on their own node  | yes, `LOSE_AT_S` after the start: a node other than  |
|        |                              | the head's and the learner's, with its shard and its |
|        |                              | explorers (`Cluster.remove_node`: its raylet killed) |

Per run: reached or not, seconds and env steps to the goal, the learner's updates; the bytes of
the explorers' batches sent to a shard on their own node and on another, and of the learner's
batches drawn from a shard on its node and on others (payload bytes counted by the sender and
the learner: on one machine Ray moves them between the nodes' object stores, on a real cluster
over the network). For the lost run: the share of the stored transitions the lost shard held,
the explorers it took, the seconds until Ray's actor table shows each of them alive again on
another node, and the checkpoint scored on 20 fresh episodes (`evaluate`, as a user would).

Targets (issue 40, item 3): the lost run reaches 475, without a hang, and its checkpoint holds
it (within 5%); every explorer lost is back; with locality no explorer batch crosses nodes
before the loss (its counters restart with a restarted explorer, so the lost run's adds are
counted from then on).
`--quick`: one seed, a 40-s budget, the node lost at 10 s, no goal: checks that the script works.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from bench.benchlib import Recording, parser, private_ray_tmp, seeds_of
from bench.goal_holds import GOALS, checkpoint_score, within
from course_lib.ray_tools import live_actors
from course_lib.runs import Run
from course_lib.sharded_apex import ShardedApexConfig, ShardedApexTrainer
from course_lib.trainer import run_training

NODES, CPUS_PER_NODE = 3, 1
LOSE_AT_S = 15.0                 # seconds after the run's start (its clock: start-up counted)
RUNS = {"local": (True, False), "spread": (False, False), "lost": (True, True)}
#: the head detects a node gone within about 1.5 s (Ray's default: 15 s)
HEAD = {"num_cpus": CPUS_PER_NODE, "object_store_memory": 300 * 2**20,
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3}}


def config(seed: int, quick: bool, local: bool) -> ShardedApexConfig:
    """The CLI default's Ape-X (4 explorers) with one shard per node; quick: 40 s, no goal."""
    cfg = ShardedApexConfig(seed=seed, local_shards=local, max_time_s=240.0,
                            max_worker_restarts=10)
    return cfg.updated({"max_time_s": 40.0, "target_return": None, "max_env_steps": None}
                       if quick else {})


@contextlib.contextmanager
def local_cluster():
    """A head node and NODES - 1 more on this machine, this process connected as the driver."""
    if ray.is_initialized():
        ray.shutdown()                  # a notebook's own Ray: this run needs the cluster's
    cluster = Cluster(initialize_head=True, head_node_args=HEAD)
    try:
        for _ in range(NODES - 1):
            cluster.add_node(num_cpus=CPUS_PER_NODE, object_store_memory=300 * 2**20)
        ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
        cluster.wait_for_nodes()
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


class NodeLoss(threading.Thread):
    """Removes one node of `cluster` `at_s` seconds into the run, one that holds a shard and
    no learner (never the head's); then watches Ray's actor table until every explorer that
    ran there is alive again."""

    def __init__(self, cluster: Cluster, trainer: ShardedApexTrainer, at_s: float):
        super().__init__(daemon=True)
        self.cluster, self.trainer, self.at_s = cluster, trainer, at_s
        self.stopped, self.report = threading.Event(), {}

    def run(self) -> None:
        t = self.trainer
        if self.stopped.wait(max(0.0, t.start + self.at_s - time.perf_counter())):
            return
        learner = ray.get(t.learner_actor.__ray_call__.remote(
            lambda self: ray.get_runtime_context().get_node_id()))
        node = next(n for n in self.cluster.worker_nodes if n.node_id != learner)
        gone = [i for i, n in enumerate(t.worker_nodes) if n == node.node_id]
        before = {name: a["restarts"] for name, a in self.table().items()}
        sizes = [min(n, t.cfg.buffer_size // t.cfg.replay_shards) for n in t.shard_inserted]
        shard = t.shard_nodes.index(node.node_id)
        self.cluster.remove_node(node)
        lost_at = time.perf_counter()
        self.report = {"at_s": round(lost_at - t.start, 1), "node": node.node_id, "shard": shard,
                       "updates": t.counters.learner_updates, "env_steps": t.counters.env_steps,
                       "replay_share": round(sizes[shard] / max(1, sum(sizes)), 3),
                       "explorers": gone, "back_s": None}
        names = [f"{t.worker_name} {i}" for i in gone]
        while not self.stopped.wait(0.25):
            table = self.table()
            if all(table.get(n, {}).get("restarts", 0) > before.get(n, 0)
                   and table[n]["state"] == "ALIVE" for n in names):
                self.report["back_s"] = round(time.perf_counter() - lost_at, 1)
                return

    def table(self) -> dict[str, dict]:
        prefix = f"{self.trainer.actors.prefix}:"
        return {a["name"].removeprefix(prefix): a for a in live_actors()
                if a["name"].startswith(prefix)}


def traffic(trainer: ShardedApexTrainer) -> dict:
    """Bytes the explorers sent and the learner drew, same node and other node (live actors'
    counters: a restarted explorer's start again)."""
    adds = {"same node": 0, "other node": 0}
    for worker in trainer.workers:
        with contextlib.suppress(ray.exceptions.RayError):
            for key, n in ray.get(worker.__ray_call__.remote(
                    lambda self: self.outbox.traffic), timeout=10).items():
                adds[key] += n
    stats = ray.get(trainer.learner_actor.replay_stats.remote(), timeout=30)
    return {"adds": adds, "draws": stats["traffic"], "lost": stats["lost"]}


def run_one(seed: int, quick: bool, name: str, folder: Path) -> dict:
    """One run (`RUNS[name]`) on a cluster of its own; what it measured."""
    local, lose = RUNS[name]
    cfg = config(seed, quick, local)
    with local_cluster() as cluster:
        trainer = ShardedApexTrainer(cfg)
        loss = NodeLoss(cluster, trainer, 10.0 if quick else LOSE_AT_S)
        seen: dict = {}
        close = trainer.close
        trainer.close = lambda: (loss.stopped.set(), seen.update(traffic(trainer)), close())
        if lose:
            loss.start()
        run = Run.create(folder / name, trainer.algo, cfg.env_id, {"config": cfg.to_dict()},
                         checkpoint_at_end=True)
        try:
            result = run_training(trainer, cfg, run=run)
        finally:
            run.close()
        if lose:
            loss.join(timeout=5)
        last = result.last
        out = {"run": name, "seed": seed, "reached": result.reached and not quick,
               "stopped_by": result.stopped_by, "seconds": round(last["wall_s"], 1),
               "env_steps": trainer.counters.env_steps,
               "updates": trainer.counters.learner_updates,
               "explorer_nodes": len(set(trainer.worker_nodes)), **seen,
               "node_lost": loss.report or None}
    if lose:
        out["checkpoint_score"], _ = checkpoint_score(run.path, f"lost run, seed {seed}")
        out["holds"] = (not quick) and within(out["checkpoint_score"], GOALS["apex:CartPole-v1"])
    return out


def check_targets(runs: list[dict]) -> dict:
    lost = [r for r in runs if r["run"] == "lost"]
    local = [r for r in runs if r["run"] == "local"]
    kept = sum(r["reached"] and r["holds"] and (r["node_lost"] or {}).get("back_s") is not None
               for r in lost)
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
    return {"config": {"nodes": NODES, "cpus_per_node": CPUS_PER_NODE, "lose_at_s": LOSE_AT_S,
                       "seeds": list(seeds), "quick": quick},
            "runs": runs, "targets": check_targets(runs)}


def line(r: dict) -> str:
    """One run in one line."""
    mb = {k: {w: round(n / 2**20, 1) for w, n in r[k].items()} for k in ("adds", "draws")}
    text = (f"seed {r['seed']} {r['run']:>6}: {'reached' if r['reached'] else r['stopped_by']} "
            f"at {r['env_steps']:,} env steps, {r['seconds']:.1f} s, {r['updates']:,} updates; "
            f"adds MB {mb['adds']}, draws MB {mb['draws']}")
    if r["node_lost"]:
        n = r["node_lost"]
        text += (f"; node lost at {n['at_s']} s with shard {n['shard']} "
                 f"({n['replay_share']:.0%} of the replay) and explorers {n['explorers']}, "
                 f"back in {n['back_s']} s; checkpoint {r['checkpoint_score']:.1f}")
    return text


def section(r: dict) -> str:
    """bench/RESULTS.md's block: a table of the runs."""
    from bench.benchreport import table

    rows = [{**x, "adds_other_mb": round(x["adds"]["other node"] / 2**20, 1),
             "adds_same_mb": round(x["adds"]["same node"] / 2**20, 1),
             "draws_other_mb": round(x["draws"]["other node"] / 2**20, 1),
             "lost_at": (x["node_lost"] or {}).get("at_s", ""),
             "share": f"{x['node_lost']['replay_share']:.0%}" if x["node_lost"] else "",
             "back_s": (x["node_lost"] or {}).get("back_s", ""),
             "score": x.get("checkpoint_score", "")} for x in r["runs"]]
    c = r["config"]
    return "\n\n".join([
        f"Ape-X, 4 explorers, one replay shard per node, on a {c['nodes']}-node cluster on this "
        f"machine ({c['cpus_per_node']} logical CPU a node); *lost*: a node with a shard and "
        f"explorers removed at about {c['lose_at_s']:g} s. MB: payload sent by explorers (adds) "
        "and drawn by the learner (draws), to or from a shard on the same node or another.",
        table(rows, [("run", "run"), ("seed", "seed"), ("reached", "reached"),
                     ("s", "seconds"), ("env steps", "env_steps"), ("updates", "updates"),
                     ("adds, same node MB", "adds_same_mb"),
                     ("adds, other node MB", "adds_other_mb"),
                     ("draws, other node MB", "draws_other_mb"), ("node lost at s", "lost_at"),
                     ("its share of the replay", "share"), ("explorers back in s", "back_s"),
                     ("checkpoint, 20 fresh episodes", "score")])])


def main() -> None:
    args = parser(__doc__, "node_loss", "one seed, 40 s, no goal", seeds=True).parse_args()
    recording = Recording()
    result = run(seeds_of(args, full=(0,)), args.quick)
    print(section(result))
    for name, t in result["targets"].items():
        print(f"target {name}: {t['value']} vs {t['target']}: {'met' if t['met'] else 'MISSED'}")
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
