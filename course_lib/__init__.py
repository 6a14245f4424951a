"""course_lib: the implementation behind the Distributed RL with Ray workbook.

One small module per idea; the notebooks narrate them in order. Three layers: the RL core
(this package: start with `trainer.py`, `dqn/`, `sac/`, `apex.py`, `replay/`), `teaching/`
(exercise checkers, quizzes, the notebooks' demos; the core never imports it) and `viz/`
(pictures; the core imports it only inside the function that draws). CONTRIBUTING.md maps them.
"""

from course_lib.config import Config, mode_name, quick_mode
from course_lib.errors import RayStartError
from course_lib.ray_tools import init_ray

__all__ = ["Config", "RayStartError", "init_ray", "mode_name", "quick_mode"]
__version__ = "0.1.0"
