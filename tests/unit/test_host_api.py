"""The Host API end to end: the real gRPC server over a real RunHost, a deterministic fake sandbox, the real client and CLI.

No Docker: FakeSandbox stands in for the engine. Every Episode it runs is
recorded, so a test can tell that a refused request ran none.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import DecodeError
from support.other_uid import AGENT_UID, OTHER_UID, connect_as

from epg.v1 import host_api_pb2 as pb
from epg.v1 import host_api_pb2_grpc as pb_grpc
from epg_sdk.codes import EpisodeStatus, FailureCode
from orchestrator.hostapi import errors as hostapi_errors
from orchestrator.hostapi.errors import GRPC_STATUS, PROTO_CODES
from orchestrator.hostapi.server import MAX_CONCURRENT_RPCS, MAX_REQUEST_BYTES, TRANSPORT_MAX_RECEIVE_BYTES, serve
from orchestrator.hostclient import client as session_client
from orchestrator.hostclient.client import HostApiError, SessionClient
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EvaluationFeedback, PlannedEpisode
from orchestrator.kernel.program import Program, capture_program
from orchestrator.kernel.rejections import RejectionCode
from orchestrator.kernel.session import Budget, FinishPolicy, SessionState
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.driver import FEEDBACK_WAIT_S, settle_timeout_s
from orchestrator.run.host import RunHost

REPO = Path(__file__).resolve().parents[2]
TOKEN = "tok-" + "7f" * 16
WRONG_TOKEN = "tok-" + "00" * 16
INSTRUCTIONS = "# Task\n\nImprove workspace/program so the pole stays up.\n"
POOL_SIZE = 16
CALL_TIMEOUT_S = 10.0

POLICY = '''\
class Policy:
    def act(self, observation):
        return 0


def make_policy(context):
    return Policy()
'''

BENCHMARK = BenchmarkInfo(
    id="fake/balance-v0",
    description="A fake Benchmark for Host API tests.",
    observation_space={"type": "box", "shape": [4], "low": -1.0, "high": 1.0},
    action_space={"type": "discrete", "n": 2},
    horizon=50,
    primary_metric="mean_return",
    direction="maximize",
    parameters={"gravity": 9.8, "modes": ["a", "b"]},
    failure_return=-1.0,
    readme="private notes",
)


# The fake sandbox -------------------------------------------------------------
def expected_reward(digest: str, index: int) -> float:
    """The FakeSandbox's reward for one Episode: a function of the Program digest and the pool index only."""
    return int(hashlib.sha256(f"{digest}|{index}".encode()).hexdigest()[:8], 16) / 2**32


def expected_score(digest: str, indices: list[int]) -> float:
    rewards = [expected_reward(digest, i) for i in indices]
    return sum(rewards) / len(rewards)


class FakeSandbox:
    """A deterministic EpisodeSandbox.

    reward = expected_reward(program digest, Episode index); score = mean reward.
    Every run_episode call is recorded in `calls` as (index, digest).
    fail_on_calls: 1-based numbers of run_episode calls that raise InfrastructureError.
    policy_failures: pool indices whose Episodes end as a policy failure (reward = failure_return).
    crash_with: an exception (not InfrastructureError) the next run_episode call raises, once.
    block_first: the first run_episode call sets `entered` and waits on `release`; cancel() (the pool's
    cancel_batch in a Run) ends that wait with an InfrastructureError, as the pool's next take would,
    unless honour_cancel is False (an evaluation stuck beyond the Host's reach).
    """

    def __init__(self, *, fail_on_calls: set[int] | None = None, block_first: bool = False,
                 policy_failures: set[int] | None = None, crash_with: Exception | None = None,
                 honour_cancel: bool = True) -> None:
        self.calls: list[tuple[int, str]] = []
        self.fail_on_calls = set(fail_on_calls or ())
        self.policy_failures = set(policy_failures or ())
        self.crash_with = crash_with
        self.block_first = block_first
        self.entered = threading.Event()
        self.release = threading.Event()
        self.honour_cancel = honour_cancel
        self.cancel_calls = 0
        self._cancelled = threading.Event()
        self._lock = threading.Lock()

    def cancel(self) -> None:
        self.cancel_calls += 1
        if self.honour_cancel:
            self._cancelled.set()

    def describe(self) -> BenchmarkInfo:
        return BENCHMARK

    def plan(self, split: str, seed: int, count: int) -> list[PlannedEpisode]:
        return [
            PlannedEpisode(split=split, index=i, payload=f"{split}:{seed}:{i}".encode(), policy_seed=seed * 100_003 + i)
            for i in range(count)
        ]

    def run_episodes(self, jobs, on_episode=None) -> list[EpisodeOutcome]:
        outcomes = []
        for job in jobs:
            outcomes.append(self.run_episode(job.episode, job.program))
            if on_episode is not None:
                on_episode(outcomes[-1])
        return outcomes

    def run_episode(self, episode: PlannedEpisode, program: Program) -> EpisodeOutcome:
        with self._lock:
            self.calls.append((episode.index, program.digest))
            number = len(self.calls)
        if self.crash_with is not None:
            crash, self.crash_with = self.crash_with, None
            raise crash
        if number in self.fail_on_calls:
            raise InfrastructureError(InfraErrorCode.ENGINE_UNAVAILABLE, "the container engine went away",
                                      evidence="SECRET-EVIDENCE: docker.sock refused the connection")
        if self.block_first and number == 1:
            self.entered.set()
            deadline = time.monotonic() + CALL_TIMEOUT_S
            while not self.release.wait(0.01):
                if self._cancelled.is_set():
                    raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, "the batch was cancelled")
                if time.monotonic() > deadline:
                    raise AssertionError("the test never released the blocked Episode")
        if episode.index in self.policy_failures:
            return EpisodeOutcome(
                index=episode.index, split=episode.split, status=EpisodeStatus.POLICY_FAILURE,
                failure=FailureCode.EXCEPTION, reason="ZeroDivisionError: division by zero", steps=1,
                reward=BENCHMARK.failure_return, terminated=False, truncated=False,
                policy_seconds=0.001, environment_seconds=0.001,
            )
        return EpisodeOutcome(
            index=episode.index,
            split=episode.split,
            status=EpisodeStatus.COMPLETED,
            failure=None,
            reason="",
            steps=7,
            reward=expected_reward(program.digest, episode.index),
            terminated=True,
            truncated=False,
            policy_seconds=0.001,
            environment_seconds=0.002,
        )

    def feedback(self, outcomes: list[EpisodeOutcome]) -> EvaluationFeedback:
        score = sum(o.reward for o in outcomes) / len(outcomes)
        return EvaluationFeedback(score=score, values={"mean_reward": score, "episodes": len(outcomes)},
                                  artifacts={}, episodes=tuple(outcomes))


