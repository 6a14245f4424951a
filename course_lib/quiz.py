"""Check-your-understanding questions at the end of each notebook: multiple choice, checked on a
click, each answer explained.

    quiz(Question("...?", ["a", "b", "c"], answer=1, why="..."), ...)

shows one block per question (ipywidgets: radio buttons, a Check button, the verdict with its
explanation). The questions live in the notebooks, next to the lesson they ask about.

A widget's stored view renders only in a notebook JupyterLab trusts, and it trusts none it did
not run itself (a fresh clone, the attendee edition): the quiz output therefore also carries
the questions as plain HTML (no answers), which JupyterLab shows until the cell runs.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as widgets


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


class Quiz(widgets.VBox):
    """The question blocks; its output also holds the questions as text and HTML (no answers),
    which is what a reader sees before the cell runs."""

    def __init__(self, questions: tuple[Question, ...], blocks):
        super().__init__(blocks)
        self.questions = questions

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        return {**bundle, "text/plain": static_text(self.questions),
                "text/html": static_html(self.questions)}


def inline_html(text: str) -> str:
    """`text` escaped for HTML, with its `code` spans (Markdown backticks) set as code."""
    parts = html.escape(text).split("`")
    if len(parts) % 2 == 0:                     # an unpaired backtick: leave the text as it is
        return html.escape(text)
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def static_text(questions) -> str:
    """The questions and their options as text (no answers)."""
    return "\n".join(f"{n}. {q.prompt}\n" + "\n".join(f"   ( ) {o}" for o in q.options)
                     for n, q in enumerate(questions, 1))


def static_html(questions) -> str:
    """The questions and their options as plain HTML (no answers), for a quiz not yet run."""
    items = "".join(
        f"<li><b>{inline_html(q.prompt)}</b><ul>"
        + "".join(f"<li>{inline_html(o)}</li>" for o in q.options) + "</ul></li>"
        for q in questions)
    return (f'<div class="course-quiz"><ol>{items}</ol><p><i>Run this cell to pick your '
            f"answers and check them.</i></p></div>")


def quiz(*questions: Question) -> Quiz:
    """A widget with every question, numbered, each checked on its own."""
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
        title = widgets.HTML(f"<b>{number}. {inline_html(question.prompt)}</b>")
        blocks.append(widgets.VBox([title, choices, button, verdict]))
    return Quiz(questions, blocks)
