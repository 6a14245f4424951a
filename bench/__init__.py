"""The benchmarks, a tool of this repository (not installed with course_lib): each module runs
one from the repository's root (`python -m bench.<name>`, or `make bench` for all of them, see
bench/run_all.py). They import course_lib and `scripts.provenance`; course_lib never imports
them (a notebook reads their results through `course_lib.teaching.bench_results`)."""
