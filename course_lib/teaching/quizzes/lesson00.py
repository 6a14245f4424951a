"""Notebook 00 (set-up check): quick mode, the quiet Ray start, the dashboard, ray.wait."""

from course_lib.teaching.quiz import Question, right, wrong

QUESTIONS = (
    Question(
        "A task in a lesson calls `print(\"hello\")`, with Ray started by `course_lib.init_ray()`. "
        "Where does the line show up?",
        [wrong("Under the notebook cell that submitted the task, once the task has run",
               "That needs `log_to_driver=True`. `init_ray` turns it off, because forwarded "
               "worker prints arrive late, under whatever cell runs at that moment."),
         right("Not in the notebook; in the worker's log (the dashboard's Logs page)",
               "`init_ray` starts Ray with `log_to_driver=False`: worker output goes to the "
               "worker's log file. Return values instead of printing them, or pass "
               "`log_to_driver=True`."),
         wrong("Nowhere: a Ray worker process has no standard output",
               "Workers are ordinary processes; their output is written to log files in Ray's "
               "session directory. It is kept, just not forwarded to the notebook.")],
        applies=True,
    ),
    Question(
        "What does quick mode (`COURSE_QUICK=1`) change?",
        [right("The numbers only: steps, budgets and episodes per run",
               "Each lesson's config has a quick preset (`preset()`): the same code runs with "
               "small numbers, so CI can run every notebook in minutes."),
         wrong("Simplified versions of the algorithms",
               "The code is the same in both modes, which is what makes quick mode a real test "
               "of it; only the config values differ."),
         wrong("It uses tuned hyperparameters that reach each goal sooner",
               "Quick runs mostly stop at a small step budget with no goal at all: their curves "
               "mean nothing, they only show that the code runs.")],
    ),
    Question(
        "How should you reach the dashboard of a cluster in the cloud?",
        [wrong("Open port 8265 in its security group so that your browser can reach it",
               "Whoever reaches that port can submit jobs through it, that is, run code on your "
               "cluster. Keep it closed to the world."),
         wrong("Start a dashboard on your laptop and point it at the head node's address",
               "The dashboard is a process of the head node and serves from there; the laptop "
               "only needs a browser and a safe way to reach that port."),
         right("Forward the port over an SSH tunnel (`ray dashboard cluster.yaml`, `ssh -L`)",
               "The tunnel keeps the port closed to the internet; the browser talks to "
               "`localhost:8265` and SSH carries it to the head node.")],
    ),
    Question(
        "Section 4 submits 16 random-policy episodes (seeds 0 to 15) and then loops over "
        "`ray.wait(pending, num_returns=1)`, appending each result to `returns`. In what order "
        "do the returns arrive?",
        [right("In the order the episodes finish, which can change from run to run",
               "`ray.wait` hands back whichever reference is ready first, so the loop shows "
               "progress as it happens instead of waiting on the slowest task."),
         wrong("In seed order, 0 to 15, since that is the order of submission",
               "Submission order is not completion order: `ray.wait` returns the first ready "
               "reference. A list `ray.get(pending)` would give seed order, all at the end."),
         wrong("Exactly from the shortest episode to the longest",
               "Only as many episodes run at once as there are CPUs, so a short episode with a "
               "late seed can finish after a long one that started earlier.")],
        applies=True,
    ),
)
