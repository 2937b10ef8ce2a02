"""The Kubernetes backend end to end on the fake cluster (tests/fakes): the real `kubernetes` client, Pods run as Docker containers.

Whole Episodes, a Run and a killed Run's cleanup go through the backend; the
outcomes are compared with the Docker sandbox's for the same Program, seed and Episodes.
The hostile cases: a policy flooding its output, an evicted Episode Pod, a
cluster that ignores NetworkPolicy, and another machine of the same hostname.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import kubernetes_validate
import pytest
import yaml
from k8s_fixtures import load_fake
from support.cli import run_cli
from support.loopback_registry import serving_registry

from epg_sdk.codes import EpisodeStatus
from orchestrator.backends.kubernetes.cluster import Cluster
from orchestrator.backends.kubernetes.digests import registry_resolver
from orchestrator.backends.kubernetes.hardening import hardening_problems
from orchestrator.backends.kubernetes.manifests import (
    EPISODE_ROLE,
    SUPPORTED_VERSIONS,
    ClusterSettings,
    ClusterTarget,
    heartbeat_lease,
    label_selector,
    label_value,
)
from orchestrator.backends.kubernetes.owners import micro_time
from orchestrator.backends.kubernetes.relay import UNPACK
from orchestrator.backends.kubernetes.sandbox import KubernetesSandbox, NetworkPolicyNotEnforced
from orchestrator.backends.labels import OWNER, ROLE, SANDBOX, SCOPE, LabelSet, owner_id, selector
from orchestrator.backends.settings import SandboxImages, SandboxTuning
from orchestrator.images import registry as registries
from orchestrator.images.catalogue import resolve_benchmark
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.ports import ContainerPoolControl, PooledSandbox
from orchestrator.kernel.program import capture_program
from orchestrator.orphans import reap_cluster_orphans
from orchestrator.run import workspace_fs

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "epg-test"

CRASHING = """
class Policy:
    def __init__(self):
        self.steps = 0
    def act(self, observation):
        self.steps += 1
        if self.steps == 3:
            raise RuntimeError("deliberate failure at step 3")
        return 0

def make_policy(context):
    print("hello from the policy")
    return Policy()
"""

EXITING = """
import os

def make_policy(context):
    class Policy:
        def act(self, observation):
            os.write(2, b"last words before the exit")
            os._exit(3)
    return Policy()
"""

# Reports what an Episode Pod's policy container can see and touch, in its failure reason.
PROBING = """
import json, os