# The served Run ---------------------------------------------------------------
def budget(**overrides: Any) -> Budget:
    values: dict[str, Any] = {
        "episodes": 10, "max_submissions": 3, "pool_size": POOL_SIZE,
        "max_episodes_per_submission": 6, "max_candidates": 2,
    }
    values.update(overrides)
    return Budget(**values)


@dataclass
class Served:
    budget: Budget
    records: RunDirectory
    sandbox: FakeSandbox
    host: RunHost
    socket_path: Path
    client: SessionClient

    @property
    def program_dir(self) -> Path:
        return self.records.workspace / "program"

    def digest(self) -> str:
        return capture_program(self.program_dir).digest

    def events(self) -> list[dict[str, Any]]:
        return list(self.records.events())

    def event_types(self) -> list[str]:
        return [e["type"] for e in self.events()]

    def new_client(self, token: str | None = TOKEN) -> SessionClient:
        return SessionClient(socket_path=str(self.socket_path), token=token, timeout_s=CALL_TIMEOUT_S)

    def assert_log_replays_to_live_state(self) -> None:
        """The event log rebuilds exactly the state the Host holds (what a resume would see)."""
        assert SessionState.replay(self.budget, self.events()).status() == self.host.status()

    def snapshot(self) -> dict[str, Any]:
        """Everything a refused request must leave alone: status, Episodes run, events, the run directory's files."""
        files = sorted(
            (str(p.relative_to(self.records.root)), p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in self.records.root.rglob("*")
        )
        return {
            "status": self.client.status(),
            "episodes_run": len(self.sandbox.calls),
            "events": self.events(),
            "files": files,
        }


@pytest.fixture
def serve_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Served]]:
    """Return a function that builds a Run (RunDirectory, RunHost, SessionState, pool) and serves it on a Unix socket."""
    monkeypatch.delenv("EPG_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("EPG_HOST_API", raising=False)
    servers: list[grpc.Server] = []
    clients: list[SessionClient] = []
    socket_dirs: list[str] = []

    def start(b: Budget | None = None, sandbox: FakeSandbox | None = None,
              notify: Callable[[str, dict[str, Any]], None] = lambda kind, fields: None) -> Served:
        b = b or budget()
        sandbox = sandbox or FakeSandbox()
        records = RunDirectory(tmp_path / f"run{len(servers)}")
        records.create("benchmark: fake/balance-v0\n")
        (records.workspace / "program" / "policy.py").write_text(POLICY)
        host = RunHost(
            records=records,
            sandbox=sandbox,
            benchmark=sandbox.describe(),
            state=SessionState(b),
            episode_pool=sandbox.plan("train", 11, b.pool_size),
            instructions=INSTRUCTIONS,
            notify=notify,
        )
        socket_dirs.append(tempfile.mkdtemp(prefix="epg-", dir="/tmp"))
        socket_path = Path(socket_dirs[-1]) / "api.sock"
        servers.append(serve(host, TOKEN, socket_path))
        client = SessionClient(socket_path=str(socket_path), token=TOKEN, timeout_s=CALL_TIMEOUT_S)
        clients.append(client)
        return Served(budget=b, records=records, sandbox=sandbox, host=host, socket_path=socket_path, client=client)

    yield start
    for client in clients:
        client.close()
    for server in servers:
        server.stop(grace=None).wait(5)
    for directory in socket_dirs:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def run(serve_run: Callable[..., Served]) -> Served:
    return serve_run()


def refused(call: Callable[[], Any]) -> HostApiError:
    with pytest.raises(HostApiError) as caught:
        call()
    return caught.value


def raw_call(served: Served, method: str, request: Any, metadata: tuple = ()) -> grpc.RpcError:
    """Call the Host API without SessionClient (e.g. with no authorization header at all); return the RpcError."""
    with grpc.insecure_channel(f"unix:{served.socket_path}") as channel:
        stub = pb_grpc.HostApiStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            getattr(stub, method)(request, metadata=metadata, timeout=CALL_TIMEOUT_S)
    return caught.value


def trailing_code(error: grpc.RpcError) -> str | None:
    return dict(error.trailing_metadata() or ()).get(hostapi_errors.ERROR_METADATA_KEY)


# Authentication ---------------------------------------------------------------
RAW_REQUESTS = {
    "GetTask": pb.TaskRequest(),
    "GetStatus": pb.StatusRequest(),
    "Submit": pb.SubmitRequest(episodes="2:4"),
    "Finish": pb.FinishRequest(candidates=["s0001"]),
}


def client_calls(client: SessionClient) -> dict[str, Callable[[], Any]]:
    return {
        "task": client.task,
        "status": client.status,
        "submit": lambda: client.submit("2:4"),
        "finish": lambda: client.finish(["s0001"]),
    }


def test_missing_or_wrong_token_is_refused_on_every_method_and_changes_nothing(run: Served):
    run.client.submit("0:2")  # s0001 completed: an authenticated finish would now succeed
    before = run.snapshot()

    for token in ("", WRONG_TOKEN, TOKEN + "x", TOKEN[:-1]):
        client = run.new_client(token)
        try:
            for name, call in client_calls(client).items():
                error = refused(call)
                assert error.code == "unauthenticated", (token, name, error)
        finally:
            client.close()

    for method, request in RAW_REQUESTS.items():
        for metadata in ((), (("authorization", TOKEN),), (("authorization", f"bearer {TOKEN}"),)):
            error = raw_call(run, method, request, metadata)
            assert error.code() is grpc.StatusCode.UNAUTHENTICATED, (method, metadata)
            assert trailing_code(error) == "unauthenticated", (method, metadata)

    assert run.snapshot() == before
    assert run.client.status()["finished"] is False


# Task -------------------------------------------------------------------------
def test_task_returns_the_instructions_benchmark_id_and_public_spec(run: Served):
    task = run.client.task()

    assert task["instructions"] == INSTRUCTIONS
    assert task["benchmark_id"] == "fake/balance-v0"
    assert task["public_spec"] == BENCHMARK.public_json()
    assert "readme" not in task["public_spec"]
    assert run.sandbox.calls == []


# Submit -----------------------------------------------------------------------
def test_submit_returns_a_receipt_and_records_the_submission(run: Served):
    digest = run.digest()

    receipt = run.client.submit("0:3,5")

    score = expected_score(digest, [0, 1, 2, 5])
    assert receipt == {
        "submission_id": "s0001",
        "program_digest": digest,
        "score": score,
        "episodes_used": 4,
        "episodes_left": 6,
        "submissions_left": 2,
        "policy_failures": 0,
        "feedback_path": "feedback/s0001/feedback.json",
    }
    assert run.sandbox.calls == [(i, digest) for i in (0, 1, 2, 5)]

    published = json.loads((run.records.workspace / receipt["feedback_path"]).read_text())
    assert published["score"] == score
    assert published["program_digest"] == digest
    assert [e["index"] for e in published["episodes"]] == [0, 1, 2, 5]

    record = json.loads((run.records.submission("s0001") / "record.json").read_text())
    assert record["program_digest"] == digest
    assert record["indices"] == [0, 1, 2, 5]
    assert record["feedback"]["score"] == score
    assert (run.records.root / "programs" / digest.removeprefix("sha256:") / "policy.py").read_text() == POLICY

    events = run.events()
    assert [e["type"] for e in events] == ["submission_admitted", "submission_completed"]
    assert events[0]["id"] == events[1]["id"] == "s0001"
    assert events[0]["program_digest"] == digest
    assert events[0]["indices"] == [0, 1, 2, 5]
    assert events[1]["score"] == score


def test_a_second_submission_of_another_program_is_scored_on_its_own_digest(run: Served):
    run.client.submit("0:2")
    (run.program_dir / "helper.py").write_text("GAIN = 2\n")
    digest = run.digest()

    receipt = run.client.submit("2:5")

    assert receipt["submission_id"] == "s0002"
    assert receipt["program_digest"] == digest
    assert receipt["score"] == expected_score(digest, [2, 3, 4])
    assert (receipt["episodes_used"], receipt["episodes_left"], receipt["submissions_left"]) == (5, 5, 1)


def test_the_receipt_counts_policy_failures_and_the_feedback_shows_them(serve_run: Callable[..., Served]):
    run = serve_run(sandbox=FakeSandbox(policy_failures={1, 3}))
    digest = run.digest()

    receipt = run.client.submit("0:4")

    rewards = [expected_reward(digest, 0), BENCHMARK.failure_return, expected_reward(digest, 2), BENCHMARK.failure_return]
    assert receipt["policy_failures"] == 2
    assert receipt["score"] == sum(rewards) / 4
    published = json.loads((run.records.workspace / receipt["feedback_path"]).read_text())
    assert [e["failure"] for e in published["episodes"]] == [None, "exception", None, "exception"]
    assert run.client.status()["submissions"][0]["policy_failures"] == 2
    run.assert_log_replays_to_live_state()


# Rejections -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setup", "selector", "code"),
    [
        pytest.param([], "abc", "invalid_selector", id="malformed"),
        pytest.param([], "", "invalid_selector", id="empty"),
        pytest.param([], "3:1", "invalid_selector", id="empty-range"),
        pytest.param([], "0:3,2", "invalid_selector", id="overlapping"),
        pytest.param([], "-1", "invalid_selector", id="negative"),
        pytest.param([], "0," * 9000, "invalid_selector", id="longer-than-selector-limit"),
        pytest.param([], str(POOL_SIZE), "index_out_of_range", id="index-equals-pool-size"),
        pytest.param([], f"10:{POOL_SIZE + 1}", "index_out_of_range", id="range-past-pool"),
        pytest.param(["0:6"], "6:11", "budget_exhausted", id="more-than-left"),
        pytest.param([], "0:7", "too_many_episodes", id="more-than-per-submission"),
        pytest.param(["0", "1", "2"], "3", "submissions_exhausted", id="submissions-used-up"),
    ],
)
def test_a_refused_submit_returns_its_code_and_changes_nothing(run: Served, setup: list[str], selector: str, code: str):
    for earlier in setup:
        run.client.submit(earlier)
    before = run.snapshot()

    assert refused(lambda: run.client.submit(selector)).code == code

    assert run.snapshot() == before


