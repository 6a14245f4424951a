"""Check-your-understanding questions at the end of each notebook: multiple choice, checked on a
click, every option explained.

    quiz("05")          # the questions of course_lib/teaching/quizzes/lesson05.py

shows one block per question (ipywidgets: radio buttons, a Check button, the verdict). Picking
an option shows why that option is right or wrong; a wrong pick does not give the answer away,
so the attendee can think again and try another. The questions and their key live in
`course_lib.teaching.quizzes`, not in the notebook cell, so that the key is not on the
attendee's screen.

A widget's stored view renders only in a notebook JupyterLab trusts, and it trusts none it did
not run itself (a fresh clone, the attendee edition): the quiz output therefore also carries
the questions as plain HTML (no answers), which JupyterLab shows until the cell runs.
"""

from __future__ import annotations

import html
import importlib
from dataclasses import dataclass

import ipywidgets as widgets


@dataclass(frozen=True)
class Option:
    """One option of a question, with why it is right or wrong (shown once it is picked)."""

    text: str
    why: str
    right: bool = False


def right(text: str, why: str) -> Option:
    """The right option of a question, and why it is right."""
    return Option(text, why, right=True)


def wrong(text: str, why: str) -> Option:
    """A wrong option (best a plausible misconception), and why it is wrong."""
    return Option(text, why, right=False)


@dataclass(frozen=True)
class Question:
    """One multiple-choice question: exactly one of `options` is right. `applies` marks a
    question that asks to apply an idea (compute, predict, read a trace), not recall it."""

    prompt: str
    options: tuple[Option, ...]
    applies: bool = False

    def __post_init__(self):
        object.__setattr__(self, "options", tuple(self.options))
        if len(self.options) < 2:
            raise ValueError(f"a question needs at least two options: {self.prompt!r}")
        if sum(o.right for o in self.options) != 1:
            raise ValueError(f"a question needs exactly one right option: {self.prompt!r}")
        if not all(o.why.strip() for o in self.options):
            raise ValueError(f"every option needs its explanation (why): {self.prompt!r}")

    @property
    def answer(self) -> int:
        """The index of the right option."""
        return next(i for i, o in enumerate(self.options) if o.right)

    def feedback(self, choice: int | None) -> str:
        """The verdict for option `choice` (None: nothing picked yet), with its explanation."""
        if choice is None:
            return "Pick an answer first."
        option = self.options[choice]
        if option.right:
            return f"✅ Right. {option.why}"
        return f"❌ Not this one. {option.why} Think again and try another option."


def questions(lesson: str) -> tuple[Question, ...]:
    """The questions of notebook `lesson` ("00" to "08"), from course_lib/teaching/quizzes/."""
    from course_lib.teaching.quizzes import LESSONS

    if lesson not in LESSONS:
        raise ValueError(f"no quiz for lesson {lesson!r}: pick one of {', '.join(LESSONS)}")
    return importlib.import_module(f"course_lib.teaching.quizzes.lesson{lesson}").QUESTIONS


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
    return "\n".join(f"{n}. {q.prompt}\n" + "\n".join(f"   ( ) {o.text}" for o in q.options)
                     for n, q in enumerate(questions, 1))


def static_html(questions) -> str:
    """The questions and their options as plain HTML (no answers), for a quiz not yet run."""
    items = "".join(
        f"<li><b>{inline_html(q.prompt)}</b><ul>"
        + "".join(f"<li>{inline_html(o.text)}</li>" for o in q.options) + "</ul></li>"
        for q in questions)
    return (f'<div class="course-quiz"><ol>{items}</ol><p><i>Run this cell to pick your '
            f"answers and check them.</i></p></div>")


def quiz_widget(questions: tuple[Question, ...]) -> Quiz:
    """A widget with every question, numbered, each checked on its own."""
    blocks = []
    for number, question in enumerate(questions, 1):
        choices = widgets.RadioButtons(
            options=[(option.text, i) for i, option in enumerate(question.options)],
            value=None, layout=widgets.Layout(width="auto"))
        button = widgets.Button(description="Check", button_style="info")
        verdict = widgets.HTML()

        def check(_, question=question, choices=choices, verdict=verdict):
            verdict.value = inline_html(question.feedback(choices.value))

        button.on_click(check)
        title = widgets.HTML(f"<b>{number}. {inline_html(question.prompt)}</b>")
        blocks.append(widgets.VBox([title, choices, button, verdict]))
    return Quiz(tuple(questions), blocks)


def quiz(lesson: str) -> Quiz:
    """The end-of-notebook quiz of notebook `lesson` ("00" to "08")."""
    return quiz_widget(questions(lesson))
