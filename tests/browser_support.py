"""Helpers of the browser tests (test_slides.py, test_lab_browser.py)."""

from pathlib import Path


def assert_not_blank(png_path: Path, min_std: float = 0.03) -> None:
    """A screenshot that shows something: not one flat colour."""
    import matplotlib.image

    pixels = matplotlib.image.imread(png_path)[..., :3]
    assert pixels.std() > min_std, f"{png_path.name} looks blank (pixel std {pixels.std():.4f})"


class RequestLog:
    """Every request a page makes, and each one that failed or left the allowed origins."""

    def __init__(self, page, allowed: tuple[str, ...]):
        self.allowed, self.problems = allowed, []
        page.on("request", self._request)
        page.on("requestfailed", lambda r: self.problems.append(
            f"failed: {r.url[:120]} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(
            f"HTTP {r.status}: {r.url[:120]}"))

    def _request(self, request) -> None:
        if not request.url.startswith(self.allowed):
            self.problems.append(f"outside {self.allowed}: {request.url[:120]}")
