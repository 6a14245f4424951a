"""Issue 36 item 7: the EC2 cluster's SSH port is open to the launching machine only, unless
its owner widens it on purpose.

An AWS account is stood in for by `FakeEC2`, an in-memory EC2 with the few calls involved:
the boto3 client calls course_lib makes, and the resource calls Ray's launcher makes. What
`ray up` does to the security group is Ray 2.60's own code (`_configure_subnet`, then
`_configure_security_group`, from ray/autoscaler/_private/aws/config.py) run against it, on
cluster/aws.yaml as Ray's own `prepare_config` + `validate_config` leave it. This machine's
public address (checkip.amazonaws.com) is stood in for by 203.0.113.7, a documentation address.
"""

from __future__ import annotations

import io
import itertools
import subprocess
import urllib.request
from pathlib import Path

import boto3
import pytest
from ray.autoscaler._private.aws import config as launcher

from course_lib import cluster as cl

ROOT = Path(__file__).resolve().parents[1]
AWS_YAML = ROOT / "cluster" / "aws.yaml"
HERE = "203.0.113.7"
WORLD = "0.0.0.0/0"


class FakeGroup:
    """A security group as boto3's resource shows it (what the launcher reads and writes)."""

    def __init__(self, group_id: str, name: str, vpc_id: str):
        self.id, self.group_id, self.group_name, self.vpc_id = group_id, group_id, name, vpc_id
        self.ip_permissions: list[dict] = []

    def authorize_ingress(self, IpPermissions):              # noqa: N803 (boto3's names)
        self.ip_permissions += [dict(rule) for rule in IpPermissions]

    def revoke(self, permissions: list[dict]) -> None:
        for gone in permissions:
            for rule in self.ip_permissions:
                same = all(rule.get(k) == gone.get(k) for k in ("IpProtocol", "FromPort", "ToPort"))
                for key in ("IpRanges", "Ipv6Ranges", "UserIdGroupPairs"):
                    if same and gone.get(key):
                        rule[key] = [r for r in rule.get(key, []) if r not in gone[key]]
        self.ip_permissions = [r for r in self.ip_permissions if any(
            r.get(k) for k in ("IpRanges", "Ipv6Ranges", "UserIdGroupPairs"))]


class FakeSubnet:
    def __init__(self, subnet_id: str, vpc_id: str, zone: str):
        self.id = self.subnet_id = subnet_id
        self.vpc_id, self.availability_zone = vpc_id, zone
        self.state, self.map_public_ip_on_launch = "available", True


class _Collection:
    def __init__(self, items, field):
        self._items, self._field = items, field

    def all(self):
        return list(self._items())

    def filter(self, Filters):                                # noqa: N803
        wanted = {f["Name"]: set(f["Values"]) for f in Filters}
        return [item for item in self._items()
                if all(getattr(item, self._field[name]) in values
                       for name, values in wanted.items())]


class FakeEC2:
    """One region of one account: a default VPC with two public subnets, and its groups."""

    def __init__(self):
        self.subnet_list = [FakeSubnet("subnet-b", "vpc-1", "us-west-2b"),
                            FakeSubnet("subnet-a", "vpc-1", "us-west-2a")]
        self.groups: dict[str, FakeGroup] = {}
        self._ids = itertools.count(1)
        self.subnets = _Collection(lambda: self.subnet_list,
                                   {"subnet-id": "subnet_id", "vpc-id": "vpc_id"})
        self.security_groups = _Collection(lambda: self.groups.values(), {
            "vpc-id": "vpc_id", "group-name": "group_name", "group-id": "id"})

    def Subnet(self, subnet_id):                              # noqa: N802 (boto3's names)
        return next(s for s in self.subnet_list if s.subnet_id == subnet_id)

    # the client calls
    def create_security_group(self, GroupName, VpcId, Description, TagSpecifications=()):  # noqa: N803
        group = FakeGroup(f"sg-{next(self._ids)}", GroupName, VpcId)
        self.groups[group.id] = group
        return {"GroupId": group.id}

    def describe_security_groups(self, Filters):              # noqa: N803
        return {"SecurityGroups": [
            {"GroupId": g.id, "GroupName": g.group_name, "VpcId": g.vpc_id,
             "IpPermissions": [dict(r) for r in g.ip_permissions]}
            for g in self.security_groups.filter(Filters)]}

    def authorize_security_group_ingress(self, GroupId, IpPermissions):  # noqa: N803
        self.groups[GroupId].authorize_ingress(IpPermissions=IpPermissions)

    def revoke_security_group_ingress(self, GroupId, IpPermissions):     # noqa: N803
        self.groups[GroupId].revoke(IpPermissions)


@pytest.fixture
def aws(monkeypatch):
    """The fake account behind boto3 (ours) and behind the launcher's own helpers, and this
    machine's public address."""
    ec2 = FakeEC2()
    monkeypatch.setattr(boto3, "client", lambda *args, **kwargs: ec2)
    monkeypatch.setattr(launcher, "_resource", lambda name, config: ec2)
    monkeypatch.setattr(launcher, "_client", lambda name, config: ec2)
    monkeypatch.setattr(urllib.request, "urlopen",
                        lambda url, timeout=None: io.BytesIO(f"{HERE}\n".encode()))
    launcher._get_subnets_or_die.cache_clear()
    return ec2


