"""The laptop-to-cluster path: cluster/aws.yaml checked offline with the installed Ray's own
launcher validator, its version pins against pyproject.toml, and a real 2-node Ray cluster on
this machine (`ray start` head + worker, token auth) running jobs through the Jobs API.

The workshop's own Ape-X command line as a job with explorers on both nodes is notebook 08's
section 4 under nbval (its `ci` cells: the job succeeded, its explorers ran on both nodes, it
wrote its progress and its checkpoint)."""

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import psutil
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from course_lib import cluster as cl

ROOT = Path(__file__).resolve().parents[1]
AWS_YAML = ROOT / "cluster" / "aws.yaml"


def _aws_config() -> dict:
    return yaml.safe_load(AWS_YAML.read_text())


def _write_yaml(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# --------------------------------------------------------------------------------------------
# cluster/aws.yaml, offline
# --------------------------------------------------------------------------------------------

def test_aws_yaml_passes_rays_own_validator():
    prepared = cl.validate_cluster_yaml(AWS_YAML)
    types = prepared["available_node_types"]
    assert prepared["head_node_type"] == "head" and set(types) == {
        "head", "cpu_worker", "gpu_learner"}
    assert types["cpu_worker"]["min_workers"] >= 1
    assert types["gpu_learner"]["min_workers"] == 0
    assert types["gpu_learner"]["resources"]["GPU"] == 1
    assert prepared["max_workers"] >= sum(t["min_workers"] for t in types.values())
    assert prepared["provider"]["cache_stopped_nodes"] is False
    assert prepared["idle_timeout_minutes"] > 0
    # Our commands replaced the launcher defaults (which install a Ray nightly wheel).
    commands = " ".join(prepared["head_setup_commands"] + prepared["worker_setup_commands"])
    assert "ray-wheels" not in commands and f"-c {NODE_LOCK}" in commands


#: what the AWS provider fills in at launch for `resources: {}` (it asks EC2 for the instance
#: type's vCPUs): the head's and the CPU workers' sizes, as cluster/aws.yaml's comments give them
DETECTED_CPUS = {"m7i.large": 2, "c7i.2xlarge": 8}


def nodes_launched_for(demands: list[dict]) -> dict[str, int]:
    """The node types Ray's autoscaler launches for pending `demands` on the aws.yaml cluster,
    computed by the installed Ray's own `ResourceDemandScheduler.get_nodes_to_launch` (what the
    autoscaler on the head runs every few seconds), with the head and its min_workers CPU
    workers up and idle."""
    from ray.autoscaler._private.node_provider_availability_tracker import (
        NodeAvailabilitySummary,
    )
    from ray.autoscaler._private.resource_demand_scheduler import ResourceDemandScheduler
    from ray.autoscaler.tags import (
        NODE_KIND_HEAD,
        NODE_KIND_WORKER,
        TAG_RAY_NODE_KIND,
        TAG_RAY_USER_NODE_TYPE,
    )

    config = cl.validate_cluster_yaml(AWS_YAML)
    types = config["available_node_types"]
    for node_type in types.values():
        cpus = DETECTED_CPUS.get(node_type["node_config"]["InstanceType"])
        node_type["resources"] = {**({"CPU": cpus} if cpus else {}), **node_type["resources"]}
    running = {"head": config["head_node_type"]}
    running |= {f"cpu-{i}": "cpu_worker" for i in range(types["cpu_worker"]["min_workers"])}

    class Provider:                             # the cloud as the scheduler sees it: tags, IPs
        def node_tags(self, node):
            kind = NODE_KIND_HEAD if node == "head" else NODE_KIND_WORKER
            return {TAG_RAY_NODE_KIND: kind, TAG_RAY_USER_NODE_TYPE: running[node]}

        def internal_ip(self, node):
            return node

    scheduler = ResourceDemandScheduler(Provider(), types, config["max_workers"],
                                        config["head_node_type"], config["upscaling_speed"])
    idle = {node: dict(types[t]["resources"]) for node, t in running.items()}
    launch, _ = scheduler.get_nodes_to_launch(
        list(running), {}, demands, idle, [], idle, [], NodeAvailabilitySummary({}))
    return launch


def learner_demand(learner_gpus: float) -> dict:
    """The learner actor's resource request, as the Ape-X driver makes it."""
    from course_lib.apex import ApexConfig
    from course_lib.distributed.run_actors import actor_resources

    cfg = ApexConfig(num_workers=8, learner_gpus=learner_gpus)
    res = actor_resources(cfg, 18.0)
    return {"CPU": res["learner"], **({"GPU": res["learner_gpus"]} if res["learner_gpus"] else {})}


def test_the_learners_gpu_request_is_what_launches_the_gpu_node():
    """gpu_learner starts at zero nodes: only a pending request that needs a GPU launches it.
    The learner asks for one with learner_gpus > 0 (before, it asked only when the cluster
    already had a GPU: on this cluster, never)."""
    assert learner_demand(1) == {"CPU": 0.5, "GPU": 1}
    assert nodes_launched_for([learner_demand(1)]) == {"gpu_learner": 1}
    assert nodes_launched_for([learner_demand(0)]) == {}          # fits on the idle nodes
    # CPU work beyond the idle nodes adds a CPU worker, not the GPU node it would also fit on
    assert nodes_launched_for([{"CPU": 4}] * 6) == {"cpu_worker": 1}


def test_the_aws_job_asks_for_the_learners_gpu():
    """Notebook 08's AWS job and the runbook's `ray job submit` set learner_gpus."""
    notebook = json.loads((ROOT / "notebooks" / "08_cluster.ipynb").read_text())
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    [job] = [source for source in sources if "aws_job = " in source]
    assert 'json.dumps({"learner_gpus": 1})' in job
    assert """--config '{"learner_gpus": 1}'""" in (ROOT / "cluster" / "README.md").read_text()


def test_aws_yaml_has_none_of_the_costly_or_insecure_settings():
    assert cl.safety_problems(AWS_YAML) == []
    config = _aws_config()
    assert "security_group" not in config["provider"]          # only the launcher's SSH rule
    starts = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in starts and "0.0.0.0" not in starts
    for node_type in config["available_node_types"].values():  # explicit images, never the
        assert node_type["node_config"]["ImageId"]             # launcher's EOL default


def test_token_auth_reaches_every_node():
    config = _aws_config()
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = [c for c in config[key] if "ray start" in c]
        assert starts and all("RAY_AUTH_MODE=token" in c for c in starts), key
    # The token file goes to every node (the head re-ships file_mounts to later workers),
    # and the token itself is never written into the YAML.
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    assert "RAY_AUTH_TOKEN=" not in AWS_YAML.read_text()


#: where the nodes find the lock (cluster/aws.yaml's file_mounts ship requirements/lock.txt)
NODE_LOCK = "~/workshop/requirements/lock.txt"


def test_nodes_install_from_the_lock():
    """No version is copied into the YAML: the nodes install with the lock as constraints,
    and the pins read through it are pyproject.toml's (the lock's test keeps those equal)."""
    config = _aws_config()
    assert config["file_mounts"][NODE_LOCK] == "./requirements/lock.txt"
    installs = [c for c in config["setup_commands"] + config["head_setup_commands"]
                if "uv pip install" in c]
    assert len(installs) == 3
    torch_step, *package_steps = installs
    assert all(f"-c {NODE_LOCK}" in c for c in package_steps)
    # the CPU build's step takes torch alone (--no-deps) at the lock's version, read from it
    assert "--no-deps" in torch_step and NODE_LOCK in torch_step
    commands = " ".join(config["setup_commands"] + config["head_setup_commands"])
    assert not re.search(r"[\w\]]==\d", commands), "a version written into the YAML"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {Requirement(r).name.lower(): str(Requirement(r).specifier).removeprefix("==")
            for r in project["dependencies"]}
    found = cl.cluster_versions(config)
    assert found["ray"] == pins["ray"] == "2.60.0"
    assert SpecifierSet(project["requires-python"]).contains(found["python"])
    for name, version in pins.items():
        assert name == "ray" or found["packages"][name] == version, name


def test_nodes_install_what_training_needs_and_nothing_else():
    """The nodes install the package without extras: its base requirements are what training
    needs; JupyterLab, the notebooks' extras and the test tools stay on the laptop."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {Requirement(r).name.lower() for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    laptop_only = {Requirement(r).name.lower() for group in ("attendee", "test")
                   for r in extras[group]} - {"course-lib"}
    assert {"jupyterlab", "ipykernel", "cpprb", "pytest"} <= laptop_only
    assert not names & laptop_only
    assert {"ray", "torch", "gymnasium", "tqdm", "tensorboard"} <= names
    [install] = [c for c in _aws_config()["setup_commands"] if "-e ~/workshop" in c]
    assert install.rstrip().endswith("-e ~/workshop")           # no [extras]


def test_check_versions_accepts_the_installed_stack():
    report = cl.check_versions(AWS_YAML)
    assert report["ray"]["cluster"] == report["ray"]["local"]
    same_minor = report["python"]["cluster"].split(".")[:2] == list(
        map(str, sys.version_info[:2]))
    # another minor version on the laptop is fine for `ray up` and Ray Jobs, and said so
    assert same_minor or any("Ray Client" in note for note in report["notes"])


def _drifted(tmp_path: Path, lock_change=("", ""), yaml_change=("", "")) -> Path:
    """A copy of aws.yaml (and of the lock it mounts) with one string replaced."""
    lock = tmp_path / "lock.txt"
    text = (ROOT / "requirements" / "lock.txt").read_text()
    assert lock_change[0] in text
    lock.write_text(text.replace(*lock_change))
    text = AWS_YAML.read_text()
    assert yaml_change[0] in text
    config = yaml.safe_load(text.replace(*yaml_change))
    config["file_mounts"][NODE_LOCK] = str(lock)
    return _write_yaml(tmp_path / "drift.yaml", config)


def test_ray_drift_in_the_lock_is_refused(tmp_path):
    path = _drifted(tmp_path, lock_change=("\nray==2.60.0 ", "\nray==2.59.0 "))
    with pytest.raises(cl.ClusterConfigError, match=r"installs Ray 2\.59\.0 but Ray 2\.60\.0"):
        cl.check_versions(path)


def test_the_version_check_compares_only_what_the_nodes_install(tmp_path):
    """Issue 39: the check compares Ray, Python and the packages the nodes install (the
    package's base requirements, and the head's boto3), not JupyterLab's babel, which the nodes
    never install: a laptop with another babel than the lock's is no difference."""
    path = _drifted(tmp_path, lock_change=("\nbabel==2.18.0 ", "\nbabel==0.0.1 "))
    report = cl.check_versions(path)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {Requirement(r).name.lower() for r in project["dependencies"]} - {"ray"}
    assert set(report["packages"]) | {n.split("==")[0] for n in report["notes"]} >= base
    assert set(cl.cluster_versions(_aws_config())["packages"]) == base | {"boto3", "botocore"}
    assert "babel" not in report["packages"]


def test_a_training_stack_difference_is_one_line_with_its_fix(tmp_path):
    path = _drifted(tmp_path, lock_change=("\nnumpy==2.4.6 ", "\nnumpy==2.3.0 "))
    with pytest.raises(cl.ClusterConfigError) as err:
        cl.check_versions(path)
    message = str(err.value)
    assert "\n" not in message and "numpy 2.3.0 there, 2.4.6 here" in message
    assert f"`uv pip install -c {tmp_path / 'lock.txt'} -e .`" in message


def test_python_drift_is_refused(tmp_path):
    path = _drifted(tmp_path, yaml_change=("--python 3.11.14", "--python 3.10.16"))
    with pytest.raises(cl.ClusterConfigError,
                       match=r"nodes run Python 3\.10\.16, which the workshop does not support"):
        cl.check_versions(path)


def test_a_pin_in_a_command_wins_over_the_lock(tmp_path):
    config = _aws_config()
    config["setup_commands"].append('pip install "ray[default]==2.59.0"')
    assert cl.cluster_versions(config)["ray"] == "2.59.0"


def test_a_missing_lock_is_one_line_naming_it(tmp_path):
    config = _aws_config()
    config["file_mounts"][NODE_LOCK] = "./no/such/lock.txt"
    with pytest.raises(cl.ClusterConfigError, match=r"mounted from \./no/such/lock\.txt, which"):
        cl.cluster_versions(config)


def test_unpinned_ray_is_refused(tmp_path):
    config = _aws_config()
    for key in ("setup_commands", "head_setup_commands"):
        config[key] = [c for c in config[key] if NODE_LOCK not in c]
    with pytest.raises(cl.ClusterConfigError, match="does not pin Ray"):
        cl.check_versions(_write_yaml(tmp_path / "unpinned.yaml", config))


OLD_STYLE = """\
# A Ray 0.8-era config, as in the 2020 study-group repository
cluster_name: old
min_workers: 2
initial_workers: 2
max_workers: 2
provider:
    type: aws
    region: us-west-2
auth:
    ssh_user: ubuntu
head_node:
    InstanceType: m5.large
    ImageId: ami-0123456789abcdef0
worker_nodes:
    InstanceType: m5.large
    ImageId: ami-0123456789abcdef0
"""


def test_old_style_config_is_rejected_with_one_readable_line(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(OLD_STYLE)
    with pytest.raises(cl.ClusterConfigError) as info:
        cl.validate_cluster_yaml(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    for key in ("initial_workers", "head_node", "worker_nodes"):
        assert f"unknown key {key!r}" in message
    assert "available_node_types" in message and "min_workers" in message


def test_rays_schema_catches_typos_with_a_suggestion(tmp_path):
    config = _aws_config()
    config["available_node_types"]["cpu_worker"]["min_worker"] = 1     # typo
    path = _write_yaml(tmp_path / "typo.yaml", config)
    with pytest.raises(cl.ClusterConfigError, match=(
            r"unknown key 'min_worker' at available_node_types\.cpu_worker "
            r"\(did you mean 'min_workers'\?\)")):
        cl.validate_cluster_yaml(path)
    config = _aws_config()
    config["idle_timeout_minute"] = 5
    with pytest.raises(cl.ClusterConfigError, match="did you mean 'idle_timeout_minutes'"):
        cl.validate_cluster_yaml(_write_yaml(path, config))


def test_inconsistent_config_is_explained(tmp_path):
    config = _aws_config()
    config["max_workers"] = 1                       # below the sum of min_workers (2)
    with pytest.raises(cl.ClusterConfigError, match="max_workers.*smaller than the sum"):
        cl.validate_cluster_yaml(_write_yaml(tmp_path / "small.yaml", config))


def test_broken_yaml_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("cluster_name: x\nprovider: {type: aws\n")
    with pytest.raises(cl.ClusterConfigError, match=r"not valid YAML at line \d+"):
        cl.validate_cluster_yaml(path)


def test_unsafe_settings_are_flagged():
    config = _aws_config()
    config["provider"]["cache_stopped_nodes"] = True
    config["provider"]["security_group"] = {"IpPermissions": [
        {"FromPort": 8265, "ToPort": 8265, "IpProtocol": "tcp",
         "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]}
    config["worker_start_ray_commands"] = ["ray start --address=$RAY_HEAD_IP:6379"]
    del config["available_node_types"]["cpu_worker"]["node_config"]["ImageId"]
    problems = "\n".join(cl.safety_problems(config))
    assert "cache_stopped_nodes" in problems
    assert "8265-8265 to the whole internet" in problems
    assert "worker_start_ray_commands do not set RAY_AUTH_MODE=token" in problems
    assert "'cpu_worker' has no ImageId" in problems


def test_preflight_names_what_ray_up_would_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))          # no ~/.ray/auth_token here
    from_root = "\n".join(cl.preflight(AWS_YAML, cwd=ROOT))
    assert "~/.ray/auth_token" in from_root and "ray get-auth-token --generate" in from_root
    assert "course_lib" not in from_root                # the package mounts resolve from root
    elsewhere = "\n".join(cl.preflight(AWS_YAML, cwd=tmp_path))
    assert "./course_lib does not exist here (run `ray up` from the repository root)" in elsewhere
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("x" * 64)
    assert not [p for p in cl.preflight(AWS_YAML, cwd=ROOT) if "file mount" in p]


# --------------------------------------------------------------------------------------------
# Ray Jobs: bad addresses are one clear error, before any request
# --------------------------------------------------------------------------------------------

def test_unreachable_address_is_one_clear_error():
    address = f"http://127.0.0.1:{cl.free_port()}"        # nothing listens there
    with pytest.raises(cl.ClusterError, match=r"Cannot reach Ray Jobs at .*ray dashboard"):
        cl.Jobs(address)


def test_gcs_address_instead_of_jobs_address_is_explained():
    with pytest.raises(cl.ClusterError, match=r"must look like http://127\.0\.0\.1:8265"):
        cl.Jobs("127.0.0.1:6379")


# --------------------------------------------------------------------------------------------
# A real 2-node cluster on this machine: `ray start` head + 1 worker, 1 CPU each, token auth
# --------------------------------------------------------------------------------------------

# A parent folder of 30 characters: short enough for the old guess (<= 40), too long for Ray's
# unix sockets (the head died with "Module MetricsHead failed to start"). LocalCluster must
# notice and fall back to /tmp.
LONG_PARENT = "/tmp/" + "ray-tmpdir-long-enough-" + "x" * 2


@pytest.fixture(scope="module")
def two_nodes():
    """Its own Ray, not the session's `ray_local`: two `ray start` nodes with token auth and a
    job server, what notebook 08 and a job's command line need (`ray_local` is one node,
    without them); one per module, shared by the tests below."""
    with cl.LocalCluster(num_workers=1, cpus_per_node=1, root=LONG_PARENT) as cluster:
        yield cluster


def test_socket_paths_are_measured_against_the_os_limit():
    from course_lib.cluster import local

    attempts = cl.LocalCluster.ATTEMPTS
    assert local.socket_path_length("/tmp", 1, attempts) <= local.SOCKET_PATH_MAX
    assert local.socket_path_length(LONG_PARENT, 1, attempts) > local.SOCKET_PATH_MAX
    assert local.cluster_parent(LONG_PARENT, 1, attempts) == Path("/tmp")
    assert local.cluster_parent("/tmp/rt", 1, attempts) == Path("/tmp/rt")
    # many workers, longer node folders (w1234-4): the budget grows with them
    assert (local.socket_path_length("/tmp", 12, attempts)
            == local.socket_path_length("/tmp", 1, attempts))        # head-4 is still longer
    assert (local.socket_path_length("/tmp", 1234, attempts)
            > local.socket_path_length("/tmp", 1, attempts))


# Placement: one 1-CPU bundle per node (STRICT_SPREAD refuses two bundles on one node), tasks
# and actors pinned to the bundles. Plain SPREAD is best effort: measured here, the first rounds
# all landed on the head while the worker node was still warming up.
PLACEMENT_JOB = '''\
import json, os
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

ray.init()
pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=120)

def bundle(i):
    return PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=i)

@ray.remote(num_cpus=1)
def where():
    import helper                       # shipped in the working dir, imported on that node
    return {"node": ray.get_runtime_context().get_node_id(), "helper": helper.MESSAGE,
            "tag": os.environ.get("COURSE_JOB_TAG"),
            "shipped_junk": [p for p in (".venv", "results") if os.path.exists(p)]}

@ray.remote(num_cpus=1)
class Explorer:
    def node(self):
        return ray.get_runtime_context().get_node_id()

tasks = ray.get([where.options(scheduling_strategy=bundle(i % 2)).remote() for i in range(4)],
                timeout=120)
explorers = [Explorer.options(scheduling_strategy=bundle(i)).remote() for i in range(2)]
print("PLACEMENT=" + json.dumps({
    "tasks": tasks, "actor_nodes": ray.get([e.node.remote() for e in explorers], timeout=120)}))
'''


def test_local_cluster_is_two_nodes_with_one_cpu_each(two_nodes):
    from course_lib.cluster import local

    # RAY_TMPDIR-like parent too long: the cluster went to /tmp, and every socket Ray made
    # there fits the OS limit and the estimate
    assert two_nodes.root.parent == Path("/tmp")
    sockets = [p for p in two_nodes.root.rglob("sockets/*")]
    assert any(p.name == "dash_MetricsHead" for p in sockets)
    budget = local.socket_path_length("/tmp", 1, cl.LocalCluster.ATTEMPTS)
    assert max(len(str(p).encode()) for p in sockets) <= budget <= local.SOCKET_PATH_MAX
    nodes = two_nodes.nodes()
    assert [n["is_head"] for n in nodes] == [True, False]
    assert [n["cpus"] for n in nodes] == [1, 1]
    assert two_nodes.address.startswith("127.0.0.1:")
    assert two_nodes.dashboard_url.startswith("http://127.0.0.1:")


def test_job_ships_working_dir_and_runs_on_both_nodes(two_nodes, tmp_path):
    work = tmp_path / "job"
    (work / ".venv").mkdir(parents=True)
    (work / ".venv" / "big.bin").write_bytes(b"0" * 1000)
    (work / "results").mkdir()
    (work / "results" / "old.json").write_text("{}")
    (work / "helper.py").write_text('MESSAGE = "shipped"\n')
    (work / "placement.py").write_text(PLACEMENT_JOB)
    job_id = two_nodes.jobs.submit(["python", "placement.py"], working_dir=work,
                                   env_vars={"COURSE_JOB_TAG": "tag-42"})
    lines = list(two_nodes.jobs.follow(job_id, timeout_s=240))
    assert two_nodes.jobs.wait(job_id, timeout_s=30) == "SUCCEEDED"
    result = json.loads(next(line for line in lines
                             if line.startswith("PLACEMENT=")).split("=", 1)[1])
    node_ids = {n["node_id"] for n in two_nodes.nodes()}
    assert {t["node"] for t in result["tasks"]} == node_ids
    assert set(result["actor_nodes"]) == node_ids and len(node_ids) == 2
    assert {t["helper"] for t in result["tasks"]} == {"shipped"}
    assert {t["tag"] for t in result["tasks"]} == {"tag-42"}
    assert all(t["shipped_junk"] == [] for t in result["tasks"])


def test_failing_entrypoint_raises_with_the_log_tail(two_nodes, tmp_path):
    work = tmp_path / "failing"
    work.mkdir()
    (work / "train.py").write_text('print("loading config")\n'
                                   'raise ValueError("learning rate must be > 0, got -1")\n')
    job_id = two_nodes.jobs.submit(["python", "train.py"], working_dir=work)
    with pytest.raises(cl.JobFailedError) as info:
        two_nodes.jobs.wait(job_id, timeout_s=120)
    message = str(info.value)
    assert f"job {job_id} FAILED" in message and "exit code 1" in message
    assert "ValueError: learning rate must be > 0, got -1" in info.value.logs_tail
    assert "learning rate must be > 0" in message and "ray job logs" in message
    assert message.count("Traceback (most recent call last)") == 1   # the tail, not twice


def test_waiting_is_bounded_and_the_job_can_be_stopped(two_nodes):
    job_id = two_nodes.jobs.submit(["python", "-c", "import time; time.sleep(600)"])
    with pytest.raises(cl.JobTimeoutError, match="ray job stop"):
        two_nodes.jobs.wait(job_id, timeout_s=2)
    with pytest.raises(cl.JobTimeoutError, match="follow it again"):
        list(two_nodes.jobs.follow(job_id, timeout_s=1))
    assert two_nodes.jobs.client.stop_job(job_id)             # Ray's own client, as documented
    with pytest.raises(cl.JobFailedError, match="STOPPED"):
        two_nodes.jobs.wait(job_id, timeout_s=60)


def test_cluster_refuses_requests_without_its_token(two_nodes):
    with pytest.raises(cl.ClusterError, match="token authentication"):
        cl.Jobs(two_nodes.dashboard_url).submit(["python", "-c", "pass"])


def test_stop_leaves_no_process_behind(two_nodes):
    """Runs last in this file: stops the module's cluster and looks for strays."""
    two_nodes.stop()
    assert _marked("COURSE_LOCAL_CLUSTER", str(two_nodes.root)) == []
    assert not two_nodes.root.exists()
    with pytest.raises(cl.ClusterError, match="not running: call start"):
        _ = two_nodes.jobs
    print(f"local cluster timings: {two_nodes.timings}, retried node starts: "
          f"{two_nodes.retries}")


def _marked(name: str, value: str) -> list[int]:
    """The pids of the processes whose environment has `name` set to `value`."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(name) == value:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def test_kill_marked_kills_exactly_the_marked_processes(tmp_path):
    # Each child says so once it runs: until it has exec'd, /proc shows the parent's
    # environment, without the mark (seen on a loaded machine), and neither would find it.
    sleep = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
    marked = psutil.Popen(sleep, env={**os.environ, "COURSE_TEST_MARK": str(tmp_path)},
                          stdout=subprocess.PIPE, text=True)
    other = psutil.Popen(sleep, env={**os.environ, "COURSE_TEST_MARK": str(tmp_path) + "-x"},
                         stdout=subprocess.PIPE, text=True)
    try:
        assert marked.stdout.readline() == "up\n" and other.stdout.readline() == "up\n"
        assert _marked("COURSE_TEST_MARK", str(tmp_path)) == [marked.pid]
        cl.kill_marked("COURSE_TEST_MARK", str(tmp_path))
        assert marked.wait(timeout=10) == -9 and other.is_running()
    finally:
        other.kill()
        other.wait(timeout=10)


def test_a_crashed_raylet_is_noticed_without_waiting_for_ray_start(tmp_path):
    # On 2 busy cores a raylet can give up on its dashboard agent (a fixed 15 s in Ray 2.60);
    # `ray start` only notices ~30 s later, LocalCluster reads the raylet's fatal line at once
    # and retries the node.
    local = cl.LocalCluster()
    local.root = tmp_path
    logs = tmp_path / "w1" / "session_2026-01-01_00-00-00_000000_1" / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_text(
        "[2026-01-01 00:00:01,000 I 7 7] (raylet) main.cc:283: Setting cluster ID\n"
        "[2026-01-01 00:00:16,000 C 7 7] (raylet) node_manager.cc:3588: Check failed: "
        "Timed out waiting for file .../dashboard_agent_listen_port_abc\n")
    local._nodes = [(None, tmp_path / "w1.log")]
    assert "Timed out waiting for file" in local._raylet_fatal_line()


# --------------------------------------------------------------------------------------------
# The AWS steps of notebook 08: shown, and run only when a cluster is named
# --------------------------------------------------------------------------------------------

def test_aws_cells_only_show_commands_without_a_cluster_name(monkeypatch, capsys):
    monkeypatch.delenv(cl.AWS_CLUSTER_VAR, raising=False)
    name = cl.aws_cluster_name()
    assert name is None
    job = ["python", "-m", "course_lib", "train", "--stop", '{"time_s": 60}']
    assert cl.run_or_show(cl.aws_command("submit", name, job=job), name) is None
    assert cl.open_tunnel(name) is None
    out = capsys.readouterr().out
    assert ("$ ray job submit --address http://127.0.0.1:8265 --working-dir . -- python -m "
            "course_lib train --stop '{\"time_s\": 60}'") in out
    assert out.count(f"set {cl.AWS_CLUSTER_VAR}=<name>") == 2


def test_aws_commands_name_the_cluster_and_never_prompt():
    for step in ("up", "dashboard", "fetch", "down"):
        command = cl.aws_command(step, "rl-alice")
        assert command[:2] == ["ray", step.replace("fetch", "rsync-down")]
        assert command[command.index("--cluster-name") + 1] == "rl-alice"
    assert "--yes" in cl.aws_command("up", "x") and "--yes" in cl.aws_command("down", "x")
    with pytest.raises(ValueError, match="unknown step 'destroy'"):
        cl.aws_command("destroy", "x")


def test_a_named_cluster_runs_the_command(monkeypatch, capsys):
    monkeypatch.setenv(cl.AWS_CLUSTER_VAR, "rl-alice")
    name = cl.aws_cluster_name()
    status = cl.run_or_show(["python", "-c", "import os; print(os.environ['RAY_AUTH_MODE'])"],
                            name)
    assert status == 0 and capsys.readouterr().out.rstrip().endswith("token")


@pytest.mark.parametrize("bad", ["rl alice", "rl_alice;rm", "-rl", "x" * 41])
def test_a_cluster_name_aws_would_refuse_is_one_clear_error(monkeypatch, bad):
    monkeypatch.setenv(cl.AWS_CLUSTER_VAR, bad)
    with pytest.raises(ValueError, match="letters, digits and dashes"):
        cl.aws_cluster_name()
