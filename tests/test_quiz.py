"""The end-of-notebook questions: checked on a click, every answer explained, and every notebook
ends with 3 to 5 of them and a further-reading list."""

import ast

import nbformat
import pytest

from course_lib.quiz import Question, quiz
from scripts.notebooks import all_notebooks

QUESTION = Question("Which call waits?", ["f.remote()", "ray.get(ref)"], answer=1,
                    why="ray.get blocks until the value exists.")


def test_feedback_for_right_wrong_and_no_answer():
    assert QUESTION.feedback(1).startswith("✅") and QUESTION.why in QUESTION.feedback(1)
    wrong = QUESTION.feedback(0)
    assert wrong.startswith("❌") and "ray.get(ref)" in wrong and QUESTION.why in wrong
    assert "Pick" in QUESTION.feedback(None)


def test_a_question_must_have_its_answer_among_the_options():
    with pytest.raises(ValueError, match="not an option"):
        Question("?", ["a", "b"], answer=2, why="")
    with pytest.raises(ValueError, match="two options"):
        Question("?", ["a"], answer=0, why="")


def test_clicking_check_shows_the_verdict():
    box = quiz(QUESTION, QUESTION)
    assert len(box.children) == 2
    _, choices, button, verdict = box.children[1].children
    choices.value = 1
    button.click()
    assert verdict.value.startswith("✅")
    choices.value = 0
    button.click()
    assert verdict.value.startswith("❌")


def test_a_quiz_not_yet_run_shows_its_questions_without_the_answers():
    """JupyterLab shows a widget only in a notebook it trusts: before the quiz cell runs, the
    reader sees the output's HTML (or text) instead, which must be the questions, not a repr."""
    tricky = Question("Is `a < b` true?", ["yes", "no"], answer=0, why="SECRET reason")
    bundle = quiz(tricky, QUESTION)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    page, text = bundle["text/html"], bundle["text/plain"]
    assert "1. Is `a < b` true?" in text and "( ) ray.get(ref)" in text
    assert "<code>a &lt; b</code>" in page and "<li>ray.get(ref)</li>" in page
    assert "Run this cell" in page
    assert "SECRET" not in page + text and "✅" not in page + text


@pytest.mark.parametrize("path", all_notebooks(), ids=lambda p: p.stem)
def test_each_notebook_ends_with_questions_and_further_reading(path):
    cells = nbformat.read(path, as_version=4).cells
    quizzes = [c for c in cells if c.cell_type == "code" and "quiz(" in c.source]
    assert len(quizzes) == 1, "one quiz cell per notebook"
    calls = [n for n in ast.walk(ast.parse(quizzes[0].source))
             if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Question"]
    assert 3 <= len(calls) <= 5
    namespace: dict = {}
    exec(quizzes[0].source, namespace)               # builds every Question and the widget
    headings = [c.source.splitlines()[0] for c in cells if c.cell_type == "markdown"]
    assert "## Further reading" in headings
    assert headings.index("## Further reading") > headings.index("## Check your understanding")
