"""course_lib: the implementation behind the Distributed RL with Ray workbook.

One small module per idea; the notebooks narrate them in order.
"""

from course_lib.config import Config, mode_name, quick_mode
from course_lib.ray_setup import RayStartError, init_ray

__all__ = ["Config", "RayStartError", "init_ray", "mode_name", "quick_mode"]
__version__ = "0.1.0"
