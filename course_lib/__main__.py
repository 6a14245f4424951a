"""`python -m course_lib train ...` / `evaluate ...`: see course_lib.cli."""

from course_lib.cli import main

raise SystemExit(main())
