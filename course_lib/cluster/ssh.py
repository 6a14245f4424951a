"""SSH to the EC2 cluster from the launching machine only, unless you choose to widen it.

Ray 2.60's AWS launcher opens SSH (port 22) to 0.0.0.0/0 on the security group it makes for a
cluster, and a rule written in the YAML does not change that: it adds
`provider.security_group.IpPermissions` to its own SSH-from-anywhere rule, and it writes rules
only into a group that has none (`_upsert_security_group_rules` and
`_create_default_inbound_rules` in ray/autoscaler/_private/aws/config.py). What narrows SSH is
the group existing before `ray up`, with its rules: every protocol between the cluster's own
nodes, SSH from one address. The launcher then finds it by name, in the VPC it launches into,
and uses it as it is.

    narrow_ssh("cluster/aws.yaml", cluster_name="rl-alice")   # before `ray up`
    # -> 'security group ray-autoscaler-rl-alice (sg-...): SSH from 203.0.113.7/32 only, ...'

`python -m course_lib.cluster up cluster/aws.yaml` runs it, then `ray up` (notebook 08's `up`
step does the same). It makes the group or fixes it: any other SSH range (an earlier
0.0.0.0/0, yesterday's address) is revoked. Widening is a choice written down: `--ssh-from
0.0.0.0/0` (or any CIDR), or COURSE_SSH_FROM in the notebook's environment.
"""

from __future__ import annotations

import copy
import ipaddress
import os
import urllib.request
from typing import Any

from course_lib.cluster.checks import load_cluster_yaml, validate_cluster_yaml
from course_lib.cluster.common import ClusterError
from course_lib.errors import first_line

#: where this machine's public address is read (AWS's own echo service)
CHECKIP_URL = "https://checkip.amazonaws.com"
#: set it to a CIDR to widen SSH from the notebook (e.g. a lab's range, or 0.0.0.0/0)
SSH_FROM_VAR = "COURSE_SSH_FROM"
#: how Ray 2.60 names the group it makes for a cluster (SECURITY_GROUP_TEMPLATE)
GROUP_TEMPLATE = "ray-autoscaler-{}"


def my_address(timeout_s: float = 10.0) -> str:
    """This machine's public IPv4 address as the internet sees it, as a /32."""
    try:
        with urllib.request.urlopen(CHECKIP_URL, timeout=timeout_s) as reply:
            text = reply.read().decode().strip()
        return f"{ipaddress.IPv4Address(text)}/32"
    except (OSError, ValueError) as err:
        raise ClusterError(f"cannot read this machine's public address from {CHECKIP_URL} "
                           f"({err}): give it yourself, --ssh-from <your address>/32") from None


def ssh_source(ssh_from: str | None = None) -> str:
    """The CIDR SSH is opened to: `ssh_from`, else COURSE_SSH_FROM, else this machine's /32."""
    cidr = ssh_from or os.environ.get(SSH_FROM_VAR) or my_address()
    try:
        return str(ipaddress.ip_network(cidr, strict=False))
    except ValueError:
        raise ClusterError(f"{cidr!r} is not an address range: give one like "
                           "203.0.113.7/32") from None


def group_name(config: dict, cluster_name: str | None = None) -> str:
    """The security group the launcher uses: provider.security_group.GroupName, else
    ray-autoscaler-<cluster name> (`ray up --cluster-name` overrides the YAML's name)."""
    named = (config.get("provider", {}).get("security_group") or {}).get("GroupName")
    return named or GROUP_TEMPLATE.format(cluster_name or config["cluster_name"])


def wanted_rules(group_id: str, cidr: str) -> list[dict[str, Any]]:
    """The group's inbound rules: everything from the group's own members (the nodes talk to
    each other on every port), and SSH from `cidr` only."""
    ranges = ({"Ipv6Ranges": [{"CidrIpv6": cidr}]} if ":" in cidr
              else {"IpRanges": [{"CidrIp": cidr}]})
    return [{"IpProtocol": "-1", "FromPort": -1, "ToPort": -1,
             "UserIdGroupPairs": [{"GroupId": group_id}]},
            {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, **ranges}]


def ssh_ranges(permissions: list[dict]) -> set[str]:
    """Every address range the rules let reach port 22 (a rule for all ports included)."""
    found = set()
    for rule in permissions:
        port_22 = rule.get("IpProtocol") == "-1" or (
            rule.get("FromPort", 0) <= 22 <= rule.get("ToPort", 65535))
        if port_22:
            found |= {r["CidrIp"] for r in rule.get("IpRanges") or []}
            found |= {r["CidrIpv6"] for r in rule.get("Ipv6Ranges") or []}
    return found


