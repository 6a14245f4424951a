"""The teaching layer: what the workbook needs to teach, built on the RL core but never used by it.

- `exercises/`: the checkers of the notebooks' exercises (`lessonNN.py`, declared in `core.py`)
  and `yours(...)`, which hands the attendee's passing pieces to the real trainer;
- `quiz.py` and `quizzes/`: the end-of-notebook questions;
- `setup_check.py` (notebook 00), `ray_patterns.py` (notebook 01's anti-patterns measured),
  `ladder.py` (the env-latency ladder of notebooks 02 and 05), `cpprb_compare.py` (notebook
  04's replay buffer against cpprb), `rllib_compare.py` (notebook 07's RLlib runs, on the core's
  training loop), `bench_results.py` (a benchmark's figure, for the notebooks to print beside
  their own run).

The core (`course_lib` outside `teaching/` and `viz/`) never imports this package;
tests/test_structure.py checks that.
"""
