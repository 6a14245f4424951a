"""Notebook 08 (clusters): a job's working_dir, quoting the entrypoint, what `ray down` leaves,
and what a forgotten cluster costs."""

from course_lib.teaching.quiz import Question, right, wrong

QUESTIONS = (
    Question(
        "What does a job's runtime environment `working_dir` do?",
        [wrong("Names the results folder on the cluster",
               "Results go wherever the job writes them (here `--results-dir`); `working_dir` "
               "is what gets shipped to the cluster."),
         right("Uploads a local folder; the entrypoint runs inside the copy",
               "The Jobs API zips the folder, ships it and unpacks it on each node that needs "
               "it, so the job runs your unchanged code."),
         wrong("Mounts a folder of your laptop on every node while the job runs",
               "It is copied, not mounted: an edit you make after submitting does not reach the "
               "running job.")],
    ),
    Question(
        "`argv` ends with `\"--stop\", '{\"time_s\": 600}'`, and the entrypoint is "
        "`' '.join(argv)`, which the cluster runs as a shell command. What does course_lib "
        "receive after `--stop`?",
        [wrong("`{\"time_s\": 600}`, one argument",
               "That is what `shlex.join(argv)` guarantees, by quoting the argument. A plain "
               "join leaves the splitting to the shell."),
         wrong("`{\"time_s\":` and `600}`, two arguments",
               "The shell also removes the double quotes, so not even the first half is the "
               "text you wrote."),
         right("`{time_s:` and `600}`, two arguments",
               "The shell splits at the space and strips the double quotes: the command line "
               "then fails on invalid JSON. `shlex.join` quotes each argument.")],
        applies=True,
    ),
    Question(
        "A cluster config says `cache_stopped_nodes: True`. After `ray down` on Friday evening, "
        "what keeps costing over the weekend?",
        [right("Their disks: the stopped instances' EBS volumes",
               "With True, `ray down` stops the instances for reuse instead of terminating them; "
               "a stopped EC2 instance still pays for its EBS volumes."),
         wrong("Nothing: `ray down` ends the cluster",
               "Only with `cache_stopped_nodes: false`, as in cluster/aws.yaml, are the "
               "instances terminated."),
         wrong("The instances' full hourly price, since they are only paused",
               "A stopped instance is not billed for compute; its disks are, until they are "
               "deleted.")],
    ),
    Question(
        "cluster/aws.yaml's head and 2 CPU workers (`min_workers: 2`, `idle_timeout_minutes: 5`) "
        "cost about $0.85 per hour. You forget `ray down` from Friday 18:00 to Monday 9:00. "
        "About what does it cost?",
        [wrong("About $0.07",
               "The autoscaler removes only workers above `min_workers` (2 here), never the "
               "head: the head and 2 workers keep running."),
         wrong("About $20",
               "Instances are billed for every hour they run, busy or idle, the whole weekend "
               "included."),
         wrong("About $200",
               "The GPU type has `min_workers: 0`: it starts only when work asks for a GPU, and "
               "is removed when idle."),
         right("About $54",
               "63 hours * $0.85 per hour; the idle timeout removes only workers above "
               "`min_workers`.")],
        applies=True,
    ),
)