def symlink_in_program(program: Path) -> None:
    (program.parent / "outside.txt").write_text("secret\n")
    (program / "data.txt").symlink_to(program.parent / "outside.txt")


@pytest.mark.parametrize(
    "break_program",
    [
        pytest.param(lambda program: (program / "policy.py").unlink(), id="no-policy.py"),
        pytest.param(symlink_in_program, id="symlink"),
        pytest.param(lambda program: shutil.rmtree(program), id="no-program-directory"),
    ],
)
def test_an_invalid_program_is_refused_and_nothing_is_spent(run: Served, break_program: Callable[[Path], None]):
    run.client.submit("0")
    break_program(run.program_dir)
    before = run.snapshot()

    error = refused(lambda: run.client.submit("1:3"))

    assert error.code == "invalid_program"
    assert run.snapshot() == before
    assert before["status"]["episodes_used"] == 1 and before["status"]["submissions_used"] == 1


@pytest.mark.parametrize(
    ("setup", "candidates", "code"),
    [
        pytest.param(["0"], ["s0099"], "unknown_submission", id="unknown"),
        pytest.param(["0"], ["s0001", "s0002"], "unknown_submission", id="one-unknown"),
        pytest.param(["0"], ["s0001", "s0001"], "duplicate_candidate", id="duplicate"),
        pytest.param(["0", "1", "2"], ["s0001", "s0002", "s0003"], "too_many_candidates", id="more-than-max-candidates"),
        pytest.param(["0"], ["s0001"] * 65, "too_many_candidates", id="more-than-listed-limit"),
        pytest.param(["0"], [], "no_candidates", id="none"),
    ],
)
def test_a_refused_finish_returns_its_code_and_changes_nothing(run: Served, setup: list[str], candidates: list[str], code: str):
    for earlier in setup:
        run.client.submit(earlier)
    before = run.snapshot()

    assert refused(lambda: run.client.finish(candidates)).code == code

    assert run.snapshot() == before
    assert run.client.status()["finished"] is False


