"""Ape-X with one replay shard per node (`course_lib.sharded_apex`): a shard lost with its node
costs its transitions, not the run.

Each piece is tested against the plain one it extends, which must fail where it goes on: a
`ShardSampler` raises when a shard dies (the negative control of the `SurvivingSampler`). The
run itself on a real 3-node cluster on this machine, a node removed mid-run, is notebook 08's
appendix A.3 under nbval (`course_lib.node_loss.run_one`, quick): its `ci` cell asserts that
the run ends at its budget (no hang), the learner went on updating, the lost shard is booked
and every explorer of the lost node came back.
"""


import numpy as np
import pytest
import ray

from course_lib.distributed.run_actors import wait_dead
from course_lib.replay.server import ShardStoreActor
from course_lib.replay.shard_sampler import ShardSampler
from course_lib.replay.sharded import ShardedReplay
from course_lib.sharded_apex import (
    LostShard,
    ShardedApexConfig,
    ShardOutbox,
    SurvivingSampler,
    shard_name,
)
from tests.test_sharded_replay import BATCH, BETA, filled, started

SPEC = {"item": ((), np.int64)}


def killed(actor) -> None:
    """Kill `actor` and return once it is dead: `ray.kill` only asks, and a call sent right
    after it could still be served."""
    ray.kill(actor, no_restart=True)
    wait_dead([actor], timeout_s=30)


def filled_shards(sizes=(300, 200, 100), prefix=None):
    """Shard actors holding items numbered end to end, each with priority 1."""
    shards, start = [], 0
    for k, n in enumerate(sizes):
        options = {"name": shard_name(prefix, k)} if prefix else {}
        shard = ShardStoreActor.options(**options).remote(1000, SPEC, seed=k)
        if n:
            ray.get(shard.add.remote({"item": np.arange(start, start + n)}, np.ones(n)))
        shards.append(shard)
        start += n
    return shards


def test_a_group_drawn_in_one_take_per_shard_is_one_buffers_draw(ray_local):
    """`sample_many(count)`: the same seed gives the items, shards, ids and weights of `count`
    successive draws of the local `ShardedReplay` (tested against one buffer with a chi-squared
    test in tests/test_sharded_replay.py), each batch weighted within itself."""
    _, _, p = filled(2)
    actors, local = started(ray_local, [p[:700], p[700:]])
    here = ray.get_runtime_context().get_node_id()
    sampler = SurvivingSampler(actors, [here] * 2, batch_size=BATCH, beta=BETA, seed=5)
    replay = ShardedReplay(local, seed=5)
    for _ in range(5):
        for theirs in sampler.sample_many(4):
            mine = replay.sample(BATCH, BETA)
            for name in ("item", "shard", "indices"):
                np.testing.assert_array_equal(theirs[name], mine[name])
            np.testing.assert_allclose(theirs["weights"], mine["weights"], rtol=1e-6)
            assert theirs["weights"].max() == 1.0
    assert sampler.sampled == 20 * BATCH
    assert sum(s["sampled"] for s in ray.get([a.stats.remote() for a in actors])) == 20 * BATCH


def test_the_sampler_draws_from_the_shards_left_when_one_dies(ray_local):
    shards = filled_shards()
    here = ray.get_runtime_context().get_node_id()
    sampler = SurvivingSampler(shards, [here] * 3, batch_size=64, beta=0.4, seed=0)
    [batch] = sampler.sample_many(1)
    assert set(batch["shard"]) == {0, 1, 2}
    sampler.update_priorities(batch, np.full(64, 2.0))     # writes in flight to every shard
    killed(shards[1])
    drawn = sampler.sample_many(20)
    for b in drawn:
        assert 1 not in set(b["shard"])                     # nothing from the dead shard ...
        assert set(b["item"][b["shard"] == 0]) <= set(range(300))   # ... rows where they were
        assert np.all(b["item"][b["shard"] == 2] >= 500)
        sampler.update_priorities(b, np.ones(64))
    assert [(s.size, isinstance(s, LostShard)) for s in sampler.lost] == [(200, True)]
    assert sampler.totals[1].size == 0 and sampler.totals[0].size == 300
    assert sampler.traffic["same node"] > 0 and sampler.traffic["other node"] == 0
    killed(shards[2])                                        # a second loss: shard 0 alone
    assert all(set(b["shard"]) == {0} for b in sampler.sample_many(5))
    killed(shards[0])
    with pytest.raises(RuntimeError, match="every replay shard is lost"):
        sampler.sample_many(1)
    sampler.close()                                          # no write left hanging


def test_a_plain_shard_sampler_fails_when_a_shard_dies(ray_local):
    """The negative control: without the surviving part, the same loss ends the draw."""
    shards = filled_shards()
    sampler = ShardSampler(shards, batch_size=64, beta=0.4, seed=0)
    sampler.sample()
    killed(shards[1])
    with pytest.raises(ray.exceptions.RayActorError):
        for _ in range(3):
            sampler.sample()


def outbox_on_two_shards(prefix: str, local: bool):
    """Two empty shard actors, the first said to be on another node and the second on this
    one, and an outbox of this process (send_every 10) that adds to them."""
    here = ray.get_runtime_context().get_node_id()
    shards = filled_shards((0, 0), prefix)
    return shards, ShardOutbox(None, 10, lambda batch: np.ones(len(batch["item"])),
                               prefix=prefix, nodes=["another node", here], local=local)


def test_an_outbox_sends_to_its_node_shard_then_to_a_live_one_when_it_dies(ray_local):
    shards, outbox = outbox_on_two_shards("outbox-test", local=True)
    assert outbox.shard == 1                        # the shard on its own node
    outbox.add([{"item": i} for i in range(10)])
    assert outbox.flush() == 10
    killed(shards[1])
    outbox.add([{"item": i} for i in range(10, 20)])
    assert outbox.flush() == 10                     # stored by shard 0, now its only shard
    assert outbox.shard == 0 and outbox.dead == {1}
    assert ray.get(shards[0].stats.remote())["inserted"] == 10
    assert outbox.traffic["same node"] > 0 and outbox.traffic["other node"] > 0


def test_an_outbox_without_locality_sends_each_batch_to_a_random_shard(ray_local):
    shards, outbox = outbox_on_two_shards("outbox-spread", local=False)
    for start in range(0, 400, 10):
        outbox.add([{"item": i} for i in range(start, start + 10)])
    outbox.flush()
    stored = [s["inserted"] for s in ray.get([a.stats.remote() for a in shards])]
    assert sum(stored) == 400 and min(stored) >= 100         # both shards, about half each
    assert outbox.traffic["other node"] > 0 and outbox.traffic["same node"] > 0


def test_a_sharded_config_refuses_sample_ahead_in_one_line():
    with pytest.raises(ValueError, match="set sample_ahead false"):
        ShardedApexConfig(sample_ahead=True).check()
    with pytest.raises(ValueError, match="replay_shards"):
        ShardedApexConfig(replay_shards=-1).check()
