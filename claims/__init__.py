"""Readings that cannot drift: the registry of what the documents say about measured results.

A sentence of a notebook's Markdown, a deck (speaker notes included), the FAQ, the instructor
guide, the README, CONTRIBUTING, the cluster runbook or bench/RESULTS.md that *reads* a measured
result (which is faster, fewer, grows, reaches, "about X") is kept true in one of two ways:

1. **printed**: the code prints it from the result (a notebook cell's f-string verdict; a block
   bench/benchreport.py generates in RESULTS.md; a value scripts/figures.py fills into a deck,
   the FAQ or the guide from `<!--fig bench:... -->` / `<!--fig nb:... -->` markers); or
2. **registered**: a claim in this package names the document, the exact phrase that states the
   reading there, and a predicate over the committed outputs and results that must hold
   (`claims/registry.py`; the evidence is read by `claims/evidence.py`).

`tests/test_claims.py` checks every registered claim in CI, in about a second: the phrase is still
in its document (so the registry cannot drift from the prose) and the predicate holds on what is
committed (so a re-run that reverses a reading fails the test, not an audience). A comparison
that one run can reverse is either measured over seeds with its spread (bench/), or worded as
what this one run shows and left to the cell that prints both numbers.

Where the claims are: `lessons.py` (notebooks 00-04 and their decks), `apex.py` (notebook 05),
`later.py` (06-08, the README, the guide), `results.py`, `learner.py` (the Ape-X learner's cost
and feed) and `scaling.py` (the benchmark results: RESULTS.md, the FAQ), `outside.py` (AWS
prices, from the runbook's dated table).
`python -m claims` checks them all; `python -m claims readings [--list]` counts the
reading-like sentences of every document by how they are kept true (`claims/readings.py`) and
lists the ones no claim covers.

Adding a reading: write the sentence, then a claim beside its group's others:

    @claim("nb03-one-update-old",
           {"notebooks/03_parameter_server.ipynb":
                "nearly every gradient is exactly one update old"},
           "the printed staleness distribution (cell 38289efe)")
    def _(e):
        (share,) = e.cell("03_parameter_server", "38289efe").grab(r"(\\d+)% exactly one update old")
        return holds(share >= 90, f"{share:g}% exactly one update old")
"""
