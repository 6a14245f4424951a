"""Check-your-understanding questions at the end of each notebook: multiple choice, checked on a
click, each answer explained.

    quiz(Question("...?", ["a", "b", "c"], answer=1, why="..."), ...)

shows one block per question (ipywidgets: radio buttons, a Check button, the verdict with its
explanation). The questions live in the notebooks, next to the lesson they ask about.
"""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    """One multiple-choice question: `answer` is the index of the right option in `options`,
    `why` explains it (shown after any answer, right or wrong)."""

    prompt: str
    options: tuple[str, ...] | list[str]
    answer: int
    why: str

    def __post_init__(self):
        if len(self.options) < 2:
            raise ValueError(f"a question needs at least two options: {self.prompt!r}")
        if not 0 <= self.answer < len(self.options):
            raise ValueError(f"answer {self.answer} is not an option of {self.prompt!r}")

    def feedback(self, choice: int | None) -> str:
        """The verdict for option `choice` (None: nothing picked yet), with the explanation."""
        if choice is None:
            return "Pick an answer first."
        if choice == self.answer:
            return f"✅ Right. {self.why}"
        return f"❌ Not quite: the answer is “{self.options[self.answer]}”. {self.why}"


def quiz(*questions: Question):
    """A widget with every question, numbered, each checked on its own."""
    import ipywidgets as widgets

    blocks = []
    for number, question in enumerate(questions, 1):
        choices = widgets.RadioButtons(
            options=[(text, i) for i, text in enumerate(question.options)], value=None,
            layout=widgets.Layout(width="auto"))
        button = widgets.Button(description="Check", button_style="info")
        verdict = widgets.HTML()

        def check(_, question=question, choices=choices, verdict=verdict):
            verdict.value = html.escape(question.feedback(choices.value))

        button.on_click(check)
        title = widgets.HTML(f"<b>{number}. {html.escape(question.prompt)}</b>")
        blocks.append(widgets.VBox([title, choices, button, verdict]))
    return widgets.VBox(blocks)