def ray_up_security_group_step(cluster_name: str) -> None:
    """What `ray up cluster/aws.yaml --cluster-name NAME` does to security groups: Ray's own
    code, on the config as Ray's own prepare_config and validate_config leave it."""
    config = cl.validate_cluster_yaml(AWS_YAML)
    config["cluster_name"] = cluster_name
    launcher._configure_security_group(launcher._configure_subnet(config))


def ssh_open_to(ec2: FakeEC2) -> dict[str, set[str]]:
    """{group name: the ranges its rules let reach port 22}."""
    return {g.group_name: cl.ssh_ranges(g.ip_permissions) for g in ec2.groups.values()}


def fake_ray(monkeypatch, cluster_name: str) -> list[list[str]]:
    """`ray up` (run through subprocess) replaced by its security-group step; the commands."""
    ran = []

    def ray(command, *args, **kwargs):
        ran.append(command)
        ray_up_security_group_step(cluster_name)
        return subprocess.CompletedProcess(command, 0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", ray)
    monkeypatch.setattr(subprocess, "call", lambda command, *a, **k: ray(command).returncode)
    return ran


def test_without_a_group_of_its_own_the_launcher_opens_ssh_to_everyone(aws):
    """Why a rule in the YAML is not enough: Ray's launcher makes the group with SSH from
    anywhere, and adds the YAML's IpPermissions to that rule rather than replacing it."""
    ray_up_security_group_step("rl-test")
    assert ssh_open_to(aws) == {"ray-autoscaler-rl-test": {WORLD}}
    rules = launcher._create_default_inbound_rules(["sg-1"], [{
        "IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": HERE}]}])
    assert cl.ssh_ranges(rules) == {WORLD, HERE}


def test_the_notebooks_launch_leaves_ssh_open_to_this_machine_only(aws, monkeypatch):
    """Notebook 08's `up` step (run_or_show of `ray up`, a cluster named): the group the
    launcher uses lets port 22 in from this machine's /32 alone, and the nodes reach each
    other. Before issue 36 it was 0.0.0.0/0."""
    ran = fake_ray(monkeypatch, "rl-test")
    cl.run_or_show(cl.aws_command("up", "rl-test"), "rl-test", cwd=ROOT)
    assert ran and ran[0][:2] == ["ray", "up"]
    assert ssh_open_to(aws) == {"ray-autoscaler-rl-test": {f"{HERE}/32"}}
    [group] = aws.groups.values()
    assert any(pair["GroupId"] == group.id for rule in group.ip_permissions
               for pair in rule.get("UserIdGroupPairs", []))


def test_the_runbooks_launch_command_does_the_same(aws, monkeypatch, capsys):
    """`python -m course_lib.cluster up cluster/aws.yaml` (cluster/README.md, section 3):
    SSH narrowed, then `ray up` with the other arguments."""
    from course_lib.cluster.__main__ import main

    ran = fake_ray(monkeypatch, "rl-cli")
    assert main(["up", str(AWS_YAML), "--cluster-name", "rl-cli", "--yes"]) == 0
    assert ran == [["ray", "up", str(AWS_YAML), "--cluster-name", "rl-cli", "--yes"]]
    assert ssh_open_to(aws) == {"ray-autoscaler-rl-cli": {f"{HERE}/32"}}
    assert f"SSH from {HERE}/32 only" in capsys.readouterr().out


def test_a_group_an_earlier_launch_opened_is_closed_again(aws, monkeypatch):
    """A cluster first launched with plain `ray up` (SSH from anywhere) is narrowed at the
    next launch; so is yesterday's address when the laptop moved."""
    ray_up_security_group_step("rl-test")
    [group] = aws.groups.values()
    group.authorize_ingress(IpPermissions=[{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                                            "IpRanges": [{"CidrIp": "198.51.100.4/32"}]}])
    message = cl.narrow_ssh(AWS_YAML, cluster_name="rl-test")
    assert ssh_open_to(aws) == {"ray-autoscaler-rl-test": {f"{HERE}/32"}}
    assert "revoked SSH from 0.0.0.0/0, 198.51.100.4/32" in message
    ray_up_security_group_step("rl-test")                        # the launcher adds nothing
    assert ssh_open_to(aws) == {"ray-autoscaler-rl-test": {f"{HERE}/32"}}


def test_widening_is_an_explicit_choice(aws, monkeypatch):
    assert "SSH from 0.0.0.0/0 only" in cl.narrow_ssh(AWS_YAML, "rl-open", ssh_from=WORLD)
    assert ssh_open_to(aws) == {"ray-autoscaler-rl-open": {WORLD}}
    monkeypatch.setenv(cl.SSH_FROM_VAR, "192.0.2.0/24")         # the notebook's way
    cl.narrow_ssh(AWS_YAML, "rl-open")
    assert ssh_open_to(aws) == {"ray-autoscaler-rl-open": {"192.0.2.0/24"}}


def test_a_bad_address_or_no_address_is_one_line(aws, monkeypatch):
    with pytest.raises(cl.ClusterError, match=r"'22\.1' is not an address range: give one"):
        cl.narrow_ssh(AWS_YAML, "rl-test", ssh_from="22.1")

    def offline(url, timeout=None):
        raise OSError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(cl.ClusterError, match=r"cannot read this machine's public address .* "
                                              r"--ssh-from <your address>/32"):
        cl.narrow_ssh(AWS_YAML, "rl-test")
    assert not aws.groups