def test_finish_twice_and_submit_after_finish_are_refused_as_already_finished(run: Served):
    run.client.submit("0:2")
    run.client.submit("2:4")
    assert run.client.finish(["s0002", "s0001"]) == {"candidates": ["s0002", "s0001"]}
    assert run.event_types()[-1] == "finished"
    before = run.snapshot()
    assert before["status"]["finished"] is True
    assert before["status"]["candidates"] == ["s0002", "s0001"]

    assert refused(lambda: run.client.finish(["s0001"])).code == "already_finished"
    assert refused(lambda: run.client.submit("4:6")).code == "already_finished"

    assert run.snapshot() == before


def test_finish_under_require_exhaustion_is_refused_while_budget_is_left(serve_run: Callable[..., Served]):
    run = serve_run(budget(finish_policy=FinishPolicy.REQUIRE_EXHAUSTION))
    run.client.submit("0:2")
    before = run.snapshot()

    assert refused(lambda: run.client.finish(["s0001"])).code == "finish_not_allowed"

    assert run.snapshot() == before
    run.client.submit("2:8")
    run.client.submit("8:10")  # 10 Episodes and 3 Submissions spent: nothing more can be paid for
    assert run.client.finish(["s0001"]) == {"candidates": ["s0001"]}


# Infrastructure errors ----------------------------------------------------------
def test_an_infrastructure_error_voids_the_submission_and_refunds_it(serve_run: Callable[..., Served]):
    run = serve_run(sandbox=FakeSandbox(fail_on_calls={2}))
    before = run.client.status()

    error = refused(lambda: run.client.submit("0:3"))

    assert error.code == "internal"
    assert "SECRET-EVIDENCE" not in error.message
    status = run.client.status()
    assert status["episodes_left"] == before["episodes_left"] == 10
    assert status["episodes_used"] == 0
    assert status["submissions_left"] == before["submissions_left"] == 3
    assert [(s["id"], s["state"], s["has_score"], s["feedback_path"]) for s in status["submissions"]] == [
        ("s0001", "voided", False, "")
    ]
    assert run.event_types() == ["submission_admitted", "submission_voided"]
    assert run.events()[1]["id"] == "s0001"
    diagnostics = list((run.records.private / "diagnostics").iterdir())
    assert diagnostics, "a diagnostics file is written"
    assert "SECRET-EVIDENCE" in diagnostics[0].read_text()
    assert not (run.records.workspace / "feedback" / "s0001").exists()
    run.assert_log_replays_to_live_state()

    # The sandbox works again: the next Submission gets a fresh id and the whole Budget.
    receipt = run.client.submit("0:6")
    assert receipt["submission_id"] == "s0002"
    assert (receipt["episodes_used"], receipt["episodes_left"], receipt["submissions_left"]) == (6, 4, 2)
    assert receipt["score"] == expected_score(run.digest(), list(range(6)))


def test_an_unexpected_sandbox_exception_is_a_coded_refusal_and_does_not_wedge_the_run(serve_run: Callable[..., Served]):
    # A sandbox fault that is not an InfrastructureError (here an OSError, as DockerSandbox.run_episode can raise
    # from io_dir.mkdir or Program.write_to) must still end the call with a Host API error code and free the
    # Session: otherwise the Submission stays in flight and every later submit and finish is refused as busy.
    run = serve_run(sandbox=FakeSandbox(crash_with=OSError(28, "No space left on device")))

    error = refused(lambda: run.client.submit("0:2"))
    try:
        later: Any = run.client.submit("2:4")
    except HostApiError as exc:
        later = exc

    assert error.code in {e.value for e in RejectionCode} and not isinstance(later, HostApiError), (error, later)
    assert later["submission_id"] == "s0002"
    assert run.client.status()["episodes_used"] == 2


# Concurrency ------------------------------------------------------------------
def test_a_second_submit_while_one_is_evaluated_is_refused_as_busy(serve_run: Callable[..., Served]):
    run = serve_run(sandbox=FakeSandbox(block_first=True))
    first: dict[str, Any] = {}
    second: dict[str, Any] = {}

    def submit_into(target: dict[str, Any], selector: str) -> None:
        client = run.new_client()
        try:
            target["receipt"] = client.submit(selector)
        except HostApiError as exc:
            target["error"] = exc
        finally:
            client.close()

    first_thread = threading.Thread(target=submit_into, args=(first, "0:3"))
    first_thread.start()
    try:
        assert run.sandbox.entered.wait(CALL_TIMEOUT_S), "the first Submission reached the sandbox"
        second_thread = threading.Thread(target=submit_into, args=(second, "5:7"))
        second_thread.start()
        second_thread.join(CALL_TIMEOUT_S)
        assert not second_thread.is_alive()
        assert refused(lambda: run.client.finish(["s0001"])).code == "busy"
        running = run.client.status()
    finally:
        run.sandbox.release.set()
        first_thread.join(CALL_TIMEOUT_S)

    assert "receipt" not in second, second
    assert second["error"].code == "busy"
    assert [(s["id"], s["state"], s["has_score"]) for s in running["submissions"]] == [("s0001", "running", False)]
    assert running["episodes_used"] == 3

    assert "error" not in first, first
    assert first["receipt"]["submission_id"] == "s0001"
    status = run.client.status()
    assert [(s["id"], s["state"]) for s in status["submissions"]] == [("s0001", "completed")]
    assert (status["episodes_used"], status["submissions_used"]) == (3, 1)
    assert [index for index, _ in run.sandbox.calls] == [0, 1, 2]
    assert run.event_types() == ["submission_admitted", "submission_completed"]
    run.assert_log_replays_to_live_state()
    assert run.client.submit("5:7")["submission_id"] == "s0002"


def test_a_receipt_reports_the_budget_as_its_own_submission_left_it(serve_run: Callable[..., Served]):
    # Force the interleaving the servicer allows: s0001 completes (it is no longer in flight), and a second
    # Submission is admitted before Submit builds s0001's receipt from a fresh host.status().
    # The notify hook runs inside RunHost.submit after the Submission completed, before Submit reads the status.
    second: dict[str, Any] = {}
    threads: list[threading.Thread] = []

    def submit_second() -> None:
        client = run.new_client()
        try:
            second["receipt"] = client.submit("5:8")
        finally:
            client.close()

    def notify(kind: str, fields: dict[str, Any]) -> None:
        if kind == "submission_completed" and fields["id"] == "s0001":
            threads.append(threading.Thread(target=submit_second))
            threads[0].start()
            threads[0].join(CALL_TIMEOUT_S)  # s0002 is admitted, evaluated and completed

    run = serve_run(notify=notify)
    first = run.client.submit("0:2")
    for thread in threads:
        thread.join(CALL_TIMEOUT_S)

    assert second["receipt"]["submission_id"] == "s0002"
    assert (second["receipt"]["episodes_used"], second["receipt"]["submissions_left"]) == (5, 1)
    assert first["submission_id"] == "s0001"
    assert (first["episodes_used"], first["episodes_left"], first["submissions_left"]) == (2, 8, 2)


