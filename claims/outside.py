"""Outside facts quoted in the documents: what the AWS cluster costs. The prices are typed once,
with their source and date, in the table of cluster/README.md section 8; every cost quoted
elsewhere must follow from that table (and the table must price the instance types that
cluster/aws.yaml launches)."""

from __future__ import annotations

import re

import yaml

from claims.registry import claim, holds

RUNBOOK, NB08 = "cluster/README.md", "notebooks/08_cluster.ipynb"
QUIZ = "course_lib/teaching/quizzes/lesson08.py"


def prices(e) -> dict[str, float]:
    """$ per hour from the runbook's table: per node type, and per node for disk and IPv4."""
    text = e.file(RUNBOOK).split("## 8. What it costs", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"(?m)^\| (`\w+`|disks|public IPv4)[^|]*\| ([^|]*)\|[^|]*\| ~?([\d.]+)",
                      text)
    out = {name.strip("`"): float(price) for name, _, price in rows}
    out["instances"] = {name.strip("`"): inst.split()[0] for name, inst, _ in rows
                        if name.startswith("`")}
    return out


def per_hour(e) -> tuple[float, float]:
    """(head + 2 CPU workers, the GPU node): instances, a disk and an IPv4 address each."""
    p = prices(e)
    node = p["disks"] + p["public IPv4"]
    return p["head"] + 2 * p["cpu_worker"] + 3 * node, p["gpu_learner"] + node


@claim("prices-hourly",
       {NB08: ("costs about **$0.85 per hour** (head +\n2 CPU workers, on-demand, us-west-2) and "
               "about **$1 more per hour** while the GPU node is up",
               "(AWS's 2025-2026 list prices; `cluster/README.md` section 8 gives each node's "
               "and the source)"),
        RUNBOOK: ("costs about **$0.85 per hour** (head + 2 CPU workers, on-demand)\n> and **$1 "
                  "more per hour** while the GPU node is up",
                  "Source: AWS's price list,\n<https://aws.amazon.com/ec2/pricing/on-demand/>, as "
                  "published in 2025-2026"),
        "slides/INSTRUCTOR.md": "(about $0.85/hour at the 2025-2026 list prices of "
                                "cluster/README.md section 8)",
        "slides/08_cluster.md": "About $0.85/h for head + 2 workers",
        QUIZ: "cost about $0.85 per hour"},
       "the price table of cluster/README.md section 8")
def _(e):
    cluster, gpu = per_hour(e)
    return holds(abs(cluster - 0.85) <= 0.03 and abs(gpu - 1.0) <= 0.1,
                 f"head + 2 workers ${cluster:.3f}/h, GPU node ${gpu:.3f}/h")


@claim("prices-examples",
       {RUNBOOK: ("a 2-hour session with head + 2 workers is about **$1.70**",
                  "Forgetting the cluster over a weekend (head + 2 workers, 64 h) is about "
                  "**$55**"),
        "slides/08_cluster.md": "a\nforgotten weekend (Friday evening to Monday morning) is "
                                "about $54",
        QUIZ: "63 hours * $0.85 per hour"},
       "the price table of cluster/README.md section 8, times the hours each example names")
def _(e):
    hourly, _ = per_hour(e)
    cases = {2: 1.70, 64: 55, 63: 54}
    off = {h: round(h * hourly - cost, 2) for h, cost in cases.items()}
    return holds(abs(off[2]) <= 0.05 and abs(off[64]) <= 1 and abs(off[63]) <= 1,
                 f"${hourly:.3f}/h; computed minus quoted: {off}")


@claim("prices-priced-what-the-config-launches",
       {RUNBOOK: "| Node type | Instance | vCPU / RAM | ~$ per hour | Runs |"},
       "the instance types of the price table against cluster/aws.yaml's node types")
def _(e):
    table = prices(e)["instances"]
    config = yaml.safe_load(e.file("cluster/aws.yaml"))["available_node_types"]
    launched = {name: node["node_config"]["InstanceType"] for name, node in config.items()}
    return holds(table == launched, f"priced {table}, launched {launched}")
