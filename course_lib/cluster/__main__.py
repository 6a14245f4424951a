"""Launch the EC2 cluster with SSH open to this machine only (cluster/README.md, section 3).

    python -m course_lib.cluster up cluster/aws.yaml [--cluster-name NAME] [--yes]
    python -m course_lib.cluster ssh cluster/aws.yaml      # only the security group (new address)
    python -m course_lib.cluster up cluster/aws.yaml --ssh-from 0.0.0.0/0   # widened, by choice

`up` narrows SSH (course_lib.cluster.ssh.narrow_ssh: the cluster's security group, made or
fixed before the launcher sees it, with SSH from this machine's /32), then runs `ray up` with
the other arguments. Exit status: `ray up`'s, or 2 with one line when the group cannot be set.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from course_lib.cluster.common import ClusterError
from course_lib.cluster.ssh import SSH_FROM_VAR, narrow_ssh


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.cluster",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["up", "ssh"],
                        help="up: narrow SSH, then `ray up`; ssh: narrow SSH only")
    parser.add_argument("yaml", help="the cluster config, e.g. cluster/aws.yaml")
    parser.add_argument("--cluster-name", help="as for `ray up` (names the security group)")
    parser.add_argument("--ssh-from", help="the address range SSH is opened to (default: this "
                        f"machine's public address /32, or ${SSH_FROM_VAR}); widening it, "
                        "e.g. to 0.0.0.0/0, is your choice")
    args, ray_args = parser.parse_known_args(argv)
    try:
        print(narrow_ssh(args.yaml, cluster_name=args.cluster_name, ssh_from=args.ssh_from))
    except ClusterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.step == "ssh":
        return 0
    name = ["--cluster-name", args.cluster_name] if args.cluster_name else []
    return subprocess.call(["ray", "up", args.yaml, *name, *ray_args])


if __name__ == "__main__":
    sys.exit(main())
