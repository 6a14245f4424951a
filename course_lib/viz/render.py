"""Watch a trained agent: one episode of a checkpoint's policy as an animated GIF.

gymnasium draws its classic-control envs (CartPole, Pendulum) with pygame into an off-screen
surface when an env is made with `render_mode="rgb_array"`; no window and no display are
needed, so this works in a notebook, over SSH and in CI. The GIF is written by Pillow and
shown inline by `animate` (Jupyter displays `image/gif` itself: no
JavaScript, no CDN).

    render.animate(result.checkpoint)                  # a notebook: the GIF below the cell
    python -m course_lib evaluate RUN --render --out episode.gif   # a terminal
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

# pygame's SDL looks for a display and a sound card on import; rgb_array rendering needs
# neither, and headless machines (CI, a remote kernel) have neither.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


class RenderError(RuntimeError):
    """Rendering is impossible here (a missing package); the message says what to install."""


def render_frame(env) -> np.ndarray:
    """The env's current picture (H, W, 3) uint8; a one-line RenderError if pygame is missing."""
    import gymnasium as gym

    try:
        return env.render()
    except gym.error.DependencyNotInstalled as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RenderError(f"rendering {env.spec.id} needs a package that is not installed: "
                          f"{first}") from None


def record_episode(env, act, seed: int = 0, max_steps: int | None = None,
                   every: int = 1) -> tuple[list[np.ndarray], float, int]:
    """Play one episode of act(obs) from `seed`: (every `every`-th frame, return, steps).

    `env` must be made with `render_mode="rgb_array"` (`envs.make_env(id, render_mode=...)`);
    `max_steps` cuts the episode short (a short animation in quick mode)."""
    from course_lib.envs import play_episode

    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    obs, _ = env.reset(seed=seed)
    frames, played = [render_frame(env)], [0]

    def draw(obs, action, reward, next_obs, terminated, truncated) -> None:
        played[0] += 1
        if played[0] % every == 0 or terminated or truncated:
            frames.append(render_frame(env))

    total, steps = play_episode(env, act, obs, max_steps, on_step=draw)
    return frames, total, steps


def shrink(frame: np.ndarray, scale: float) -> np.ndarray:
    """The frame resized by `scale` (Pillow, antialiased): smaller GIFs in notebooks."""
    if scale == 1:
        return frame
    from PIL import Image

    image = Image.fromarray(frame)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return np.asarray(image.resize(size, Image.LANCZOS))


def write_gif(frames, path, fps: int = 30) -> None:
    """An animated GIF of rgb frames (H, W, 3) at `path` (or a binary file object), by Pillow."""
    if not len(frames):
        raise ValueError("no frames to write")
    from PIL import Image

    images = [Image.fromarray(frame) for frame in frames]
    images[0].save(path, format="GIF", save_all=True, append_images=images[1:],
                   duration=round(1000 / fps), loop=0)


def load_policy(checkpoint_path) -> tuple[dict, dict, object]:
    """(meta, checkpoint, act) of a checkpoint folder or run folder: act(obs) is the policy
    `course_lib evaluate` plays (greedy for DQN and Ape-X, tanh(mean) for SAC)."""
    from course_lib.algorithms import load_algorithm
    from course_lib.runs import load_checkpoint, read_checkpoint_meta

    meta = read_checkpoint_meta(checkpoint_path)
    algorithm = load_algorithm(meta["algo"])
    checkpoint = load_checkpoint(meta["path"])
    return meta, checkpoint, algorithm.policy(checkpoint)


def animate(checkpoint_path, seed: int = 0, max_steps: int | None = None, every: int = 2,
            scale: float = 0.5, fps: int = 25, out: str | Path | None = None):
    """One episode of a checkpoint's policy as an inline GIF (an IPython Image).

    Every `every`-th frame at `scale` of the env's size keeps the notebook small; `out` also
    writes the GIF to a file. Prints one line: the episode's return and length."""
    from IPython.display import Image

    from course_lib.envs import make_env

    meta, _, act = load_policy(checkpoint_path)
    env = make_env(meta["env_id"], render_mode="rgb_array")
    try:
        frames, total, steps = record_episode(env, act, seed, max_steps, every)
    finally:
        env.close()
    frames = [shrink(frame, scale) for frame in frames]
    buffer = io.BytesIO()
    write_gif(frames, buffer, fps=fps)
    if out is not None:
        Path(out).write_bytes(buffer.getvalue())
    cut = " (cut short)" if max_steps is not None and steps >= max_steps else ""
    print(f"{meta['algo']} {meta['env_id']}, start state seed {seed}: return {total:.1f} "
          f"over {steps} steps{cut}; {len(frames)} frames")
    return Image(data=buffer.getvalue(), format="gif")
