"""The benchmarks: each module runs one (`python -m bench.<name>`, or `make bench` for all of
them, see bench/run_all.py) and is importable from a notebook (`from bench import replay`)."""
