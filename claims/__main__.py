"""python -m claims [check | readings [--list]]

check (the default): every registered claim against the committed outputs and results, one line
each, exit 1 if any is false or its phrase is gone from its document (tests/test_claims.py does
the same). readings: how the documents' reading candidates are kept true (claims/readings.py);
--list adds the sentences no claim covers, for review.
"""

from __future__ import annotations

import argparse
import sys

from claims.evidence import Evidence
from claims.readings import report
from claims.registry import all_claims, missing_phrases, verdict


def check() -> int:
    evidence, bad = Evidence(), 0
    for item in all_claims().values():
        missing, seen = missing_phrases(item), verdict(item, evidence)
        ok = seen.ok and not missing
        bad += not ok
        print(f"{'ok   ' if ok else 'FALSE'} {item.id}: {seen.seen}"
              + "".join(f"\n      phrase gone: {m}" for m in missing))
    places = sum(len(item.places()) for item in all_claims().values())
    print(f"{len(all_claims())} claims in {places} places; {bad} false or unplaced")
    return 1 if bad else 0


def main(argv=None) -> int:
    cli = argparse.ArgumentParser(prog="python -m claims", description=__doc__.split("\n\n")[0])
    cli.add_argument("command", nargs="?", default="check", choices=("check", "readings"))
    cli.add_argument("--list", action="store_true", help="readings: list the uncovered ones")
    args = cli.parse_args(argv)
    if args.command == "readings":
        print(report(args.list))
        return 0
    return check()


if __name__ == "__main__":
    sys.exit(main())
