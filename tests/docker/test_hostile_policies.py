"""Hostile and broken policies end as scored policy failures; the Host and the next Episode carry on.

Every test runs under both Episode isolation modes: a policy container per Episode, and a sandbox forked in the
lane's container (gVisor runs the first only: a forked sandbox under runsc is refused).
"""

from __future__ import annotations

import secrets
import time
from contextlib import contextmanager
from dataclasses import replace

import pytest
from programs import MEMORY_BOMB, STEADY

from epg_sdk.codes import EpisodeStatus, FailureCode
from epg_sdk.runtime.episode_loop import EpisodeLimits
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import ISOLATIONS, SandboxImages, SandboxLimits, SandboxTuning
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.program import capture_program

# The runtimes of a test parametrised over them, with each isolation mode that runs under it.
UNDER = [("runc", "container"), ("runsc", "container"), ("runc", "forked")]


def pytest_generate_tests(metafunc):
    """Every test that opens a sandbox, under each isolation mode (those parametrised with UNDER already are)."""
    if "open_sandbox" in metafunc.fixturenames and "isolation" not in metafunc.fixturenames:
        metafunc.fixturenames.append("isolation")
    if "isolation" in metafunc.fixturenames and not any("isolation" in m.args[0] for m in metafunc.definition.iter_markers("parametrize")):
        metafunc.parametrize("isolation", ISOLATIONS)


@pytest.fixture
def open_sandbox(open_sandbox, isolation):
    """The shared factory with the test's isolation mode in its tuning."""

    @contextmanager
    def factory(benchmark="CartPole-v1", limits=SandboxLimits(), tuning=SandboxTuning(pool_size=2), runtime=None):
        with open_sandbox(benchmark, limits, replace(tuning, isolation=isolation), runtime) as sandbox:
            yield sandbox

    return factory


def _one(sandbox, program_dir, index=0):
    episode = sandbox.plan("train", 0, index + 1)[index]
    return sandbox.run_episode(episode, capture_program(program_dir))


@pytest.mark.parametrize(("runtime", "isolation"), UNDER)
def test_memory_bomb_is_an_out_of_memory_failure_and_next_episode_runs(open_sandbox, write_program, runtime):
    bomb = write_program(MEMORY_BOMB)
    # a generous step deadline: the bomb must meet the memory limit, not the clock, on loaded cores too
    limits = SandboxLimits(memory_bytes=128 * 1024 * 1024, episode=EpisodeLimits(step_deadline_s=10.0))
    with open_sandbox(limits=limits, runtime=runtime) as sandbox:
        outcome = _one(sandbox, bomb)
        after = _one(sandbox, write_program(STEADY))
    assert outcome.status is EpisodeStatus.POLICY_FAILURE
    assert outcome.failure is FailureCode.OUT_OF_MEMORY, outcome
    assert "memory" in outcome.reason
    assert after.status is EpisodeStatus.COMPLETED and after.steps == 500


def test_fork_bomb_is_stopped_by_the_pid_limit(open_sandbox, write_program):
    bomb = write_program('''
        import os, time
        class Policy:
            def act(self, observation):
                children = 0
                try:
                    while True:
                        if os.fork() == 0:
                            time.sleep(120)
                            os._exit(0)
                        children += 1
                except OSError as exc:
                    raise RuntimeError(f"fork refused after {children} children: {exc}")
        def make_policy(context):
            return Policy()
    ''')
    limits = SandboxLimits(pids=32, episode=EpisodeLimits(step_deadline_s=10.0))  # the PID limit, not the clock, stops it
    with open_sandbox(limits=limits) as sandbox:
        outcome = _one(sandbox, bomb)
        after = _one(sandbox, write_program(STEADY))
    assert outcome.failure is FailureCode.EXCEPTION, outcome
    children = int(outcome.reason.split("after ")[1].split(" ")[0])
    assert 0 < children < 32
    assert after.status is EpisodeStatus.COMPLETED


@pytest.mark.parametrize(("runtime", "isolation"), UNDER)
def test_infinite_loop_in_act_times_out_within_the_step_deadline(open_sandbox, write_program, runtime):
    spin = write_program('''
        class Policy:
            def act(self, observation):
                while True:
                    pass
        def make_policy(context):
            return Policy()
    ''')
    limits = SandboxLimits(episode=EpisodeLimits(step_deadline_s=0.5, episode_deadline_s=60.0))
    with open_sandbox(limits=limits, runtime=runtime) as sandbox:
        began = time.monotonic()
        outcome = _one(sandbox, spin)
        elapsed = time.monotonic() - began
        after = _one(sandbox, write_program(STEADY))
    assert outcome.failure is FailureCode.TIMEOUT, outcome
    # The step deadline fired, not the Episode deadline: the reason names it whatever the load.
    assert "act() took longer than 0.5 s" in outcome.reason, outcome.reason
    # The wait ended at the step deadline: the 0.5 s charged, plus at most the runner's wake-up on 2 loaded cores
    # (well short of the 60 s Episode deadline that an ignored step deadline would run into).
    assert 0.5 <= outcome.policy_seconds < 2.0
    assert outcome.steps == 0
    assert elapsed < 30
    assert after.status is EpisodeStatus.COMPLETED and after.steps == 500


