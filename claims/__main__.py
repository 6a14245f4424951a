"""python -m claims [check [--also REV] | readings [--list]]

check (the default): every registered claim against the committed outputs and results, one line
each, exit 1 if any is false or its phrase is gone from its document (tests/test_claims.py does
the same). --also REV checks each claim on the outputs and results of commit REV as well (an
earlier refresh, say): a reading that holds on both is one that two runs of the benchmarks
decide, not one run's draw. readings: how the documents' reading candidates are kept true
(claims/readings.py); --list adds the sentences no claim covers, for review.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from claims.evidence import ROOT, Evidence
from claims.readings import report
from claims.registry import all_claims, missing_phrases, verdict


def evidence_at(rev: str, into: Path, root: Path = ROOT) -> Evidence:
    """The outputs and results of commit `rev`, its tree unpacked into `into` (7 MB)."""
    archive = subprocess.run(["git", "-C", str(root), "archive", rev], capture_output=True)
    if archive.returncode:
        sys.exit(f"--also {rev}: git cannot archive it ({archive.stderr.decode().strip()}); "
                 "give a commit of this repository, e.g. HEAD~1")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return Evidence(into)


def check(also: str | None = None, root: Path = ROOT) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        evidence, other = Evidence(), evidence_at(also, Path(tmp), root) if also else None
        bad = 0
        for item in all_claims().values():
            missing, seen = missing_phrases(item), verdict(item, evidence)
            theirs = verdict(item, other) if other else seen
            here = seen.ok and not missing          # the first word is this checkout's verdict
            bad += not (here and theirs.ok)
            print(f"{'ok   ' if here else 'FALSE'} {item.id}: {seen.seen}"
                  + (f"\n      FALSE at {also}: {theirs.seen}"
                     if also and not theirs.ok else "")
                  + "".join(f"\n      phrase gone: {m}" for m in missing))
    places = sum(len(item.places()) for item in all_claims().values())
    print(f"{len(all_claims())} claims in {places} places; {bad} false or unplaced"
          + (f" (on the outputs here or at {also})" if also else ""))
    return 1 if bad else 0


def main(argv=None) -> int:
    cli = argparse.ArgumentParser(prog="python -m claims", description=__doc__.split("\n\n")[0])
    cli.add_argument("command", nargs="?", default="check", choices=("check", "readings"))
    cli.add_argument("--list", action="store_true", help="readings: list the uncovered ones")
    cli.add_argument("--also", metavar="REV", help="check: also on commit REV's outputs")
    args = cli.parse_args(argv)
    if args.command == "readings":
        print(report(args.list))
        return 0
    return check(args.also)


if __name__ == "__main__":
    sys.exit(main())
