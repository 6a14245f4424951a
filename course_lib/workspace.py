"""Where the workshop's files are, wherever a notebook runs from.

Notebooks run in notebooks/ (the instructor edition), in build/student/ or in an attendee's
workshop/ folder: a path relative to the working directory breaks in two of the three. The
repository is found from this package instead (course_lib is installed in editable mode).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository's root: bench/, cluster/, notebooks/ and course_lib/ are in it."""