def test_episode_deadline_counts_policy_time_only(open_sandbox, write_program):
    slow = write_program('''
        import time
        class Policy:
            def act(self, observation):
                time.sleep(0.15)
                return 0
        def make_policy(context):
            return Policy()
    ''')
    limits = SandboxLimits(episode=EpisodeLimits(step_deadline_s=1.0, episode_deadline_s=0.5))
    with open_sandbox(limits=limits) as sandbox:
        outcome = _one(sandbox, slow)
    assert outcome.failure is FailureCode.TIMEOUT
    assert "Episode deadline" in outcome.reason
    assert 2 <= outcome.steps <= 4


def test_slow_environment_step_is_not_charged_to_the_policy(open_sandbox, write_program):
    quick = write_program('''
        class Policy:
            def act(self, observation):
                return int(observation[0]) % 3
        def make_policy(context):
            return Policy()
    ''')
    limits = SandboxLimits(episode=EpisodeLimits(step_deadline_s=0.2, episode_deadline_s=0.5))
    with open_sandbox("ProbeSlow-v0", limits=limits) as sandbox:
        outcome = _one(sandbox, quick)
    assert outcome.status is EpisodeStatus.COMPLETED, outcome
    assert outcome.steps == 4
    assert outcome.environment_seconds >= 2.0
    assert outcome.policy_seconds < 0.5


def test_ten_thousand_prints_per_step_change_nothing(open_sandbox, write_program):
    chatty = write_program(STEADY.replace(
        "    def act(self, observation):\n",
        "    def act(self, observation):\n        for i in range(10_000):\n            print('line', i)\n",
    ))
    # a generous step deadline: 10,000 lines a step are about output, and must not meet the clock on loaded cores
    limits = SandboxLimits(episode=EpisodeLimits(output_tail_bytes=2048, step_deadline_s=10.0))
    with open_sandbox(limits=limits) as sandbox:
        episode = sandbox.plan("train", 0, 1)[0]
        quiet = sandbox.run_episode(episode, capture_program(write_program(STEADY)))
        loud = sandbox.run_episode(episode, capture_program(chatty))
    assert loud.status is EpisodeStatus.COMPLETED, loud
    assert (loud.steps, loud.reward) == (quiet.steps, quiet.reward)
    assert 0 < len(loud.output_tail.encode()) <= 2048
    assert loud.output_tail.rstrip().endswith("line 9999")


def test_exception_shows_its_traceback_in_the_feedback(open_sandbox, write_program):
    broken = write_program('''
        def helper(observation):
            raise ValueError("observation looked wrong")
        class Policy:
            def act(self, observation):
                print("about to fail")
                return helper(observation)
        def make_policy(context):
            return Policy()
    ''')
    with open_sandbox() as sandbox:
        outcome = _one(sandbox, broken)
        feedback = sandbox.feedback([outcome])
    assert outcome.failure is FailureCode.EXCEPTION
    assert "ValueError: observation looked wrong" in outcome.reason
    assert 'in helper' in outcome.traceback and 'raise ValueError("observation looked wrong")' in outcome.traceback
    assert "about to fail" in outcome.output_tail
    assert feedback.episodes[0].traceback == outcome.traceback
    assert feedback.score == 0.0  # CartPole's failure_return
    assert feedback.values["policy_failures"] == 1


def test_import_error_in_policy_module_is_a_policy_exception(open_sandbox, write_program):
    broken = write_program("import module_that_does_not_exist\n")
    with open_sandbox() as sandbox:
        outcome = _one(sandbox, broken)
    assert outcome.failure is FailureCode.EXCEPTION
    assert "ModuleNotFoundError" in outcome.reason


def test_out_of_range_action_is_an_invalid_action_failure(open_sandbox, write_program):
    wild = write_program('''
        class Policy:
            def act(self, observation):
                return 5
        def make_policy(context):
            return Policy()
    ''')
    with open_sandbox() as sandbox:
        outcome = _one(sandbox, wild)
    assert outcome.failure is FailureCode.INVALID_ACTION
    assert "5" in outcome.reason and outcome.steps == 0


