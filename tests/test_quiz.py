"""The end-of-notebook questions: checked on a click, every option explained, the key kept out
of the notebooks, answers spread over the positions, and every notebook ends with 3 to 5 of
them (one at least asking to apply an idea) and a further-reading list."""

from collections import Counter

import nbformat
import pytest

import scripts.notebooks as nbtools
from course_lib.teaching.quiz import Question, questions, quiz, quiz_widget, right, wrong
from course_lib.teaching.quizzes import LESSONS
from scripts.notebooks import all_notebooks

QUESTION = Question("Which call waits?",
                    [wrong("f.remote()", "It only submits the task."),
                     right("ray.get(ref)", "ray.get blocks until the value exists.")])
ALL = [q for lesson in LESSONS for q in questions(lesson)]


def test_feedback_explains_the_option_picked_without_giving_the_answer_away():
    assert QUESTION.feedback(1) == "✅ Right. ray.get blocks until the value exists."
    wrong_pick = QUESTION.feedback(0)
    assert wrong_pick.startswith("❌") and "only submits" in wrong_pick
    assert "ray.get" not in wrong_pick and "try another" in wrong_pick
    assert "Pick" in QUESTION.feedback(None)


def test_a_question_needs_one_right_option_and_every_explanation():
    with pytest.raises(ValueError, match="exactly one right"):
        Question("?", [wrong("a", "x"), wrong("b", "y")])
    with pytest.raises(ValueError, match="exactly one right"):
        Question("?", [right("a", "x"), right("b", "y")])
    with pytest.raises(ValueError, match="two options"):
        Question("?", [right("a", "x")])
    with pytest.raises(ValueError, match="explanation"):
        Question("?", [right("a", "x"), wrong("b", " ")])


def test_an_unknown_lesson_is_refused_in_one_line():
    with pytest.raises(ValueError, match="no quiz for lesson '09': pick one of 00, 01"):
        quiz("09")


def test_clicking_check_shows_the_verdict_of_the_option_picked():
    box = quiz_widget((QUESTION, QUESTION))
    assert len(box.children) == 2
    _, choices, button, verdict = box.children[1].children
    choices.value = 1
    button.click()
    assert verdict.value.startswith("✅")
    choices.value = 0
    button.click()
    assert verdict.value.startswith("❌") and "only submits" in verdict.value


def test_a_quiz_not_yet_run_shows_its_questions_without_the_answers():
    """JupyterLab shows a widget only in a notebook it trusts: before the quiz cell runs, the
    reader sees the output's HTML (or text) instead, which must be the questions, not a repr."""
    tricky = Question("Is `a < b` true?", [right("yes", "SECRET reason"), wrong("no", "HIDDEN")])
    bundle = quiz_widget((tricky, QUESTION))._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    page, text = bundle["text/html"], bundle["text/plain"]
    assert "1. Is `a < b` true?" in text and "( ) ray.get(ref)" in text
    assert "<code>a &lt; b</code>" in page and "<li>ray.get(ref)</li>" in page
    assert "Run this cell" in page
    assert all(secret not in page + text for secret in ("SECRET", "HIDDEN", "✅"))


def test_no_position_holds_much_more_than_a_third_of_the_answers():
    """Before: the middle option was the answer in 28 of 32 questions."""
    positions = Counter(q.answer for q in ALL)
    assert max(positions.values()) <= 0.4 * len(ALL), dict(positions)


def test_the_right_option_is_not_systematically_the_longest_or_shortest():
    """Before: the answer was the longest option in 28 of 32 questions."""
    def strictly(pick, q):
        lengths = [len(o.text) for o in q.options]
        return lengths.count(pick(lengths)) == 1 and lengths[q.answer] == pick(lengths)

    for pick in (max, min):
        hits = sum(strictly(pick, q) for q in ALL)
        assert hits <= 0.4 * len(ALL), f"the answer is the {pick.__name__} in {hits}/{len(ALL)}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_quiz_asks_to_apply_an_idea(lesson):
    assert 3 <= len(questions(lesson)) <= 5
    assert any(q.applies for q in questions(lesson)), f"lesson {lesson}: no applied question"


@pytest.mark.parametrize("path", all_notebooks(), ids=lambda p: p.stem)
def test_each_notebook_ends_with_its_quiz_and_further_reading(path):
    cells = nbformat.read(path, as_version=4).cells
    quizzes = [c for c in cells if c.cell_type == "code" and "quiz(" in c.source]
    assert len(quizzes) == 1, "one quiz cell per notebook"
    assert f'quiz("{path.name[:2]}")' in quizzes[0].source
    namespace: dict = {}
    exec(quizzes[0].source, namespace)               # builds every Question and the widget
    headings = [c.source.splitlines()[0] for c in cells if c.cell_type == "markdown"]
    assert "## Further reading" in headings
    assert headings.index("## Further reading") > headings.index("## Check your understanding")


def strings(node):
    """Every string in a notebook's JSON tree: sources, outputs, metadata."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


@pytest.mark.parametrize("path", all_notebooks(), ids=lambda p: p.stem)
def test_no_key_in_either_edition(path):
    """Neither the instructor notebook nor the attendee edition holds the key: no explanation
    (which names the right option) anywhere, in sources, outputs or metadata."""
    instructor = nbformat.read(path, as_version=4)
    attendee = nbtools.student_version(nbformat.read(path, as_version=4))
    for edition in (instructor, attendee):
        text = "\n".join(strings(edition))
        assert "answer=" not in text and "right(" not in text
        for option in (o for q in questions(path.name[:2]) for o in q.options):
            assert option.why not in text, option.why