def launch_vpc(config: dict) -> str:
    """The VPC `ray up` launches this config's nodes into, found as the launcher finds it (its
    own subnet choice: the node types' SubnetIds, else every usable public subnet)."""
    from ray.autoscaler._private.aws.config import _configure_subnet, _resource

    try:
        chosen = _configure_subnet(copy.deepcopy(config))
        nodes = next(iter(chosen["available_node_types"].values()))
        return _resource("ec2", config).Subnet(nodes["node_config"]["SubnetIds"][0]).vpc_id
    except Exception as err:       # botocore's, or the launcher's own abort
        raise ClusterError(f"cannot find the VPC `ray up` would use in "
                           f"{config['provider']['region']}: {first_line(err)} (the account "
                           "needs a VPC with public subnets, e.g. its default VPC)") from None


def _ec2_client(region: str):
    import boto3

    return boto3.client("ec2", region_name=region)


def narrow_ssh(path: str | os.PathLike, cluster_name: str | None = None,
               ssh_from: str | None = None) -> str:
    """Make or fix the cluster's security group before `ray up`, so that SSH comes only from
    `ssh_from` (default: this machine's /32, see `ssh_source`). Returns one line saying what
    it did; ClusterError with one line if AWS refuses."""
    import botocore.exceptions

    validate_cluster_yaml(path)                        # Ray's own checks first
    config = load_cluster_yaml(path)
    cidr = ssh_source(ssh_from)
    name = group_name(config, cluster_name)
    ec2 = _ec2_client(config["provider"]["region"])
    try:
        vpc = launch_vpc(config)
        groups = ec2.describe_security_groups(Filters=[
            {"Name": "vpc-id", "Values": [vpc]}, {"Name": "group-name", "Values": [name]}],
        )["SecurityGroups"]
        if groups:
            group_id, current = groups[0]["GroupId"], groups[0].get("IpPermissions", [])
        else:
            group_id, current = ec2.create_security_group(
                GroupName=name, VpcId=vpc, Description="Ray cluster: SSH from its launcher only",
                TagSpecifications=[{"ResourceType": "security-group", "Tags": [
                    {"Key": "ray-autoscaler", "Value": "true"},
                    {"Key": "ray-cluster-name", "Value": cluster_name or config["cluster_name"]},
                ]}])["GroupId"], []
        stale = _ssh_rules_except(current, cidr)
        if stale:
            ec2.revoke_security_group_ingress(GroupId=group_id, IpPermissions=stale)
        missing = [rule for rule in wanted_rules(group_id, cidr) if not _has(current, rule)]
        if missing:
            ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=missing)
    except botocore.exceptions.BotoCoreError as err:
        raise ClusterError(f"AWS: {err} (credentials: `aws sts get-caller-identity`)") from None
    except botocore.exceptions.ClientError as err:
        raise ClusterError(f"AWS refused ({err.response['Error']['Code']}): "
                           f"{err.response['Error']['Message']}") from None
    revoked = sorted(ssh_ranges(stale))
    return (f"security group {name} ({group_id}): SSH from {cidr} only, all traffic between "
            "the cluster's nodes" + (f"; revoked SSH from {', '.join(revoked)}" if revoked else ""))


def _ssh_rules_except(permissions: list[dict], cidr: str) -> list[dict]:
    """The parts of `permissions` that open port 22 to another range than `cidr`, in the form
    `revoke_security_group_ingress` takes (rules between groups are kept)."""
    stale = []
    for rule in permissions:
        if not ssh_ranges([rule]) - {cidr}:
            continue
        ranges = {key: [r for r in rule.get(key) or [] if (r.get("CidrIp") or r.get("CidrIpv6"))
                        != cidr] for key in ("IpRanges", "Ipv6Ranges")}
        stale.append({k: v for k, v in {**rule, **ranges}.items()
                      if k in ("IpProtocol", "FromPort", "ToPort") or (k in ranges and v)})
    return stale


def _sources(rule: dict) -> set[str]:
    return {r.get("CidrIp") or r.get("CidrIpv6") or r.get("GroupId")
            for key in ("IpRanges", "Ipv6Ranges", "UserIdGroupPairs") for r in rule.get(key) or []}


def _has(permissions: list[dict], wanted: dict) -> bool:
    """Whether `permissions` already hold the rule `wanted` (same ports, same sources)."""
    def ports(rule):
        return rule.get("IpProtocol"), rule.get("FromPort", -1), rule.get("ToPort", -1)

    return any(ports(rule) == ports(wanted) and _sources(wanted) <= _sources(rule)
               for rule in permissions)