def test_unencodable_action_is_an_invalid_action_failure(open_sandbox, write_program):
    odd = write_program('''
        class Policy:
            def act(self, observation):
                return {1, 2}
        def make_policy(context):
            return Policy()
    ''')
    with open_sandbox() as sandbox:
        outcome = _one(sandbox, odd)
    assert outcome.failure is FailureCode.INVALID_ACTION
    assert "set" in outcome.reason


def test_garbage_on_the_policy_socket_is_a_protocol_violation(open_sandbox, write_program):
    forger = write_program('''
        import os, stat
        class Policy:
            def act(self, observation):
                for fd in range(3, 64):
                    try:
                        if stat.S_ISSOCK(os.fstat(fd).st_mode):
                            os.write(fd, b"\\xff\\xff\\xff\\x7f" + b"junk")
                    except OSError:
                        pass
                return 0
        def make_policy(context):
            return Policy()
    ''')
    with open_sandbox() as sandbox:
        outcome = _one(sandbox, forger)
    assert outcome.failure is FailureCode.PROTOCOL_VIOLATION, outcome
    assert "exceeds the limit" in outcome.reason


@pytest.mark.parametrize(
    ("body", "expected"),
    [("os._exit(7)", "exited with status 7"), ("os.kill(os.getpid(), signal.SIGKILL)", "SIGKILL")],
)
def test_policy_process_death_is_a_crash(open_sandbox, write_program, body, expected):
    dying = write_program(f'''
        import os, signal
        class Policy:
            def act(self, observation):
                {body}
        def make_policy(context):
            return Policy()
    ''')
    with open_sandbox() as sandbox:
        outcome = _one(sandbox, dying)
    assert outcome.failure is FailureCode.CRASHED, outcome
    assert expected in outcome.reason


def test_environment_crash_is_an_infrastructure_error_with_diagnostics(open_sandbox, write_program):
    fine = write_program('''
        class Policy:
            def act(self, observation):
                return int(observation[0]) % 3
        def make_policy(context):
            return Policy()
    ''')
    with open_sandbox("ProbeCrash-v0") as sandbox:
        with pytest.raises(InfrastructureError) as caught:
            _one(sandbox, fine)
    assert caught.value.code is InfraErrorCode.ENVIRONMENT_ERROR
    assert "simulator exploded" in caught.value.evidence
    assert "simulator" not in caught.value.message


def test_every_episode_gets_a_fresh_runtime(open_sandbox, write_program):
    marker = write_program('''
        import os, socket
        class Policy:
            def act(self, observation):
                return 0
        def make_policy(context):
            if os.path.exists("/tmp/marker"):
                raise RuntimeError("saw the marker of an earlier Episode")
            open("/tmp/marker", "w").write("used")
            # Each container, and each forked sandbox, mounts a /tmp of its own. Its device number alone does not tell
            # them apart (an unmounted tmpfs's anonymous device number is handed to the next one); with the mount's
            # time, to the nanosecond, it does.
            tmp = os.stat("/tmp")
            print("HOST", socket.gethostname(), f"{tmp.st_dev}:{tmp.st_ctime_ns}")
            return Policy()
    ''')
    with open_sandbox() as sandbox:
        evaluation = evaluate_program(sandbox, capture_program(marker), split="train", seed=0, episodes=3)
    outcomes = evaluation.feedback.episodes
    assert [o.status for o in outcomes] == [EpisodeStatus.COMPLETED] * 3, outcomes
    mounts = {o.output_tail.split("HOST", 1)[1].split()[1] for o in outcomes}
    assert len(mounts) == 3, mounts


def test_a_runner_that_exits_during_start_up_is_reported_at_once_with_its_log(engine, images, scope):
    """A Benchmark entry that does not import: the runner dies before its socket exists, and the sandbox says so
    within a few liveness checks, not at the end of its start-up deadline."""
    sandbox_images = SandboxImages(environment=images["env-probe"], policy_runtime=images["policy-runtime"],
                                   benchmark_entry="epg_env_probe.no_such_module:make_benchmark")
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)
    began = time.monotonic()
    with pytest.raises(InfrastructureError) as caught:
        with DockerSandbox(engine, sandbox_images, SandboxLimits(), labels, tuning=SandboxTuning(pool_size=1)):
            pass
    took = time.monotonic() - began
    assert caught.value.code is InfraErrorCode.RUNNER_FAILED
    assert caught.value.message == "the environment runner exited during start-up"
    assert "no_such_module" in caught.value.evidence  # the runner's own traceback, from its log
    assert took < 30, took
    assert engine.client.containers.list(all=True, filters={"label": selector(sandbox=labels.sandbox)}) == []
