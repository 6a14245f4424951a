"""The visual layer: pictures of the core's code, runs and traces, for notebooks and decks.

- `display.py`: `show_source`, `show_diagram`, `show_svg` (and `find_object`, which the decks'
  `{{source ...}}` use);
- `plotting.py`: learning curves, comparisons, the latency ladder's chart;
- `render.py`: an episode as frames and a GIF (`python -m course_lib evaluate --render`);
- `timeline.py`: Ray's task timeline as one row per worker.

The core imports this package only inside the function that draws (lazily), so training never
pays for matplotlib or pygame it does not use; tests/test_structure.py checks that.
"""
