"""Capture the Ray dashboard that notebook 00 shows: notebooks/figures/ray_dashboard.png.

    python scripts/dashboard_screenshot.py [--out notebooks/figures/ray_dashboard.png]

Starts a private local Ray with its dashboard (`course_lib.init_ray(dashboard=True)`), gives it
something to show (two actors alive and a few finished tasks), opens the dashboard's Actors page in
headless Chromium (the one the browser tests use, `make chromium`), waits until the page has
drawn, and saves a screenshot. Re-run it after a Ray upgrade changes the dashboard's look.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import ray

if __package__:          # `python -m scripts.dashboard_screenshot`
    from scripts.slides import chromium_args, find_chromium
else:                    # `python scripts/dashboard_screenshot.py`: this folder is on sys.path
    from slides import chromium_args, find_chromium

ROOT = Path(__file__).resolve().parents[1]


@ray.remote
class Counter:
    """The actor of notebook 01, so the Actors page lists something familiar."""

    def __init__(self):
        self.value = 0

    def increment(self) -> int:
        self.value += 1
        return self.value


@ray.remote
def square(x: int) -> int:
    time.sleep(0.2)
    return x * x


def capture(out: Path, settle_s: float = 8.0) -> Path:
    """Start Ray with its dashboard, load some work, screenshot the Actors page to `out`."""
    from playwright.sync_api import sync_playwright

    from course_lib import init_ray

    os.environ.setdefault("RAY_TMPDIR", tempfile.mkdtemp(prefix="r-dash"))
    # A private instance for one picture: no token prompt over the page (attendees get one;
    # notebook 00 says how to answer it), and no token written to ~/.ray.
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ctx = init_ray(dashboard=True)
    try:
        counters = [Counter.remote() for _ in range(2)]
        ray.get([c.increment.remote() for c in counters])
        ray.get([square.remote(x) for x in range(8)])
        url = f"http://{ctx.dashboard_url}/#/actors"
        with sync_playwright() as p:
            args = [a for a in chromium_args() if a != "--headless"]
            browser = p.chromium.launch(executable_path=find_chromium(), args=args,
                                        timeout=60_000)
            page = browser.new_page(viewport={"width": 1400, "height": 560})
            page.goto(url, wait_until="networkidle", timeout=60_000)
            time.sleep(settle_s)                         # the overview polls; let it fill in
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out))
            browser.close()
    finally:
        ray.shutdown()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=ROOT / "notebooks" / "figures" / "ray_dashboard.png")
    args = parser.parse_args()
    print(f"wrote {capture(args.out)}")


if __name__ == "__main__":
    main()