# The end of the agent phase --------------------------------------------------------
def submit_in_background(run: Served, selector: str) -> tuple[threading.Thread, dict[str, Any]]:
    """Submit selector from another thread and client; return the thread and where its receipt or error lands."""
    outcome: dict[str, Any] = {}

    def submit() -> None:
        client = run.new_client()
        try:
            outcome["receipt"] = client.submit(selector)
        except HostApiError as exc:
            outcome["error"] = exc
        finally:
            client.close()

    thread = threading.Thread(target=submit)
    thread.start()
    return thread, outcome


def close_in_background(run: Served, **options: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Call host.close(**options) from another thread; the result holds its return and the event types at that moment."""
    result: dict[str, Any] = {}

    def close() -> None:
        result["ended"] = run.host.close(**options)
        result["events"] = run.event_types()
        result["published"] = run.records.published_feedback("s0001").exists()

    thread = threading.Thread(target=close)
    thread.start()
    return thread, result


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def test_once_the_agent_phase_closes_submit_and_finish_are_refused_as_session_closed_and_change_nothing(run: Served):
    first = run.client.submit("0:2")["submission_id"]
    assert run.host.close(grace_s=0.0) is None  # nothing was in flight
    before = run.snapshot()

    submit = refused(lambda: run.client.submit("2:4"))
    finish = refused(lambda: run.client.finish([first]))
    raw = raw_call(run, "Submit", pb.SubmitRequest(episodes="2:4"), AUTHORIZED)

    assert (submit.code, finish.code, trailing_code(raw)) == ("session_closed", "session_closed", "session_closed")
    assert raw.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "agent phase is ending" in submit.message
    assert run.snapshot() == before
    assert run.client.status()["episodes_used"] == 2  # reading stays open


def test_close_waits_for_the_submission_in_flight_to_complete_and_logs_it_before_returning(serve_run: Callable[..., Served]):
    run = serve_run(sandbox=FakeSandbox(block_first=True))
    submitter, submitted = submit_in_background(run, "0:3")
    assert run.sandbox.entered.wait(CALL_TIMEOUT_S)
    closer, closed = close_in_background(run, grace_s=CALL_TIMEOUT_S, cancel=run.sandbox.cancel)
    try:
        wait_until(lambda: run.host.state.closed)
        late = refused(lambda: run.client.submit("5:7"))
        assert late.code == "session_closed"  # not busy: the door is shut whatever is in flight
        assert closer.is_alive(), "close returned while a Submission was still in flight"
    finally:
        run.sandbox.release.set()
        submitter.join(CALL_TIMEOUT_S)
        closer.join(CALL_TIMEOUT_S)

    assert closed["ended"] == "completed"
    assert closed["events"] == ["submission_admitted", "submission_completed"]
    assert closed["published"], "the Feedback was published before close returned"
    assert submitted["receipt"]["submission_id"] == "s0001"
    assert run.sandbox.cancel_calls == 0
    assert run.client.status()["episodes_used"] == 3
    run.assert_log_replays_to_live_state()


def test_a_submission_still_running_after_the_grace_is_cancelled_voided_and_refunded_before_close_returns(
        serve_run: Callable[..., Served]):
    run = serve_run(sandbox=FakeSandbox(block_first=True))
    submitter, submitted = submit_in_background(run, "0:3")
    assert run.sandbox.entered.wait(CALL_TIMEOUT_S)

    ended = run.host.close(grace_s=0.0, cancel=run.sandbox.cancel, cancel_wait_s=CALL_TIMEOUT_S)
    events = run.events()
    submitter.join(CALL_TIMEOUT_S)

    assert ended == "voided"
    assert [(e["type"], e.get("reason")) for e in events] == [("submission_admitted", None), ("submission_voided", "agent_phase_ended")]
    assert run.sandbox.cancel_calls >= 1
    assert submitted["error"].code == "session_closed" and "nothing was spent" in submitted["error"].message
    status = run.client.status()
    assert (status["episodes_used"], status["submissions_used"]) == (0, 0)
    assert [(s["id"], s["state"]) for s in status["submissions"]] == [("s0001", "voided")]
    assert not run.records.published_feedback("s0001").exists()
    assert run.event_types() == ["submission_admitted", "submission_voided"]  # nothing after close returned
    run.assert_log_replays_to_live_state()


def test_an_evaluation_that_ignores_the_cancel_is_voided_by_close_and_nothing_it_returns_later_is_written(
        serve_run: Callable[..., Served]):
    run = serve_run(sandbox=FakeSandbox(block_first=True, honour_cancel=False))
    submitter, submitted = submit_in_background(run, "0:3")
    assert run.sandbox.entered.wait(CALL_TIMEOUT_S)

    ended = run.host.close(grace_s=0.0, cancel=run.sandbox.cancel, cancel_wait_s=0.2)
    assert ended == "voided"
    assert run.event_types() == ["submission_admitted", "submission_voided"]
    run.sandbox.release.set()  # the stuck evaluation now returns its Feedback
    submitter.join(CALL_TIMEOUT_S)

    assert not submitter.is_alive()
    assert submitted["error"].code == "session_closed"
    assert run.event_types() == ["submission_admitted", "submission_voided"]
    assert not (run.records.submission("s0001") / "record.json").exists()
    assert not run.records.published_feedback("s0001").exists()
    assert run.client.status()["episodes_used"] == 0
    run.assert_log_replays_to_live_state()


def test_the_settle_timeout_is_the_submissions_episodes_lane_by_lane_at_their_longest_plus_its_feedback():
    from epg_sdk.runtime.episode_loop import EpisodeLimits

    limits = EpisodeLimits(startup_deadline_s=10.0, episode_deadline_s=20.0)
    one_episode = 10.0 * 2 + 20.0 + 60  # what the Host waits for one RunEpisode answer
    assert settle_timeout_s(limits, episodes=5, lanes=2) == 3 * one_episode + FEEDBACK_WAIT_S
    assert settle_timeout_s(limits, episodes=4, lanes=2) == 2 * one_episode + FEEDBACK_WAIT_S
    assert settle_timeout_s(limits, episodes=1, lanes=0) == one_episode + FEEDBACK_WAIT_S


# Who can reach the Host API at all ---------------------------------------------------
@pytest.fixture
def open_directory() -> Iterator[Path]:
    """A directory every uid may enter, so that only the socket file's own owner and mode decide who connects."""
    directory = Path(tempfile.mkdtemp(prefix="epg-", dir="/tmp"))
    os.chmod(directory, 0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def host_in(directory: Path) -> RunHost:
    """A RunHost over a fake sandbox, its run directory created at directory."""
    sandbox = FakeSandbox()
    records = RunDirectory(directory)
    records.create("benchmark: fake/balance-v0\n")
    return RunHost(records=records, sandbox=sandbox, benchmark=BENCHMARK, state=SessionState(budget()),
                   episode_pool=sandbox.plan("train", 11, POOL_SIZE), instructions=INSTRUCTIONS)


def test_only_the_agents_uid_and_root_can_connect_to_the_host_api_socket(open_directory: Path):
    if os.geteuid() != 0:
        pytest.fail("this test changes uid in a child and must run as root", pytrace=False)
    host = host_in(open_directory / "run")
    path = open_directory / "api.sock"
    server = serve(host, TOKEN, path, owner=(AGENT_UID, AGENT_UID))
    try:
        info = path.stat()
        assert (info.st_uid, info.st_mode & 0o777) == (AGENT_UID, 0o600)
        assert [p.name for p in open_directory.iterdir() if p.name != "run"] == ["api.sock"]  # its private directory is gone
        assert connect_as(OTHER_UID, path) == "refused: PermissionError"
        assert connect_as(AGENT_UID, path) == "connected"
        client = SessionClient(socket_path=str(path), token=TOKEN, timeout_s=CALL_TIMEOUT_S)  # as root
        try:
            assert client.status()["episodes_used"] == 0
        finally:
            client.close()
    finally:
        server.stop(grace=None).wait(5)


def test_without_an_owner_the_host_api_socket_is_the_hosts_own_and_closed_to_everyone_else(open_directory: Path):
    if os.geteuid() != 0:
        pytest.fail("this test changes uid in a child and must run as root", pytrace=False)
    host = host_in(open_directory / "run")
    path = open_directory / "api.sock"
    server = serve(host, TOKEN, path)
    try:
        assert (path.stat().st_uid, path.stat().st_mode & 0o777) == (os.geteuid(), 0o600)
        assert connect_as(AGENT_UID, path) == "refused: PermissionError"
        assert connect_as(OTHER_UID, path) == "refused: PermissionError"
    finally:
        server.stop(grace=None).wait(5)


class BlockingHost:
    """A RunHostPort whose status() blocks until released, to hold calls open on the server."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.inside = 0
        self.lock = threading.Lock()
        self.state = SessionState(budget())

    def status(self) -> Any:
        with self.lock:
            self.inside += 1
        self.release.wait(CALL_TIMEOUT_S * 3)
        return self.state.status()

    def task(self) -> tuple[str, str, dict[str, Any]]:
        return INSTRUCTIONS, BENCHMARK.id, {}

    def feedback_path(self, submission_id: str) -> str:
        return ""

    def max_candidates(self) -> int:
        return 2

    def submit(self, selector: str) -> Any:
        raise AssertionError("not called")

    def finish(self, candidates: list[str]) -> tuple[str, ...]:
        raise AssertionError("not called")


def test_calls_beyond_the_concurrency_cap_are_refused_at_once_and_the_server_answers_again_after(open_directory: Path):
    host = BlockingHost()
    path = open_directory / "api.sock"
    server = serve(host, TOKEN, path)  # the Run's own settings
    channel = grpc.insecure_channel(f"unix:{path}")
    stub = pb_grpc.HostApiStub(channel)
    try:
        held = [stub.GetStatus.future(pb.StatusRequest(), metadata=AUTHORIZED, timeout=CALL_TIMEOUT_S * 2)
                for _ in range(MAX_CONCURRENT_RPCS)]
        wait_until(lambda: host.inside >= 1)
        began = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetStatus(pb.StatusRequest(), metadata=AUTHORIZED, timeout=CALL_TIMEOUT_S)
        assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert time.monotonic() - began < CALL_TIMEOUT_S / 2, "the call beyond the cap waited instead of being refused"
        with pytest.raises(HostApiError) as told:  # what the agent's client makes of it
            SessionClient(str(path), TOKEN, timeout_s=CALL_TIMEOUT_S).status()
        assert told.value.code == "busy"
        host.release.set()
        assert all(call.result().episodes_total == 10 for call in held)
        assert stub.GetStatus(pb.StatusRequest(), metadata=AUTHORIZED, timeout=CALL_TIMEOUT_S).episodes_total == 10
    finally:
        host.release.set()
        channel.close()
        server.stop(grace=None).wait(5)


# Requests gRPC would refuse itself ------------------------------------------------
AUTHORIZED = (("authorization", f"Bearer {TOKEN}"),)
UNAUTHORIZED = {"no-token": (), "wrong-token": (("authorization", f"Bearer {WRONG_TOKEN}"),)}
METHOD_PATHS = [f"/epg.v1.HostApi/{method}" for method in RAW_REQUESTS]
# A valid SubmitRequest over MAX_REQUEST_BYTES (and under the transport cap); its bytes parse as every request message.
TOO_LARGE = pb.SubmitRequest(episodes="0" * MAX_REQUEST_BYTES).SerializeToString()
OVER_TRANSPORT_CAP = pb.SubmitRequest(episodes="0" * TRANSPORT_MAX_RECEIVE_BYTES).SerializeToString()
MALFORMED = {  # name: (bytes, the methods whose request message they are not)
    "invalid-wire-type": (b"\x0f", METHOD_PATHS),
    "huge-field-number": (b"\xff\xff\xff", METHOD_PATHS),
    "truncated-field": (b"\x0a\x05ab", METHOD_PATHS),
    # Field 1 is a string only in SubmitRequest and FinishRequest: elsewhere these bytes are a valid unknown field.
    "invalid-utf8-string": (b"\x0a\x02\xff\xfe", ["/epg.v1.HostApi/Submit", "/epg.v1.HostApi/Finish"]),
}


def raw_bytes_call(served: Served, path: str, payload: bytes | None, metadata: tuple = ()) -> grpc.RpcError:
    """Send payload as the request's raw bytes (None: a call with no request message); return the RpcError."""
    with grpc.insecure_channel(f"unix:{served.socket_path}") as channel:
        with pytest.raises(grpc.RpcError) as caught:
            if payload is None:
                call = channel.stream_unary(path, request_serializer=None, response_deserializer=None)
                call(iter(()), metadata=metadata, timeout=CALL_TIMEOUT_S)
            else:
                call = channel.unary_unary(path, request_serializer=None, response_deserializer=None)
                call(payload, metadata=metadata, timeout=CALL_TIMEOUT_S)
    return caught.value


GUARDED_CALLS = [
    *(pytest.param(path, payload, grpc.StatusCode.INVALID_ARGUMENT, "malformed_request", id=f"malformed-{name}-{path}")
      for name, (payload, paths) in MALFORMED.items() for path in paths),
    *(pytest.param(path, None, grpc.StatusCode.INVALID_ARGUMENT, "malformed_request", id=f"no-message-{path}")
      for path in METHOD_PATHS),
    *(pytest.param(path, TOO_LARGE, grpc.StatusCode.RESOURCE_EXHAUSTED, "request_too_large", id=f"too-large-{path}")
      for path in METHOD_PATHS),
    *(pytest.param(path, b"", grpc.StatusCode.UNIMPLEMENTED, "unknown_method", id=f"unknown-{path}")
      for path in ("/epg.v1.HostApi/Evaluate", "/epg.v1.HostApi/submit", "/epg.v1.Runner/Describe", "/Submit")),
]


def test_the_test_requests_are_what_they_claim():
    assert TRANSPORT_MAX_RECEIVE_BYTES > MAX_REQUEST_BYTES
    assert MAX_REQUEST_BYTES < len(TOO_LARGE) < TRANSPORT_MAX_RECEIVE_BYTES
    assert len(OVER_TRANSPORT_CAP) > TRANSPORT_MAX_RECEIVE_BYTES
    for message in (pb.TaskRequest, pb.StatusRequest, pb.SubmitRequest, pb.FinishRequest):
        message.FromString(TOO_LARGE)
    for payload, paths in MALFORMED.values():
        for path in paths:
            with pytest.raises(DecodeError):
                type(RAW_REQUESTS[path.rsplit("/", 1)[1]]).FromString(payload)


@pytest.mark.parametrize(("path", "payload", "status", "code"), GUARDED_CALLS)
def test_a_request_grpc_would_refuse_itself_gets_a_typed_code_and_changes_nothing(
        run: Served, path: str, payload: bytes | None, status: grpc.StatusCode, code: str):
    run.client.submit("0:2")  # s0001 completed: a Finish that got through would change the Run
    before = run.snapshot()

    error = raw_bytes_call(run, path, payload, AUTHORIZED)

    assert (error.code(), trailing_code(error)) == (status, code), error.details()
    assert GRPC_STATUS[RejectionCode(code)] is status
    assert run.snapshot() == before


@pytest.mark.parametrize("metadata", UNAUTHORIZED.values(), ids=UNAUTHORIZED.keys())
@pytest.mark.parametrize(("path", "payload"), [
    *(pytest.param(*param.values[:2], id=param.id) for param in GUARDED_CALLS),
    *(pytest.param(path, OVER_TRANSPORT_CAP, id=f"over-transport-cap-{path}") for path in METHOD_PATHS),
])
def test_a_caller_without_the_token_learns_only_unauthenticated_whatever_its_request(
        run: Served, metadata: tuple, path: str, payload: bytes | None):
    # The guard reads no message of an unauthenticated call: not even one over the transport cap reaches gRPC's check.
    before = run.snapshot()

    error = raw_bytes_call(run, path, payload, metadata)

    assert (error.code(), trailing_code(error)) == (grpc.StatusCode.UNAUTHENTICATED, "unauthenticated"), error.details()
    assert run.snapshot() == before


def test_a_request_over_the_transport_cap_is_refused_by_grpc_and_read_by_the_client_as_request_too_large(run: Served):
    before = run.snapshot()

    error = raw_bytes_call(run, "/epg.v1.HostApi/Submit", OVER_TRANSPORT_CAP, AUTHORIZED)
    refusal = refused(lambda: run.client.submit("0" * TRANSPORT_MAX_RECEIVE_BYTES))

    assert (error.code(), trailing_code(error)) == (grpc.StatusCode.RESOURCE_EXHAUSTED, None)
    assert refusal.code == "request_too_large"
    assert run.snapshot() == before
    assert run.client.submit("0:2")["submission_id"] == "s0001"


def test_a_request_of_exactly_the_size_limit_passes_the_guard_and_the_one_above_does_not(run: Served):
    at_limit = pb.SubmitRequest(episodes="0," * ((MAX_REQUEST_BYTES - 4) // 2))
    at_limit.episodes += "0" * (MAX_REQUEST_BYTES - at_limit.ByteSize())
    above = pb.SubmitRequest(episodes=at_limit.episodes + "0")
    assert (at_limit.ByteSize(), above.ByteSize()) == (MAX_REQUEST_BYTES, MAX_REQUEST_BYTES + 1)
    before = run.snapshot()

    # Past the guard, the servicer's own shape check answers: the selector is too long.
    assert refused(lambda: run.client.submit(at_limit.episodes)).code == "invalid_selector"
    assert refused(lambda: run.client.submit(above.episodes)).code == "request_too_large"

    assert run.snapshot() == before


def test_an_oversized_request_through_the_client_is_refused_and_the_server_stays_up(run: Served):
    before = run.snapshot()

    error = refused(lambda: run.client.submit("0," * 50_000 + "1"))

    assert error.code == "request_too_large"
    assert run.snapshot() == before
    receipt = run.client.submit("0:2")
    assert receipt["submission_id"] == "s0001"


def test_a_valid_request_as_raw_bytes_is_answered_as_through_the_stub(run: Served):
    run.client.submit("0:2")
    with grpc.insecure_channel(f"unix:{run.socket_path}") as channel:
        call = channel.unary_unary("/epg.v1.HostApi/GetStatus", request_serializer=None, response_deserializer=None)
        answer = call(pb.StatusRequest().SerializeToString(), metadata=AUTHORIZED, timeout=CALL_TIMEOUT_S)

    status = pb.Status.FromString(answer)
    assert (status.episodes_used, [s.id for s in status.submissions]) == (2, ["s0001"])


def test_every_host_api_method_is_unary_as_the_guard_assumes():
    for method in pb.DESCRIPTOR.services_by_name["HostApi"].methods:
        assert not (method.client_streaming or method.server_streaming), method.name


# Status -------------------------------------------------------------------------
def test_status_lists_submissions_with_state_score_and_feedback_path(run: Served):
    empty = run.client.status()
    assert empty == {
        "episodes_total": 10, "episodes_used": 0, "episodes_left": 10,
        "submissions_used": 0, "submissions_left": 3, "pool_size": POOL_SIZE,
        "max_episodes_per_submission": 6, "finish_policy": "allow_early", "max_candidates": 2,
        "finished": False, "candidates": [], "submissions": [],
    }
    digest = run.digest()
    run.client.submit("0:2")
    run.client.submit("4,9")

    status = run.client.status()

    assert (status["episodes_used"], status["episodes_left"]) == (4, 6)
    assert (status["submissions_used"], status["submissions_left"]) == (2, 1)
    assert status["max_candidates"] == 2
    assert status["submissions"] == [
        {"id": "s0001", "number": 1, "program_digest": digest, "selector": "0:2", "state": "completed",
         "score": expected_score(digest, [0, 1]), "has_score": True, "policy_failures": 0,
         "feedback_path": "feedback/s0001/feedback.json"},
        {"id": "s0002", "number": 2, "program_digest": digest, "selector": "4,9", "state": "completed",
         "score": expected_score(digest, [4, 9]), "has_score": True, "policy_failures": 0,
         "feedback_path": "feedback/s0002/feedback.json"},
    ]
    for submission in status["submissions"]:
        assert (run.records.workspace / submission["feedback_path"]).is_file()


# The epg-session command ----------------------------------------------------------
def epg_session(run: Served, *args: str, token: str = TOKEN) -> tuple[int, Any]:
    env = {**os.environ, "EPG_HOST_API": str(run.socket_path), "EPG_SESSION_TOKEN": token, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "orchestrator.hostclient.cli", *args], capture_output=True, text=True,
                          env=env, cwd=run.records.root, timeout=30)
    assert done.stderr == "", done.stderr
    return done.returncode, json.loads(done.stdout)


def test_epg_session_prints_json_and_exits_with_the_outcome(run: Served):
    code, status = epg_session(run, "status")
    assert code == 0
    assert (status["episodes_left"], status["pool_size"], status["submissions"]) == (10, POOL_SIZE, [])

    code, receipt = epg_session(run, "submit", "--episodes", "0:2")
    assert code == 0
    assert receipt["submission_id"] == "s0001"
    assert receipt["score"] == expected_score(run.digest(), [0, 1])
    assert receipt["feedback_path"] == "feedback/s0001/feedback.json"

    code, output = epg_session(run, "submit", "--episodes", f"0:{POOL_SIZE + 4}")
    assert code == 1
    assert output["error"]["code"] == "index_out_of_range"
    assert output["error"]["message"]

    code, output = epg_session(run, "status", token=WRONG_TOKEN)
    assert code == 1
    assert output["error"]["code"] == "unauthenticated"

    code, finished = epg_session(run, "finish", "s0001")
    assert code == 0
    assert finished == {"candidates": ["s0001"]}
    assert len(run.sandbox.calls) == 2
    assert run.event_types() == ["submission_admitted", "submission_completed", "finished"]


def test_epg_session_reports_a_request_over_the_size_limit_as_request_too_large(run: Served):
    code, output = epg_session(run, "submit", "--episodes", "0" * (MAX_REQUEST_BYTES + 1))

    assert code == 1
    assert output["error"]["code"] == "request_too_large"
    assert run.sandbox.calls == []


# Code mirrors -----------------------------------------------------------------------
def proto_error_codes() -> dict[str, int]:
    descriptor = pb.DESCRIPTOR.enum_types_by_name["ErrorCode"]
    return {value.name: value.number for value in descriptor.values if value.name != "ERROR_CODE_UNSPECIFIED"}


def test_error_mirrors_cover_every_session_error():
    assert set(PROTO_CODES) == set(RejectionCode)
    assert set(GRPC_STATUS) == set(RejectionCode)
    assert all(isinstance(status, grpc.StatusCode) and status is not grpc.StatusCode.OK for status in GRPC_STATUS.values())


def test_proto_codes_cover_every_proto_error_code_except_unspecified_one_to_one():
    numbers = proto_error_codes()
    assert numbers, "the ErrorCode enum has values"
    assert sorted(PROTO_CODES.values()) == sorted(numbers.values())
    assert len(set(PROTO_CODES.values())) == len(PROTO_CODES)
    assert pb.ERROR_CODE_UNSPECIFIED not in PROTO_CODES.values()
    names = {number: name for name, number in numbers.items()}
    for error, number in PROTO_CODES.items():
        # The trailing metadata carries the lower_snake form of the proto name: the RejectionCode value.
        assert names[number] == "ERROR_CODE_" + error.value.upper()


def test_client_and_server_agree_on_the_error_metadata_key():
    assert session_client.ERROR_METADATA_KEY == hostapi_errors.ERROR_METADATA_KEY


def test_the_client_reads_an_uncoded_refusal_as_the_session_error_the_server_answers_with_the_same_status():
    for status, code in session_client.UNCODED_REFUSALS.items():
        assert GRPC_STATUS[RejectionCode(code)] is status


def test_the_api_is_served_at_a_socket_path_longer_than_a_unix_socket_address_allows(tmp_path: Path):
    # A Run directory below a deep checkout: the socket's path is over the 107 bytes a Unix socket address holds.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    socket_path = deep / "api.sock"
    assert len(os.fsencode(socket_path)) > 108
    b = budget()
    sandbox = FakeSandbox()
    records = RunDirectory(tmp_path / "run")
    records.create("benchmark: fake/balance-v0\n")
    host = RunHost(records=records, sandbox=sandbox, benchmark=sandbox.describe(), state=SessionState(b),
                   episode_pool=sandbox.plan("train", 11, b.pool_size), instructions=INSTRUCTIONS, notify=lambda kind, fields: None)
    server = serve(host, TOKEN, socket_path)
    directory = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    client = SessionClient(socket_path=f"/proc/self/fd/{directory}/api.sock", token=TOKEN, timeout_s=CALL_TIMEOUT_S)
    try:
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600 and stat.S_ISSOCK(socket_path.stat().st_mode)
        assert client.status()["finished"] is False
        assert [entry.name for entry in deep.iterdir()] == ["api.sock"]  # the private directory it was bound in is gone
    finally:
        client.close()
        os.close(directory)
        server.stop(grace=None).wait(5)
