"""A node lost mid-run: Ape-X with one replay shard per node on a 3-node Ray cluster on this
machine, one node removed while it trains (notebook 08's appendix A.3; bench/node_loss.py
repeats it beside two runs that lose nothing).

    with local_cluster() as cluster:          # a head node and two more, this process the driver
        trainer = ShardedApexTrainer(cfg)
        NodeLoss(cluster, trainer, 15_000).start()   # removes a node at 15,000 env steps
        run_training(trainer, cfg)

The cluster is `ray.cluster_utils.Cluster`, the tool Ray's own node-failure tests use: each node
is a real raylet with its own object store, and `remove_node` kills one, as when a machine goes
away. The node removed is one other than the head's and the learner's: the learner's network
and optimiser live only in its process (a run whose learner is lost continues from its
checkpoint, notebook 05's appendix). `run_one` is one whole run with its report; `line` says
it in one line.

The loss and the quick run's end are counted in env steps, not seconds. A node's explorers
restart within a few thousand of the other explorers' env steps on a fast machine and on one
three times slower alike; a clock that counts start-up ended a slow, busy machine's quick run
before its explorers were back.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import numpy as np
import ray
from ray.cluster_utils import Cluster

from course_lib.algorithms import load_algorithm
from course_lib.envs import evaluate_policy
from course_lib.runs import Run, list_checkpoints, load_checkpoint
from course_lib.sharded_apex import ShardedApexConfig, ShardedApexTrainer
from course_lib.trainer import run_training

NODES, CPUS_PER_NODE = 3, 1
LOSE_AT_ENV_STEPS = 15_000       # the node goes once the explorers made this many env steps
QUICK_LOSE_AT, QUICK_ENV_STEPS = 3_000, 12_000    # quick: the loss, and the run's end
#: run name -> (explorers add to their own node's shard, a node is lost)
RUNS = {"local": (True, False), "spread": (False, False), "lost": (True, True)}
#: the head notices a node gone within about 1.5 s (Ray's default: 15 s); no dashboard: nothing
#: here reads it, and it is one process fewer on 2 cores
HEAD = {"num_cpus": CPUS_PER_NODE, "object_store_memory": 300 * 2**20, "include_dashboard": False,
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3}}


def config(seed: int, quick: bool, local: bool) -> ShardedApexConfig:
    """The CLI default's Ape-X (4 explorers) with one shard per node, at most 240 s; quick:
    `QUICK_ENV_STEPS` env steps, no goal."""
    cfg = ShardedApexConfig(seed=seed, local_shards=local, max_time_s=240.0,
                            max_worker_restarts=10)
    return cfg.updated({"target_return": None, "max_env_steps": QUICK_ENV_STEPS}
                       if quick else {})


@contextlib.contextmanager
def local_cluster():
    """A head node and NODES - 1 more on this machine, this process connected as the driver
    (a Ray already started here, a notebook's say, is shut down first)."""
    if ray.is_initialized():
        ray.shutdown()
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
    """Removes one node of `cluster` once the explorers have made `at_env_steps` env steps (or
    later, once the learner has made its first updates), one that holds a shard and no learner
    (never the head); then watches Ray's actor table until every explorer that ran there is
    alive again. `report`: what was lost, and when it was back."""

    def __init__(self, cluster: Cluster, trainer: ShardedApexTrainer, at_env_steps: int):
        super().__init__(daemon=True)
        self.cluster, self.trainer, self.at_env_steps = cluster, trainer, at_env_steps
        self.stopped, self.report = threading.Event(), {}

    def run(self) -> None:
        t = self.trainer
        # the driver's counters, as of its last iteration
        while t.counters.env_steps < self.at_env_steps or t.counters.learner_updates == 0:
            if self.stopped.wait(0.25):
                return
        learner = ray.get(t.learner_actor.__ray_call__.remote(
            lambda self: ray.get_runtime_context().get_node_id()))
        node = next(n for n in self.cluster.worker_nodes if n.node_id != learner)
        gone = [i for i, n in enumerate(t.worker_nodes) if n == node.node_id]
        before = {name: a["restarts"] for name, a in t.actors.table().items()}
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
            table = t.actors.table()
            if all(table.get(n, {}).get("restarts", 0) > before.get(n, 0)
                   and table[n]["state"] == "ALIVE" for n in names):
                self.report["back_s"] = round(time.perf_counter() - lost_at, 1)
                return


def traffic(trainer: ShardedApexTrainer) -> dict:
    """Bytes the explorers sent and the learner drew, to or from a shard on the same node or
    another (live actors' counters: a restarted explorer's start again), and the shards lost."""
    adds = {"same node": 0, "other node": 0}
    for worker in trainer.workers:
        with contextlib.suppress(ray.exceptions.RayError):
            for key, n in ray.get(worker.__ray_call__.remote(
                    lambda self: self.outbox.traffic), timeout=10).items():
                adds[key] += n
    stats = ray.get(trainer.learner_actor.replay_stats.remote(), timeout=30)
    return {"adds": adds, "draws": stats["traffic"], "lost": stats["lost"]}


def checkpoint_score(run_path: Path, env_id: str, episodes: int = 20) -> float:
    """The mean return of the run's newest checkpoint on `episodes` fresh episodes (seeds
    1000 and up: none the training evaluated), played greedily as `evaluate` plays it."""
    act = load_algorithm("apex").policy(load_checkpoint(list_checkpoints(run_path)[-1]))
    returns = evaluate_policy(lambda obs: np.array([act(o) for o in obs]), env_id,
                              episodes=episodes, seed=1000)    # `act` takes one observation
    return float(returns.mean())


def run_one(seed: int, quick: bool, name: str, folder: Path) -> dict:
    """One run (`RUNS[name]`) on a cluster of its own, with a checkpoint at the end; what it
    measured (see `line`)."""
    local, lose = RUNS[name]
    cfg = config(seed, quick, local)
    with local_cluster() as cluster:
        trainer = ShardedApexTrainer(cfg)
        loss = NodeLoss(cluster, trainer, QUICK_LOSE_AT if quick else LOSE_AT_ENV_STEPS)
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
        out = {"run": name, "seed": seed, "reached": result.reached and not quick,
               "stopped_by": result.stopped_by, "seconds": round(result.last["wall_s"], 1),
               "env_steps": trainer.counters.env_steps,
               "updates": trainer.counters.learner_updates,
               "explorer_nodes": len(set(trainer.worker_nodes)), **seen,
               "node_lost": loss.report or None}
    out["checkpoint_score"] = round(checkpoint_score(run.path, cfg.env_id), 1)
    return out


def line(r: dict) -> str:
    """One run in one line."""
    mb = {k: {w: round(n / 2**20, 1) for w, n in r[k].items()} for k in ("adds", "draws")}
    text = (f"seed {r['seed']} {r['run']:>6}: {'reached' if r['reached'] else r['stopped_by']} "
            f"at {r['env_steps']:,} env steps, {r['seconds']:.1f} s, {r['updates']:,} updates; "
            f"adds MB {mb['adds']}, draws MB {mb['draws']}")
    if r["node_lost"]:
        n = r["node_lost"]
        text += (f"; node lost at {n['at_s']} s ({n['env_steps']:,} env steps) with shard "
                 f"{n['shard']} ({n['replay_share']:.0%} of the replay) and explorers "
                 f"{n['explorers']}, back in {n['back_s']} s")
    return text + f"; checkpoint on 20 fresh episodes {r['checkpoint_score']:.1f}"
