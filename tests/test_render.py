"""course_lib.render: a few frames of a real CartPole and Pendulum episode, off-screen."""

import io

import numpy as np
import pytest
from PIL import Image

from course_lib import render
from course_lib.envs import make_env


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
