"""py-spy's raw output, read and sorted into parts: the one profile classifier of bench/
(`learner_profile.py`: the Ape-X learner's training thread; `rllib_profile.py`: RLlib SAC's
`algo.train()`).

`py-spy record --format raw` writes one line per distinct stack: its frames from the outermost
in, joined by ";", a space, and how many samples were taken in it. A frame reads
"function (path/file.py:line)"; with `--threads` the first one names the thread
("thread (0x7f...)").
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass

Stack = tuple[list[str], int]      # (frames, outermost first; samples)


def read_stacks(raw: str) -> list[Stack]:
    """The stacks of py-spy's raw output, with their sample counts (other lines skipped)."""
    stacks = []
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            stacks.append((stack.split(";"), int(n)))
    return stacks


@dataclass(frozen=True)
class Part:
    """A part of a profile: the samples whose stack has, for each of `patterns` (regular
    expressions), a frame it matches; with `below`, only frames under the first frame matching
    `below` count (what a function spends inside another)."""

    name: str
    patterns: tuple[str, ...]
    below: str | None = None

    def holds(self, frames: list[str]) -> bool:
        if self.below is not None:
            top = next((i for i, f in enumerate(frames) if re.search(self.below, f)), None)
            if top is None:
                return False
            frames = frames[top + 1:]
        return all(any(re.search(p, f) for f in frames) for p in self.patterns)


def shares(stacks: list[Stack], parts, rest: str | None = None) -> dict[str, float]:
    """Each part's share of the samples in `stacks`, rounded to 0.01%.

    With `rest` (exclusive), a stack counts for the first part that holds it, or for `rest`
    when none does: the shares add up to 1, largest first. Without (inclusive), a stack counts
    for every part that holds it, so a part nested in another counts in both; parts keep
    their order."""
    total = sum(n for _, n in stacks)
    counts: collections.Counter = collections.Counter()
    for frames, n in stacks:
        held = [p.name for p in parts if p.holds(frames)]
        if rest is not None:
            counts[held[0] if held else rest] += n
        else:
            counts.update({name: n for name in held})
    if not total:
        return {}
    order = [k for k, _ in counts.most_common()] if rest is not None else [p.name for p in parts]
    return {name: round(counts[name] / total, 4) for name in order}
