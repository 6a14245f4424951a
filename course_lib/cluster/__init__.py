"""From one machine to a cluster: check a cluster YAML, run a real multi-node Ray cluster
locally, send work to any cluster through Ray Jobs, and the AWS steps of the runbook.

| module      | what it holds                                                             |
| ----------- | ------------------------------------------------------------------------- |
| `checks`    | cluster YAML checks, offline: Ray's own launcher validator, costly or     |
|             | insecure settings, what `ray up` would miss on this laptop                |
| `versions`  | Ray, Python and the packages the nodes install, against this laptop's     |
| `local`     | `LocalCluster`: a head and N worker nodes on this machine (`ray start`)   |
| `jobs`      | `Jobs`: submit, follow and wait for Ray jobs on any cluster, every wait   |
|             | bounded                                                                   |
| `aws`       | the AWS steps (`ray up`, the tunnel, submit, fetch, `ray down`), run only |
|             | when a cluster is named                                                   |
| `ssh`       | the cluster's security group made before `ray up`: SSH from this machine  |
|             | only (`python -m course_lib.cluster up` runs it, then `ray up`)           |
| `lockfile`  | requirements/lock.txt read as data: the versions a given machine installs |
| `common`    | the errors they raise                                                     |

Everything a notebook or script needs is importable from here: `from course_lib import
cluster` then `cluster.validate_cluster_yaml(...)`, `cluster.LocalCluster(...)`, ...
"""

from course_lib.cluster.aws import (
    AWS_CLUSTER_VAR,
    aws_cluster_name,
    aws_command,
    open_tunnel,
    run_or_show,
)
from course_lib.cluster.checks import (
    LEGACY_KEYS,
    load_cluster_yaml,
    preflight,
    safety_problems,
    validate_cluster_yaml,
)
from course_lib.cluster.common import (
    ClusterConfigError,
    ClusterError,
    JobFailedError,
    JobTimeoutError,
)
from course_lib.cluster.jobs import (
    DEFAULT_JOBS_ADDRESS,
    WORKING_DIR_EXCLUDES,
    Jobs,
    auth_headers,
)
from course_lib.cluster.local import LocalCluster, free_port, kill_marked
from course_lib.cluster.ssh import SSH_FROM_VAR, narrow_ssh, ssh_ranges
from course_lib.cluster.versions import check_versions, cluster_versions

__all__ = [
    "AWS_CLUSTER_VAR", "DEFAULT_JOBS_ADDRESS", "LEGACY_KEYS", "WORKING_DIR_EXCLUDES",
    "ClusterConfigError", "ClusterError", "JobFailedError", "JobTimeoutError", "Jobs",
    "LocalCluster", "SSH_FROM_VAR", "auth_headers", "aws_cluster_name", "aws_command",
    "check_versions", "cluster_versions", "free_port", "kill_marked", "load_cluster_yaml",
    "narrow_ssh", "open_tunnel", "preflight", "run_or_show", "safety_problems", "ssh_ranges",
    "validate_cluster_yaml",
]
