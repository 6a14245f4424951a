"""The parameter server: versioning, gradient steps, save/load and errors, plain and as an actor."""

import os

import numpy as np
import pytest
import ray

from course_lib.param_server import ParameterStore, ParameterStoreActor, pull_weights
from course_lib.ray_tools import get_result


def weights(scale=1.0):
    return {"w": np.full((3, 2), scale, np.float32), "b": np.arange(2, dtype=np.float32)}


# --- the plain store ---------------------------------------------------------------------------

def test_versions_count_pushes_and_pull_only_returns_changed_weights():
    store = ParameterStore()
    assert store.push("policy", weights(1.0)) == 1
    version, pulled = store.pull("policy")
    assert version == 1 and np.array_equal(pulled["w"], weights(1.0)["w"])
    assert store.pull("policy", known_version=1) == (1, None)       # unchanged: nothing sent
    assert store.push("policy", weights(2.0)) == 2
    version, pulled = store.pull("policy", known_version=1)
    assert version == 2 and pulled["w"][0, 0] == 2.0
    assert store.version("policy") == 2 and store.names() == ["policy"]


def test_push_copies_the_callers_arrays():
    store, mine = ParameterStore(), weights(1.0)
    store.push("policy", mine)
    mine["w"][:] = 99
    assert store.pull("policy")[1]["w"][0, 0] == 1.0


def test_push_gradients_takes_one_sgd_step_and_keeps_the_dtype():
    store = ParameterStore()
    store.push("q", weights(1.0))
    grads = {"w": np.full((3, 2), 2.0), "b": np.ones(2)}             # float64 gradients
    assert store.push_gradients("q", grads, lr=0.1) == 2
    _, pulled = store.pull("q")
    np.testing.assert_allclose(pulled["w"], 1.0 - 0.1 * 2.0)
    np.testing.assert_allclose(pulled["b"], np.arange(2) - 0.1)
    assert pulled["w"].dtype == np.float32


def test_later_pushes_must_match_the_first_push():
    store = ParameterStore()
    store.push("policy", weights())
    with pytest.raises(ValueError, match=r"'w' has shape \(2, 3\), expected \(3, 2\)"):
        store.push("policy", {"w": np.zeros((2, 3)), "b": np.zeros(2)})
    with pytest.raises(ValueError, match=r"missing \['b'\], unexpected \['c'\]"):
        store.push("policy", {"w": np.zeros((3, 2)), "c": np.zeros(2)})
    with pytest.raises(ValueError, match=r"'b' has shape \(3,\)"):
        store.push_gradients("policy", {"w": np.zeros((3, 2)), "b": np.zeros(3)}, lr=0.1)
    with pytest.raises(ValueError, match="name"):
        store.push("a/b", weights())
    assert store.version("policy") == 1                              # nothing was changed


def test_unknown_name_is_a_key_error_listing_known_names():
    store = ParameterStore()
    store.push("policy", weights())
    with pytest.raises(KeyError) as info:
        store.pull("critic")
    message = str(info.value)
    assert message == "no parameters named 'critic'; known names: ['policy']"


def test_save_load_round_trip_keeps_weights_and_versions(tmp_path):
    store = ParameterStore()
    store.push("policy", weights(1.0))
    store.push("policy", weights(3.0))
    store.push("critic", {"v": np.ones(4, np.float64)})
    path = store.save(tmp_path / "ps.npz")
    assert os.listdir(tmp_path) == ["ps.npz"]                        # no temp file left
    fresh = ParameterStore()
    assert fresh.load(path) == ["critic", "policy"]
    assert fresh.version("policy") == 2 and fresh.version("critic") == 1
    for name in ("policy", "critic"):
        for key, value in store.pull(name)[1].items():
            loaded = fresh.pull(name)[1][key]
            assert loaded.dtype == value.dtype and np.array_equal(loaded, value)


def test_loading_into_a_used_store_moves_versions_forward(tmp_path):
    store = ParameterStore()
    store.push("policy", weights(1.0))
    path = store.save(tmp_path / "ps.npz")
    for _ in range(3):
        store.push("policy", weights(5.0))                          # now at version 4
    store.load(path)
    assert store.version("policy") == 5                              # > 4: pullers see a change
    assert store.pull("policy", known_version=4)[1]["w"][0, 0] == 1.0


def test_push_gradients_leaves_arrays_already_pulled_unchanged():
    store = ParameterStore()
    store.push("q", weights(1.0))
    _, before = store.pull("q")
    store.push_gradients("q", {"w": np.ones((3, 2)), "b": np.ones(2)}, lr=0.5)
    assert np.array_equal(before["w"], weights(1.0)["w"])            # a reader's copy: as pulled
    assert np.array_equal(before["b"], weights(1.0)["b"])
    _, after = store.pull("q")
    assert after["w"][0, 0] == 0.5 and after["w"].dtype == np.float32


def _file_with_only_critic(tmp_path):
    other = ParameterStore()
    other.push("critic", {"v": np.ones(4)})
    return other.save(tmp_path / "critic_only.npz")


def test_a_name_dropped_by_load_does_not_restart_at_version_one(tmp_path):
    store = ParameterStore()
    for scale in (1.0, 2.0, 3.0):
        store.push("policy", weights(scale))                         # policy at version 3
    store.load(_file_with_only_critic(tmp_path))                     # drops policy
    assert store.names() == ["critic"]
    assert store.push("policy", weights(4.0)) == 4                   # not 1: never backwards


