"""Per-Benchmark time limits: a Benchmark that describes its own step and Episode seconds gets them as the deadlines of
its Episodes, unless the spec (or the evaluate command line) chose a deadline itself."""

from __future__ import annotations

import shutil
import tempfile
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from epg.v1 import runner_pb2, runner_pb2_grpc
from epg_sdk.protocol import values
from epg_sdk.runtime.episode_loop import EpisodeLimits
from orchestrator.backends.lanes import runner_channel
from orchestrator.backends.pool import Slot
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxLimits, benchmark_limits
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeJob, PlannedEpisode
from orchestrator.kernel.program import Program, ProgramFile, program_digest
from orchestrator.run.driver import sandbox_limits
from orchestrator.run.spec import RunSpec

INFO = dict(id="X-v0", description="", observation_space={}, action_space={}, horizon=5, primary_metric="r", direction="maximize",
            parameters={}, failure_return=0.0)


def test_the_benchmarks_limits_replace_the_default_deadlines():
    limits = benchmark_limits(SandboxLimits(), BenchmarkInfo(**INFO, step_seconds=0.05, episode_seconds=12.0))
    assert (limits.step_deadline_s, limits.episode_deadline_s) == (0.05, 12.0)
    assert limits.startup_deadline_s == EpisodeLimits().startup_deadline_s


def test_a_benchmark_without_limits_keeps_the_hosts_defaults():
    assert benchmark_limits(SandboxLimits(), BenchmarkInfo(**INFO)) == EpisodeLimits()
    assert benchmark_limits(SandboxLimits(), None) == EpisodeLimits()


def test_a_deadline_the_spec_sets_wins_over_the_benchmarks_and_only_that_one():
    spec = RunSpec.model_validate({"benchmark": "X-v0", "agent": {"kind": "hill-climb"}, "limits": {"step_deadline_s": 2.0}})
    limits = benchmark_limits(sandbox_limits(spec), BenchmarkInfo(**INFO, step_seconds=0.05, episode_seconds=12.0))
    assert (limits.step_deadline_s, limits.episode_deadline_s) == (2.0, 12.0)
    default_spec = RunSpec.model_validate({"benchmark": "X-v0", "agent": {"kind": "hill-climb"}})
    assert sandbox_limits(default_spec).chosen_deadlines == frozenset()


class _Runner(runner_pb2_grpc.EnvironmentRunnerServicer):
    def __init__(self) -> None:
        self.limits: list[runner_pb2.EpisodeLimits] = []

    def Describe(self, request, context):
        return runner_pb2.BenchmarkDescription(id="X-v0", primary_metric="r", horizon=5, observation_space=values.encode(None),
                                               action_space=values.encode(None), parameters=values.encode({}),
                                               step_seconds=0.25, episode_seconds=40.0)

    def RunEpisode(self, request, context):
        self.limits.append(request.limits)
        return runner_pb2.EpisodeRecord(episode=request.episode, outcome=runner_pb2.RUNNER_OUTCOME_COMPLETED, steps=1)


class _Pool:
    """The container pool's part run_episodes uses, with one slot per Episode (no container)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def begin_batch(self, size):
        pass

    def end_batch(self):
        pass

    def take(self, lane):
        directory = Path(tempfile.mkdtemp(dir=self.root))
        return Slot(lane=lane, name=directory.name, io_dir=directory, program_dir=directory)

    def discard(self, slot):
        pass


@pytest.mark.parametrize(("chosen", "expected"), [(frozenset(), (0.25, 40.0)), (frozenset({"episode_deadline_s"}), (0.25, 300.0))])
def test_the_docker_sandbox_sends_the_benchmarks_deadlines_with_each_episode(tmp_path, chosen, expected):
    runner = _Runner()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    runner_pb2_grpc.add_EnvironmentRunnerServicer_to_server(runner, server)
    socket = Path(tempfile.mkdtemp(prefix="epg-tl-")) / "runner.sock"  # short: a Unix socket's path, removed below
    server.add_insecure_port(f"unix:{socket}")
    server.start()
    limits = SandboxLimits(chosen_deadlines=chosen)
    sandbox = DockerSandbox(engine=None, images=SandboxImages(environment="e", policy_runtime="p", benchmark_entry="x"), limits=limits,
                            workdir=tmp_path)
    try:
        for lane in sandbox._lanes:
            lane.channel = runner_channel(f"unix:{socket}")
            lane.stub = runner_pb2_grpc.EnvironmentRunnerStub(lane.channel)
        sandbox._container_pool = _Pool(tmp_path)
        files = (ProgramFile(path="policy.py", data=b"def make_policy(c):\n    return None\n"),)
        program = Program(files=files, digest=program_digest(files))
        jobs = [EpisodeJob(episode=PlannedEpisode(split="train", index=i, payload=b"", policy_seed=i), program=program) for i in range(2)]
        outcomes = sandbox.run_episodes(jobs)
    finally:
        for lane in sandbox._lanes:
            if lane.channel is not None:
                lane.channel.close()
        server.stop(None)
        shutil.rmtree(socket.parent)
    assert [o.index for o in outcomes] == [0, 1]
    # With only the Episode deadline chosen, the step limit is still the Benchmark's.
    assert [(m.step_deadline_s, m.episode_deadline_s) for m in runner.limits] == [expected] * 2
