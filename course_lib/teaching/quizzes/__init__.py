"""The end-of-notebook questions, one module per notebook (`lesson05.py` for notebook 05), each
with a tuple `QUESTIONS` that `course_lib.teaching.quiz.quiz("05")` shows.

They live here, not in the notebook cell, so that the key is not on the attendee's screen. How
to write one (tests/test_quiz.py checks the parts a test can check):

- every option carries its own explanation, shown when it is picked: for a wrong option, why
  it is wrong (the misconception it stands for), without giving the answer away;
- wrong options are plausible misconceptions, not jokes;
- over all notebooks, the right option sits in every position about equally often and is not
  systematically the longest;
- each notebook has at least one question marked `applies=True` that asks the attendee to use
  an idea (read a timeline, descend a sum tree, compute a target, predict a throughput);
- every claim matches the code in course_lib as it stands.
"""

LESSONS = ("00", "01", "02", "03", "04", "05", "06", "07", "08")
