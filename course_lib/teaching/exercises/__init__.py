"""Checkers for the notebook exercises.

Convention (every notebook): an exercise cell tagged `exercise` holds a TODO stub, or, in a
"find the bug" exercise, working code with one planted fault; a hidden cell tagged `solution`
holds the worked answer; a cell tagged `check` calls one `check_...` function
below. The attendee edition (scripts/notebooks.py) turns each solution into a collapsed Markdown
block after its check, so Run All never runs it.

A checker tests behaviour (results, ordering, calls made, when tasks ran), never source text, and
never raises: it returns a `CheckResult` that shows as a green tick, or as a red cross with what
is wrong and a hint. Each is declared once with `@checker(notebook, exercise, success)` and
listed in `CHECKERS`, notebook by notebook.

`yours(apex.ApexTrainer, outbox=Outbox, ...)` puts the attendee's pieces that pass their check
in the real trainer's slots (`course_lib.teaching.pieces`): the check of the piece `<key>` is
`check_<key>`;
`from_notebook("04", "find_prefix_sum")` brings an earlier notebook's answers along.
"""

from course_lib.teaching.exercises import (  # noqa: F401  (importing a lesson registers its checkers)
    lesson01,
    lesson02,
    lesson03,
    lesson04,
    lesson05,
    lesson06,
    lesson07,
    lesson08,
)
from course_lib.teaching.exercises.core import (
    CHECKERS,
    CheckResult,
    checker,
    from_notebook,
    yours,
)

globals().update(CHECKERS)          # exercises.check_tree_sum(...), as the notebooks call them

__all__ = ["CHECKERS", "CheckResult", "checker", "from_notebook", "yours", *CHECKERS]