def attempt(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return "written"
    except OSError as exc:
        return type(exc).__name__ + ":" + str(exc.errno)

def make_policy(context):
    class Policy:
        def act(self, observation):
            raise RuntimeError(json.dumps({
                "uid": os.getuid(), "io": sorted(os.listdir("/epg/io")), "exchange": os.path.exists("/exchange"),
                "program": attempt("/epg/program/x"), "root": attempt("/x"), "tmp": attempt("/tmp/x"),
                "token": os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token"),
            }))
    return Policy()
"""


@pytest.fixture(scope="module")
def fake_cluster(engine, tmp_path_factory):
    """The fake API server and its kubelet; yields (api, kubeconfig path). Nothing labelled may be left at the end."""
    api = load_fake("fake_kube_api").FakeKubeApi(load_fake("fake_kubelet").FakeKubelet(engine))
    kubeconfig = api.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config", NAMESPACE)
    try:
        yield api, kubeconfig
        assert api.store.all_objects() == []
    finally:
        api.close()


@pytest.fixture
def k8s_sandbox(fake_cluster, images, builder, scope):
    """A factory: k8s_sandbox(tuning) -> a started KubernetesSandbox on the fake cluster."""
    _, kubeconfig = fake_cluster

    @contextmanager
    def factory(tuning: SandboxTuning = SandboxTuning(concurrency=2, pool_size=2)) -> Iterator[KubernetesSandbox]:
        package, _, entry = resolve_benchmark("CartPole-v1", builder.packages())
        cluster = Cluster.connect(ClusterTarget(kubeconfig=str(kubeconfig), namespace=NAMESPACE))
        pod_images = SandboxImages(environment=images[package.image], policy_runtime=images["policy-runtime"], benchmark_entry=entry)
        labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)
        with KubernetesSandbox(cluster, pod_images, labels=labels, tuning=tuning, settings=ClusterSettings(namespace=NAMESPACE)) as sandbox:
            yield sandbox

    return factory


def _outcomes(feedback) -> list[tuple]:
    return [(e.index, e.status, e.failure, e.reason, e.steps, e.reward, e.terminated, e.truncated) for e in feedback.episodes]


def test_episodes_on_the_cluster_give_the_docker_sandboxs_outcomes_in_fresh_hardened_pods(k8s_sandbox, open_sandbox, write_program,
                                                                                           fake_cluster, scope):
    api, _ = fake_cluster
    programs = [capture_program(write_program(source)) for source in (CRASHING, EXITING)]
    first = len(api.store.events)
    with k8s_sandbox() as sandbox:
        assert isinstance(sandbox, PooledSandbox) and isinstance(sandbox.container_pool, ContainerPoolControl)
        on_cluster = [evaluate_program(sandbox, program, split="train", seed=7, episodes=2) for program in programs]
        (probe,) = evaluate_program(sandbox, capture_program(write_program(PROBING)), split="train", seed=7, episodes=1).feedback.episodes
        sandbox_id = sandbox.labels.sandbox
        live = {(o["kind"], o["metadata"]["name"]) for o in api.store.all_objects() if sandbox_id in o["metadata"]["name"]}
        assert ("NetworkPolicy", f"epg-deny-{sandbox_id}") in live and ("Pod", f"epg-ctl-{sandbox_id}") in live
    with open_sandbox(tuning=SandboxTuning(concurrency=1, pool_size=2)) as sandbox:  # another concurrency, the same results
        assert isinstance(sandbox, PooledSandbox) and isinstance(sandbox.container_pool, ContainerPoolControl)
        on_docker = [evaluate_program(sandbox, program, split="train", seed=7, episodes=2) for program in programs]
    for cluster_run, docker_run in zip(on_cluster, on_docker, strict=True):
        assert _outcomes(cluster_run.feedback) == _outcomes(docker_run.feedback)
        assert cluster_run.feedback.score == docker_run.feedback.score
    crashing, exiting = (_outcomes(e.feedback) for e in on_cluster)
    assert {o[2].value for o in crashing} == {"exception"} and {o[4] for o in crashing} == {2}
    assert {o[3] for o in exiting} == {"the policy process exited with status 3 before the Episode ended"}
    assert "hello from the policy" in on_cluster[0].feedback.episodes[0].output_tail
    # A policy that dies without its goodbye: its output is read from the Pod's output volume (read_tail), as the
    # Docker sandbox reads a dead policy container's log.
    for run in (on_cluster[1], on_docker[1]):
        assert all("last words before the exit" in e.output_tail for e in run.feedback.episodes), [e.output_tail for e in run.feedback.episodes]
    # The policy runs as 10001 and sees neither the runner's socket nor a writable Program, root or token.
    seen = json.loads(probe.reason[probe.reason.index("{"):])
    assert seen == {"uid": 10001, "io": [], "exchange": False, "program": "OSError:30", "root": "OSError:30", "tmp": "written",
                    "token": False}
    # One fresh Pod per Episode: each Pod that got a Program got exactly one.
    uploads = [pod for pod, container, command in api.kubelet.execs if sandbox_id in pod and UNPACK in command]
    assert len(uploads) == 5 and len(set(uploads)) == 5
    # Every object the backend made: valid, hardened, labelled; none left after the sandbox closed.
    created = [obj for _, kind, kind_type, obj in api.store.events[first:] if kind_type == "ADDED"]
    assert {obj["kind"] for obj in created} == {"Pod", "NetworkPolicy", "Lease"}
    assert any(obj["metadata"]["name"] == f"epg-probe-{sandbox_id}" for obj in created)  # the NetworkPolicy probe ran, and passed
    for obj in created:
        body = {key: value for key, value in obj.items() if key != "status"}
        body["metadata"] = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels")}
        assert kubernetes_validate.validate(body, desired_version=SUPPORTED_VERSIONS[-1], strict=True)
        assert obj["metadata"]["labels"][SCOPE] == scope
        if obj["kind"] == "Pod":
            assert hardening_problems(obj) == []
    assert [o for o in api.store.all_objects() if o["metadata"]["labels"].get("org.evopolicygym.sandbox") == sandbox_id] == []


def test_a_cluster_sandbox_told_its_episodes_starts_no_episode_pod_beyond_them(k8s_sandbox, write_program, fake_cluster):
    # The Docker sandbox's bound (SandboxTuning.episodes): a command of one batch pays for no Pod it will not use.
    api, _ = fake_cluster
    first = len(api.store.events)
    program = capture_program(write_program(CRASHING))
    with k8s_sandbox(SandboxTuning(concurrency=1, pool_size=3, episodes=1)) as sandbox:
        assert sandbox.container_pool.wait_until_full(120)
        time.sleep(3)  # a pool that ignored the bound would be starting its further Pods by now
        (outcome,) = evaluate_program(sandbox, program, split="train", seed=7, episodes=1).feedback.episodes
        sandbox_id = sandbox.labels.sandbox
    assert outcome.failure is not None and outcome.failure.value == "exception"
    episode_pods = [obj["metadata"]["name"] for _, kind, kind_type, obj in api.store.events[first:]
                    if kind_type == "ADDED" and obj["kind"] == "Pod" and obj["metadata"]["labels"].get(ROLE) == EPISODE_ROLE
                    and obj["metadata"]["labels"].get(SANDBOX) == sandbox_id]
    assert len(episode_pods) == 1, episode_pods


def _spec(path: Path, backend: str, kubeconfig: Path | None = None) -> Path:
    spec = {
        "benchmark": "CartPole-v1",
        "agent": {"kind": "scripted", "steps": [{"program": str(REPO / "environments" / "cartpole" / "baseline"), "episodes": "0:2"}],
                  "finish": "all"},
        "budget": {"episodes": 2, "max_submissions": 1, "pool_size": 2},
        "validation": {"episodes": 1, "max_candidates": 1},
        "assessment": {"episodes": 1, "include_initial_program": False},
        "seed": 5,
        "seed_key_file": "seed.key",
        "sandbox": {"backend": backend, "concurrency": 2, "pool_size": 2, "prestart_memory_mib": 0,
                    "kubernetes": {"namespace": NAMESPACE}},
    }
    path.write_text(yaml.safe_dump(spec))
    return path


def _without_timings(document):
    """document without the measured *_seconds fields, which differ from run to run."""
    if isinstance(document, dict):
        return {k: _without_timings(v) for k, v in document.items() if not k.endswith("_seconds")}
    if isinstance(document, list):
        return [_without_timings(v) for v in document]
    return document


def _start_cli(args: list[str], scope: str, kubeconfig: Path) -> subprocess.Popen:
    """A command in a process of its own, for a test that kills it."""
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli.app", *args], cwd=REPO, text=True,
                            env={**os.environ, "EPG_SCOPE": scope, "KUBECONFIG": str(kubeconfig)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_a_run_on_kubernetes_gives_the_same_feedback_as_on_docker(tmp_path, fake_cluster, scope):
    _, kubeconfig = fake_cluster
    (tmp_path / "seed.key").write_text(secrets.token_hex(32))
    results = {}
    for backend in ("docker", "kubernetes"):
        run_dir = tmp_path / backend
        result = run_cli("run", str(_spec(tmp_path / f"{backend}.yaml", backend)), "-o", str(run_dir), "--json", scope=scope,
                         env={"KUBECONFIG": str(kubeconfig)})
        assert result.exit_code == 0, result.stderr
        manifest = json.loads(result.stdout)
        feedback = _without_timings(json.loads((run_dir / "submissions" / "s0001" / "record.json").read_text())["feedback"])
        assessment = json.loads((run_dir / "assessment.json").read_text())
        results[backend] = (feedback, assessment["score"], [e["reward"] for e in assessment["episodes"]], manifest["terminal_reason"])
    assert results["kubernetes"] == results["docker"]
    assert results["docker"][3] == "finish_called" and len(results["docker"][0]["episodes"]) == 2


def test_a_killed_run_leaves_no_labelled_object_after_gc(tmp_path, fake_cluster, engine, scope):
    api, kubeconfig = fake_cluster
    (tmp_path / "seed.key").write_text(secrets.token_hex(32))
    spec = _spec(tmp_path / "spec.yaml", "kubernetes")
    process = _start_cli(["run", str(spec), "-o", str(tmp_path / "run")], scope, kubeconfig)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(o["metadata"]["name"].startswith("epg-ep-") for o in api.store.all_objects()):
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    labelled = [o for o in api.store.all_objects() if o["metadata"]["labels"].get(SCOPE) == scope]
    assert {o["kind"] for o in labelled} == {"Pod", "NetworkPolicy", "Lease"}, "the killed Run left its objects"

    def gc(backend: str, *options: str) -> dict:
        done = run_cli("gc", "--backend", backend, "--namespace", NAMESPACE, "--json", *options, scope=scope,
                       env={"KUBECONFIG": str(kubeconfig)}, timeout=120)
        assert done.exit_code == 0, done.stderr
        return done.json()

    # Its heartbeat is still fresh: for all gc knows, the Run lives on another machine.
    assert gc("kubernetes")["pods"] == 0
    assert len([o for o in api.store.all_objects() if o["metadata"]["labels"].get(SCOPE) == scope]) == len(labelled)
    stale = micro_time(datetime.now(timezone.utc) - timedelta(minutes=5))  # five minutes later, nobody having renewed it
    for lease in (o for o in labelled if o["kind"] == "Lease"):
        api.store.update("Lease", NAMESPACE, lease["metadata"]["name"], lambda obj: obj["spec"].update(renewTime=stale))
    assert gc("kubernetes")["pods"] >= 1
    gc("docker", "--scope", scope)  # the Run's local agent container (by this test run's label: never another test's)
    assert [o for o in api.store.all_objects() if o["metadata"]["labels"].get(SCOPE) == scope] == []
    assert engine.client.containers.list(all=True, filters={"label": selector(scope=scope)}, sparse=True) == []
    workspace_fs.release(tmp_path / "run" / "workspace")  # the mount SIGKILL leaves for `run --resume`


def test_evaluate_with_backend_kubernetes_runs_on_the_cluster(tmp_path, fake_cluster, scope):
    api, kubeconfig = fake_cluster
    first = len(api.store.events)
    result = run_cli("evaluate", str(REPO / "environments" / "cartpole" / "baseline"), "--benchmark", "cartpole", "-n", "2", "--seed", "4",
                     "--backend", "kubernetes", "--namespace", NAMESPACE, "--concurrency", "2", "--pool-size", "2", "--json",
                     scope=scope, env={"KUBECONFIG": str(kubeconfig)}, timeout=300)
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert [e["status"] for e in document["episodes"]] == ["completed", "completed"]
    pods = {obj["metadata"]["name"] for _, kind, kind_type, obj in api.store.events[first:] if kind == "Pod" and kind_type == "ADDED"}
    assert sum(name.startswith("epg-ep-") for name in pods) >= 2 and sum(name.startswith("epg-ctl-") for name in pods) == 1
    assert document["images"]["environment"]["id"].startswith("sha256:")  # as the cluster reported it


# The hostile cases -------------------------------------------------------------------------------------------------------

FLOODING = """
import os

def make_policy(context):
    chunk = b"x" * 65536
    for _ in range(1600):  # 100 MiB on each descriptor, past the container's 64 MiB of ephemeral storage
        for fd in (1, 2):
            try:
                os.write(fd, chunk)
            except OSError:
                pass
    print("flooded")
    class Policy:
        def act(self, observation):
            return 0
    return Policy()
"""

SLOW = """
import time

def make_policy(context):
    class Policy:
        def act(self, observation):
            time.sleep(0.3)
            return 0
    return Policy()
"""


def _sandbox_pods(api, sandbox_id: str, prefix: str) -> list[str]:
    return [name for name, _, command in api.kubelet.execs if name.startswith(f"{prefix}{sandbox_id}") and UNPACK in command]


def test_a_policy_flooding_its_output_cannot_get_its_pod_evicted(k8s_sandbox, write_program, fake_cluster):
    api, _ = fake_cluster
    with k8s_sandbox() as sandbox:
        (episode,) = evaluate_program(sandbox, capture_program(write_program(FLOODING)), split="train", seed=7, episodes=1).feedback.episodes
        sandbox_id = sandbox.labels.sandbox
    assert [name for name, _ in api.kubelet.evictions if sandbox_id in name] == []
    assert episode.status is EpisodeStatus.COMPLETED and "flooded" in episode.output_tail


def test_a_cluster_that_does_not_enforce_network_policy_is_refused_at_start(k8s_sandbox, fake_cluster, scope):
    api, _ = fake_cluster
    api.kubelet.network_policy_enforced = False  # a CNI that ignores NetworkPolicy: Pods reach the API server
    try:
        with pytest.raises(NetworkPolicyNotEnforced, match="does not enforce NetworkPolicy") as refused:
            with k8s_sandbox():
                pass
    finally:
        api.kubelet.network_policy_enforced = True
    assert f"reached: 127.0.0.1:{api.url.rsplit(':', 1)[1]}" in refused.value.message
    assert [o for o in api.store.all_objects() if o["metadata"]["labels"].get(SCOPE) == scope] == []
    with k8s_sandbox():  # the same cluster, enforcing: the probe passes
        pass


def test_the_reaper_leaves_a_same_named_hosts_live_pods_alone_and_reaps_a_stale_owners(fake_cluster, scope):
    api, kubeconfig = fake_cluster
    cluster = Cluster.connect(ClusterTarget(kubeconfig=str(kubeconfig), namespace=NAMESPACE))
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid of this host that no longer runs: all the old reaper looked at
    host = label_value(socket.gethostname())[:30]
    owners = {"twin": f"{host}_{dead.pid}_{secrets.token_hex(6)}", "stale": f"{host}_{dead.pid}_{secrets.token_hex(6)}",
              "legacy": f"{host}_{dead.pid}"}
    now = datetime.now(timezone.utc)
    renewed = {"twin": now - timedelta(seconds=5), "stale": now - timedelta(minutes=10)}
    for role, owner in owners.items():
        labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner, scope=scope)
        # Pods of another machine: the API server holds them, no kubelet here runs them.
        api.store.add("Pod", {"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running"},
                              "metadata": {"name": f"epg-ep-{labels.sandbox}-000001", "namespace": NAMESPACE,
                                           "labels": labels.for_role("episode")}})
        if role in renewed:
            cluster.create(heartbeat_lease(name=f"epg-hb-{labels.sandbox}", labels=labels.for_role("heartbeat"), namespace=NAMESPACE,
                                           holder=owner, duration_s=30, renew_time=micro_time(renewed[role])))
    try:
        report = reap_cluster_orphans(cluster)
        left = {o["metadata"]["labels"][OWNER] for o in api.store.all_objects() if o["metadata"]["labels"].get(SCOPE) == scope}
        assert left == {owners["twin"], owners["legacy"]}
        assert (report.pods, report.leases, report.errors) == (1, 1, [])
    finally:
        cluster.reap(label_selector(scope=scope))


@pytest.fixture(scope="module")
def loopback_registry(tmp_path_factory) -> Iterator[str]:
    """Debian's docker-registry on 127.0.0.1:PORT, installed when it is missing."""
    with serving_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


def test_pods_name_registry_images_by_the_digest_the_registry_resolved(fake_cluster, loopback_registry, engine, images, builder,
                                                                       write_program, scope):
    api, kubeconfig = fake_cluster
    package, _, entry = resolve_benchmark("CartPole-v1", builder.packages())
    local = {"environment": images[package.image], "policy_runtime": images["policy-runtime"]}
    registries.push(engine.client, loopback_registry, [(name, tag) for name, tag in local.items()], lambda message: None)
    expected = {name: registry_resolver()(f"{loopback_registry}/{tag}") for name, tag in local.items()}
    assert all(reference.startswith(f"{loopback_registry}/epg/") and "@sha256:" in reference for reference in expected.values())
    cluster = Cluster.connect(ClusterTarget(kubeconfig=str(kubeconfig), namespace=NAMESPACE))
    pod_images = SandboxImages(environment=f"{loopback_registry}/{local['environment']}",
                           policy_runtime=f"{loopback_registry}/{local['policy_runtime']}", benchmark_entry=entry)
    first = len(api.store.events)
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)
    with KubernetesSandbox(cluster, pod_images, labels=labels, tuning=SandboxTuning(concurrency=1, pool_size=1),
                           settings=ClusterSettings(namespace=NAMESPACE)) as sandbox:
        (episode,) = evaluate_program(sandbox, capture_program(write_program(SLOW)), split="train", seed=7, episodes=1).feedback.episodes
    assert episode.status is EpisodeStatus.COMPLETED
    pods = [obj for _, kind, kind_type, obj in api.store.events[first:] if kind == "Pod" and kind_type == "ADDED"]
    named = {(c["name"], c["image"]) for pod in pods for c in pod["spec"]["containers"]}
    assert {"runner", "policy", "probe"} <= {name for name, _ in named}
    assert {image for _, image in named} == set(expected.values())  # every Pod, every container: by digest, never the tag