def test_a_name_readded_by_load_moves_past_every_version_it_had(tmp_path):
    store = ParameterStore()
    store.push("policy", weights(1.0))
    saved = store.save(tmp_path / "v1.npz")                          # policy saved at version 1
    store.push("policy", weights(2.0))
    store.push("policy", weights(3.0))                               # version 3
    store.load(_file_with_only_critic(tmp_path))                     # dropped ...
    store.load(saved)                                                # ... and back, from v1
    assert store.version("policy") == 4
    assert store.pull("policy", known_version=3)[1]["w"][0, 0] == 1.0


def test_loading_a_missing_file_says_where_and_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no parameter-server file at .*nope\.npz.*save"):
        ParameterStore().load(tmp_path / "nope.npz")


@pytest.mark.parametrize("content", ["garbage", "truncated", "other_npz", "npy"])
def test_loading_a_file_of_another_kind_is_a_value_error(tmp_path, content):
    path = tmp_path / "bad.npz"
    if content == "garbage":
        path.write_bytes(b"not a zip file at all")
    elif content == "truncated":
        good = ParameterStore()
        good.push("policy", weights())
        good.save(path)
        path.write_bytes(path.read_bytes()[:100])
    elif content == "other_npz":
        with open(path, "wb") as f:
            np.savez(f, x=np.zeros(3))
    else:
        with open(path, "wb") as f:
            np.save(f, np.zeros(3))
    with pytest.raises(ValueError, match="is not a parameter-server file"):
        ParameterStore().load(path)


# --- the actor -----------------------------------------------------------------------------------

def test_actor_pull_shares_one_object_per_version(ray_local):
    ps = ParameterStoreActor.remote()
    assert get_result(ps.push.remote("policy", weights(1.0))) == 1
    v1, ref_a = ray.get(ps.pull.remote("policy"))
    v2, ref_b = ray.get(ps.pull.remote("policy"))
    assert v1 == v2 == 1 and isinstance(ref_a, ray.ObjectRef) and ref_a == ref_b
    version, pulled = pull_weights(ps, "policy")
    assert version == 1 and np.array_equal(pulled["w"], weights(1.0)["w"])
    assert pull_weights(ps, "policy", known_version=1) == (1, None)
    get_result(ps.push_gradients.remote("policy", weights(1.0), 0.5))
    version, pulled = pull_weights(ps, "policy", known_version=1)
    assert version == 2 and pulled["w"][0, 0] == 0.5
    assert ray.get(ps.pull.remote("policy"))[1] != ref_a             # a new version, a new object
    assert get_result(ps.names.remote()) == ["policy"]
    ray.kill(ps)


def test_actor_errors_keep_their_type_and_one_line_message(ray_local, tmp_path):
    ps = ParameterStoreActor.remote()
    get_result(ps.push.remote("policy", weights()))
    bad = {"w": np.zeros((2, 3)), "b": np.zeros(2)}
    with pytest.raises(ValueError):                  # Ray's RayTaskError(ValueError) is one
        ray.get(ps.push.remote("policy", bad))
    with pytest.raises(ValueError) as info:
        get_result(ps.push.remote("policy", bad))
    assert type(info.value) is ValueError
    assert str(info.value) == ("push('policy'): 'w' has shape (2, 3), expected (3, 2) "
                               "(set by the first push)")
    with pytest.raises(KeyError, match=r"known names: \['policy'\]"):
        pull_weights(ps, "critic")
    with pytest.raises(FileNotFoundError, match="no parameter-server file"):
        get_result(ps.load.remote(str(tmp_path / "missing.npz")))
    (tmp_path / "junk.npz").write_text("junk")
    with pytest.raises(ValueError, match="is not a parameter-server file") as info:
        get_result(ps.load.remote(str(tmp_path / "junk.npz")))
    assert "\n" not in str(info.value)
    ray.kill(ps)


def test_actor_never_serves_an_old_cached_object_after_load_drops_a_name(ray_local, tmp_path):
    ps = ParameterStoreActor.remote()
    get_result(ps.push.remote("policy", weights(1.0)))
    assert pull_weights(ps, "policy")[1]["w"][0, 0] == 1.0          # version 1 is now cached
    get_result(ps.load.remote(_file_with_only_critic(tmp_path)))     # drops policy
    get_result(ps.push.remote("policy", weights(5.0)))
    version, pulled = pull_weights(ps, "policy")
    assert version > 1 and pulled["w"][0, 0] == 5.0                 # the new weights, not v1's
    ray.kill(ps)


def test_actor_save_and_load_round_trip(ray_local, tmp_path):
    ps = ParameterStoreActor.remote()
    get_result(ps.push.remote("policy", weights(1.0)))
    get_result(ps.push.remote("policy", weights(2.0)))
    path = get_result(ps.save.remote(str(tmp_path / "ps.npz")))
    restored = ParameterStoreActor.remote()
    assert get_result(restored.load.remote(path)) == ["policy"]
    version, pulled = pull_weights(restored, "policy")
    assert version == 2 and np.array_equal(pulled["w"], weights(2.0)["w"])
    ray.kill(ps)
    ray.kill(restored)
