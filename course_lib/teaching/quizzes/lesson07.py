"""Notebook 07 (RLlib): reading a result dict, who writes files, time to a goal, where RLlib
samples, when to pick it."""

from course_lib.teaching.quiz import Question, right, wrong

QUESTIONS = (
    Question(
        "One `algo.train()` result holds "
        "`result[\"env_runners\"][\"episode_return_mean\"] == 180.0` and "
        "`result[\"evaluation\"][\"env_runners\"][\"episode_return_mean\"] == 312.5`. "
        "What is the greedy evaluation return of this iteration?",
        [wrong("180.0",
               "The top-level `env_runners` are the training episodes, played while exploring; "
               "they score lower than the greedy policy."),
         wrong("246.25, the mean of the two",
               "They come from two different policies, exploring and greedy; averaging them "
               "measures neither."),
         right("312.5",
               "The evaluation episodes (`explore: False`) are under `result[\"evaluation\"]`.")],
        applies=True,
    ),
    Question(
        "Does `algo.train()` on its own write a results folder?",
        [right("No: it returns a dict; Ray Tune or your own loop writes files",
               "RLlib's familiar folder (progress.csv, TensorBoard events, checkpoints) is "
               "written by Tune when it runs the algorithm as a trial; here `train_rllib` does."),
         wrong("Yes: progress.csv and TensorBoard events under ~/ray_results",
               "That folder comes from Ray Tune. A bare `train()` returns a nested dict and "
               "writes nothing."),
         wrong("Only checkpoints, every few iterations",
               "Checkpoints are written when you call `save_to_path` (or Tune does); `train()` "
               "writes none.")],
    ),
    Question(
        "Progress rows (seconds, env steps, eval return): (10, 2,000, nan), (20, 4,000, 480), "
        "(30, 6,000, 460), (40, 8,000, 490). With the goal 475, what does `time_to_goal` return?",
        [wrong("(40, 8000)",
               "That would ask the return to stay above the goal to the end. Time to goal is "
               "the first row at or above it."),
         right("(20, 4000)",
               "The first row whose eval return is at least 475; the dip after it does not undo "
               "that it got there."),
         wrong("(10, 2000)",
               "NaN means no evaluation ran; `nan >= 475` is False in Python, and the row has no "
               "return to compare."),
         wrong("None",
               "None is for a run that never reaches the goal: look again at each row's "
               "return.")],
        applies=True,
    ),
    Question(
        "The tuned RLlib DQN here has `num_env_runners=0`. Where are its env steps sampled?",
        [wrong("Nowhere: it cannot train without one",
               "0 means no *remote* env runners; RLlib then samples with a local one."),
         wrong("In one env-runner actor per CPU, which RLlib adds on its own",
               "RLlib starts exactly the remote env runners you ask for; it does not size them "
               "to the machine."),
         right("In the driver's own process, by a local env runner",
               "One process samples and learns: its env runner and its learner share the "
               "driver, as in the RLlib SAC run that section 8 profiles.")],
    ),
    Question(
        "When is RLlib the better choice than your own Ray code?",
        [right("When you need its algorithms, multi-agent RL, Tune sweeps or tested scale",
               "Breadth and scale maintained by others; your own code is smaller and easier to "
               "read, change and debug."),
         wrong("When you need the shortest time to a goal on a laptop",
               "In this notebook's race course_lib's smaller code reached both goals sooner on "
               "two cores; RLlib's strength is breadth, not a small machine."),
         wrong("When you want to change how the algorithm works inside",
               "Your own code is easier to change; RLlib's layers (RLModule, Learner, "
               "connectors) are powerful but take time to learn before you can modify them.")],
    ),
)
