"""course_lib.viz.render: a few frames of a real CartPole and Pendulum episode, off-screen."""

import io

import numpy as np
import pytest
from PIL import Image

from course_lib.envs import make_env
from course_lib.viz import render


@pytest.mark.parametrize("env_id, size", [("CartPole-v1", (400, 600)), ("Pendulum-v1", (500, 500))])
def test_record_episode_renders_the_moving_env(env_id, size):
    env = make_env(env_id, render_mode="rgb_array")
    act = (lambda obs: 1) if env_id == "CartPole-v1" else (lambda obs: np.array([2.0], np.float32))
    frames, total, steps = render.record_episode(env, act, seed=3, max_steps=12, every=3)
    env.close()
    assert steps == 12 or (env_id == "CartPole-v1" and steps < 12)   # pushing right may topple it
    assert len(frames) == 1 + steps // 3 + (steps % 3 != 0)          # start + every 3rd + last
    assert all(f.shape == (*size, 3) and f.dtype == np.uint8 for f in frames)
    assert len({f.tobytes() for f in frames}) == len(frames)         # the picture moves
    assert np.isfinite(total)


def test_write_gif_to_a_buffer_keeps_every_frame_and_shrink_halves():
    frames = [render.shrink(np.full((40, 60, 3), 30 * i, np.uint8), 0.5) for i in range(5)]
    buffer = io.BytesIO()
    render.write_gif(frames, buffer, fps=10)
    with Image.open(io.BytesIO(buffer.getvalue())) as gif:
        assert gif.n_frames == 5 and gif.size == (30, 20)
        assert gif.info["duration"] == 100


def test_write_gif_refuses_no_frames(tmp_path):
    with pytest.raises(ValueError, match="no frames"):
        render.write_gif([], tmp_path / "x.gif")


def test_record_episode_refuses_every_below_one():
    env = make_env("CartPole-v1", render_mode="rgb_array")
    with pytest.raises(ValueError, match="every"):
        render.record_episode(env, lambda obs: 0, every=0)
    env.close()


def test_every_episode_loop_is_envs_play_episode(monkeypatch):
    """One loop plays an episode: it hands each step to `on_step` and stops at the episode's
    end or after `max_steps`; the command line's `play`, rendering and REINFORCE's sampling
    all play through it."""
    from course_lib import cli, envs
    from course_lib.pg import reinforce

    env = make_env("CartPole-v1")
    seen = []
    obs, _ = env.reset(seed=0)
    total, steps = envs.play_episode(env, lambda o: 0, obs, on_step=lambda *s: seen.append(s))
    assert steps == len(seen) > 1 and total == sum(step[2] for step in seen)
    assert seen[-1][4] and not any(step[4] or step[5] for step in seen[:-1])  # pushed over, once
    assert np.array_equal(seen[1][0], seen[0][3])      # each step starts where the last one led
    obs, _ = env.reset(seed=0)
    assert envs.play_episode(env, lambda o: 0, obs, max_steps=3) == (3.0, 3)

    played, real = [], envs.play_episode

    def counting(env, act, obs, max_steps=None, on_step=None):
        played.append(max_steps)
        return real(env, act, obs, max_steps, on_step)

    monkeypatch.setattr(envs, "play_episode", counting)
    monkeypatch.setattr(reinforce, "play_episode", counting)
    returns, _ = cli.play(env, lambda o: 0, episodes=2, seed=0)
    assert len(played) == 2 and returns[0] == total
    reinforce.sample_episodes(env, reinforce.make_policy(env), 1, np.random.default_rng(0))
    assert len(played) == 3
    env.close()
    drawn = make_env("CartPole-v1", render_mode="rgb_array")
    render.record_episode(drawn, lambda o: 0, seed=0, max_steps=2)
    drawn.close()
    assert played[-1] == 2
