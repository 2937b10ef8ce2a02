"""compat/evopolicygym, our implementation of EvoPolicyGym 0.3's public interfaces: every value's validation, the read-only
context, the Program snapshot, the unisolated evaluator and conformance check, and, when a checkout of the reference
repository is present, its stdlib-only and toy-text packages imported and run with their baseline Programs.
"""

from __future__ import annotations

import ast
import math
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
COMPAT = REPO_ROOT / "compat"
if str(COMPAT) not in sys.path:
    sys.path.insert(0, str(COMPAT))

from evopolicygym import EvaluationConfig, Program, evaluate  # noqa: E402
from evopolicygym.artifacts import ARTIFACT_MAX_BYTES, FEEDBACK_MAX_ARTIFACTS  # noqa: E402
from evopolicygym.authoring import (  # noqa: E402
    Artifact,
    Benchmark,
    BenchmarkFixture,
    BenchmarkSpec,
    EpisodeRecord,
    EpisodeSpec,
    Feedback,
    InvalidAction,
    Step,
    Transition,
    check_benchmark,
)
from evopolicygym.errors import BenchmarkError, EvaluationError, ProgramLimitError, ProgramSourceError  # noqa: E402
from evopolicygym.evaluation import derive_policy_seed  # noqa: E402
from evopolicygym.execution import ProcessExecution  # noqa: E402
from evopolicygym.policy import POLICY_ABI_VERSION, PolicyContext, TensorValue, copy_policy_value  # noqa: E402
from evopolicygym.program import ProgramLimits  # noqa: E402
from evopolicygym.results import EpisodeSummary  # noqa: E402

U64_MAX = 2**64 - 1


# --- TensorValue ---------------------------------------------------------------------------------------------------


def test_tensor_accepts_data_of_exactly_its_dtype_and_shape() -> None:
    tensor = TensorValue("float32", (2, 3), struct.pack("<6f", *range(6)))
    assert (tensor.dtype, tensor.shape, len(tensor.data)) == ("float32", (2, 3), 24)
    assert TensorValue("uint8", (0, 5), b"").shape == (0, 5)
    assert TensorValue("uint64", (), b"\xff" * 8).shape == ()


@pytest.mark.parametrize(
    ("dtype", "shape", "data"),
    [
        ("float32", (2, 3), b"\x00" * 23),
        ("float32", (2, 3), b"\x00" * 25),
        ("uint16", (3,), b"\x00" * 3),
        ("int64", (), b"\x00" * 4),
    ],
)
def test_tensor_refuses_data_whose_size_does_not_match_dtype_and_shape(dtype: str, shape: tuple[int, ...], data: bytes) -> None:
    with pytest.raises(ValueError, match="bytes"):
        TensorValue(dtype, shape, data)


def test_tensor_refuses_unknown_dtypes_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="dtype"):
        TensorValue("complex64", (1,), b"\x00" * 8)
    with pytest.raises(ValueError, match="dtype"):
        TensorValue("object", (1,), b"\x00")
    with pytest.raises(TypeError, match="tuple"):
        TensorValue("uint8", [1], b"\x00")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        TensorValue("uint8", (-1,), b"")
    with pytest.raises(ValueError, match="non-negative"):
        TensorValue("uint8", (True,), b"\x00")


def test_tensor_data_must_be_exact_bytes() -> None:
    with pytest.raises(TypeError, match="bytes"):
        TensorValue("uint8", (2,), bytearray(b"\x00\x01"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes"):
        TensorValue("uint8", (2,), memoryview(b"\x00\x01"))  # type: ignore[arg-type]


def test_bool_tensor_holds_only_zero_and_one_bytes_anywhere() -> None:
    assert TensorValue("bool", (4,), b"\x00\x01\x01\x00").shape == (4,)
    for data in (b"\x02\x00\x00\x00", b"\x00\x01\xff\x00", b"\x00\x00\x00\x02"):
        with pytest.raises(ValueError, match="bool"):
            TensorValue("bool", (4,), data)


@pytest.mark.parametrize(
    ("dtype", "code"),
    [("float16", "<e"), ("float32", "<f"), ("float64", "<d")],
)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_floating_tensor_refuses_non_finite_elements(dtype: str, code: str, bad: float) -> None:
    data = struct.pack(code, 1.0) + struct.pack(code, bad) + struct.pack(code, 2.0)
    with pytest.raises(ValueError, match="finite"):
        TensorValue(dtype, (3,), data)


def test_integer_tensors_are_not_checked_for_finiteness() -> None:
    """The bytes of a float NaN are an ordinary uint32 or int32 element."""
    nan_bytes = struct.pack("<f", math.nan)
    assert TensorValue("uint32", (1,), nan_bytes).data == nan_bytes
    assert TensorValue("int32", (1,), nan_bytes).data == nan_bytes


def test_tensor_is_immutable() -> None:
    tensor = TensorValue("uint8", (1,), b"\x07")
    with pytest.raises(FrozenInstanceError):
        tensor.data = b"\x08"  # type: ignore[misc]


# --- PolicyValue carriers ------------------------------------------------------------------------------------------


def test_integers_fit_signed_or_unsigned_64_bits() -> None:
    assert copy_policy_value(U64_MAX) == U64_MAX
    assert copy_policy_value(-(2**63)) == -(2**63)
    with pytest.raises(ValueError, match="64"):
        copy_policy_value(2**64)
    with pytest.raises(ValueError, match="64"):
        copy_policy_value(-(2**63) - 1)
    with pytest.raises(ValueError, match="64"):
        copy_policy_value({"nested": [2**70]})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_refused_wherever_they_sit(bad: float) -> None:
    for value in (bad, [1.0, bad], (bad,), {"reward": bad}):
        with pytest.raises(ValueError, match="finite"):
            copy_policy_value(value)


class _Int(int):
    pass


class _Str(str):
    pass


@pytest.mark.parametrize(
    "value",
    [_Int(3), _Str("x"), {1, 2}, frozenset(), bytearray(b"x"), 1j, object(), [1, {2}], {"a": (_Int(1),)}],
    ids=["int-subclass", "str-subclass", "set", "frozenset", "bytearray", "complex", "object", "set-in-list", "subclass-in-tuple"],
)
def test_only_exact_carriers_cross_the_policy_boundary(value: object) -> None:
    with pytest.raises(TypeError, match="carrier"):
        copy_policy_value(value)  # type: ignore[arg-type]


def test_mapping_keys_must_be_exact_strings() -> None:
    with pytest.raises(TypeError, match="keys"):
        copy_policy_value({1: "a"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="keys"):
        copy_policy_value({_Str("a"): 1})


def test_copies_are_detached_and_keep_tuples_distinct_from_lists() -> None:
    original = {"list": [1, [2]], "tuple": (1, (2,)), "bytes": b"\x00", "none": None, "flag": True}
    copied = copy_policy_value(original)
    assert copied == original
    assert type(copied["tuple"]) is tuple and type(copied["list"]) is list  # type: ignore[index]
    original["list"][1].append(3)  # type: ignore[index]
    assert copied["list"] == [1, [2]]  # type: ignore[index]


# --- PolicyContext -------------------------------------------------------------------------------------------------


def _context(**overrides: object) -> PolicyContext:
    fields: dict[str, object] = {
        "observation_space": {"type": "box", "shape": (4,)},
        "action_space": {"type": "discrete", "n": 2},
        "metadata": {"family": "toy"},
        "environment_parameters": {"gravity": 9.8},
        "policy_seed": 7,
    }
    fields.update(overrides)
    return PolicyContext(**fields)  # type: ignore[arg-type]


def test_policy_context_mappings_are_read_only_and_detached() -> None:
    metadata = {"family": "toy", "levels": [1, 2]}
    context = _context(metadata=metadata)
    metadata["family"] = "changed"
    metadata["levels"].append(3)  # type: ignore[attr-defined]
    assert context.metadata == {"family": "toy", "levels": [1, 2]}
    with pytest.raises(TypeError):
        context.metadata["family"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        context.environment_parameters["gravity"] = 1.0  # type: ignore[index]
    with pytest.raises(FrozenInstanceError):
        context.policy_seed = 8  # type: ignore[misc]


def test_policy_context_seed_is_unsigned_64_bit() -> None:
    assert _context(policy_seed=U64_MAX).policy_seed == U64_MAX
    for bad in (-1, 2**64, True, 1.0):
        with pytest.raises(ValueError, match="policy_seed"):
            _context(policy_seed=bad)


def test_policy_context_refuses_non_mappings_and_invalid_values() -> None:
    with pytest.raises(TypeError, match="metadata"):
        _context(metadata=[("a", 1)])
    with pytest.raises(TypeError, match="keys"):
        _context(environment_parameters={1: 2})
    with pytest.raises(ValueError, match="finite"):
        _context(observation_space={"low": -math.inf})


# --- Artifact ------------------------------------------------------------------------------------------------------


def test_artifact_names_are_relative_posix_paths() -> None:
    artifact = Artifact("episode-000/replay.gif", "image/gif", b"GIF89a", retention="bulk")
    assert (artifact.name, artifact.size, artifact.read_bytes(), artifact.retention) == ("episode-000/replay.gif", 6, b"GIF89a", "bulk")
    assert Artifact("summary.json", "application/json", b"{}").retention == "permanent"


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/.", "a/", "a\\b", "a\x00b", ".."])
def test_artifact_refuses_unsafe_names(name: str) -> None:
    with pytest.raises(ValueError, match="artifact name"):
        Artifact(name, "text/plain", b"")


def test_artifact_refuses_bad_media_types_content_and_retention() -> None:
    for media_type in ("", "text/plain\nX-Injected: 1", "text/plain\r"):
        with pytest.raises(ValueError, match="media_type"):
            Artifact("a.txt", media_type, b"")
    with pytest.raises(TypeError, match="media_type"):
        Artifact("a.txt", b"text/plain", b"")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes"):
        Artifact("a.txt", "text/plain", bytearray(b"x"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retention"):
        Artifact("a.txt", "text/plain", b"", retention="temporary")  # type: ignore[arg-type]


def test_artifact_content_is_bounded_at_16_mib() -> None:
    assert ARTIFACT_MAX_BYTES == 16 * 1024 * 1024
    assert Artifact("big.bin", "application/octet-stream", bytes(ARTIFACT_MAX_BYTES)).size == ARTIFACT_MAX_BYTES
    with pytest.raises(ValueError, match="bytes"):
        Artifact("big.bin", "application/octet-stream", bytes(ARTIFACT_MAX_BYTES + 1))


# --- Feedback ------------------------------------------------------------------------------------------------------


def test_feedback_score_is_a_finite_number_kept_as_float() -> None:
    feedback = Feedback(3, {"episodes": [1.0]})
    assert feedback.score == 3.0 and type(feedback.score) is float
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="finite"):
            Feedback(bad)
    for wrong in (True, "1.0", None):
        with pytest.raises(TypeError, match="score"):
            Feedback(wrong)  # type: ignore[arg-type]


def test_feedback_content_is_a_detached_policy_value() -> None:
    content = {"per_episode": [1.0, 2.0]}
    feedback = Feedback(1.0, content)
    content["per_episode"].append(3.0)
    assert feedback.content == {"per_episode": [1.0, 2.0]}
    with pytest.raises(ValueError, match="finite"):
        Feedback(1.0, {"mean": math.nan})


def test_feedback_artifacts_are_artifacts_with_unique_names_and_bounded_in_number() -> None:
    first = Artifact("a.txt", "text/plain", b"1")
    assert Feedback(0.0, None, [first]).artifacts == (first,)
    with pytest.raises(ValueError, match="unique"):
        Feedback(0.0, None, (first, Artifact("a.txt", "text/plain", b"2")))
    with pytest.raises(TypeError, match="Artifact"):
        Feedback(0.0, None, ({"name": "a.txt"},))  # type: ignore[arg-type]
    many = tuple(Artifact(f"f{index}", "text/plain", b"") for index in range(FEEDBACK_MAX_ARTIFACTS + 1))
    with pytest.raises(ValueError, match="artifacts"):
        Feedback(0.0, None, many)
    assert len(Feedback(0.0, None, many[:-1]).artifacts) == FEEDBACK_MAX_ARTIFACTS


# --- Environment values --------------------------------------------------------------------------------------------


def test_episode_spec_seed_is_unsigned_64_bit_and_scenario_a_policy_value() -> None:
    assert EpisodeSpec(U64_MAX).environment_seed == U64_MAX
    assert EpisodeSpec(1, scenario={"map": (1, 2)}).scenario == {"map": (1, 2)}
    for bad in (-1, 2**64, 1.0, True):
        with pytest.raises(ValueError, match="environment_seed"):
            EpisodeSpec(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="carrier"):
        EpisodeSpec(1, scenario={1, 2})  # type: ignore[arg-type]


def test_step_checks_reward_and_flags() -> None:
    step = Step([0.5], 1, terminated=False, truncated=True, metrics={"frame": TensorValue("uint8", (1,), b"\x01")})
    assert (step.reward, step.done) == (1.0, True)
    assert not Step(None, 0.0, terminated=False).done
    for bad in (math.nan, math.inf, True, "1"):
        with pytest.raises(ValueError, match="reward"):
            Step(None, bad, terminated=False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bool"):
        Step(None, 0.0, terminated=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bool"):
        Step(None, 0.0, terminated=False, truncated=None)  # type: ignore[arg-type]


def _transition(reward: float = 1.0, *, done: bool = False) -> Transition:
    return Transition(action=0, step=Step(observation=None, reward=reward, terminated=done))


def test_episode_record_sums_rewards_and_counts_steps() -> None:
    record = EpisodeRecord(EpisodeSpec(1), 2, "start", [_transition(1.5), _transition(2.0, done=True)])
    assert (record.total_reward, record.steps, record.policy_failure, record.initial_observation) == (3.5, 2, None, "start")
    assert type(record.transitions) is tuple
    empty = EpisodeRecord(EpisodeSpec(1), 2, None, (), policy_failure="exception")
    assert (empty.total_reward, type(empty.total_reward), empty.steps) == (0, int, 0)


def test_episode_record_refuses_inconsistent_trajectories() -> None:
    with pytest.raises(ValueError, match="after"):
        EpisodeRecord(EpisodeSpec(1), 2, None, (_transition(done=True), _transition()))
    with pytest.raises(ValueError, match="failure"):
        EpisodeRecord(EpisodeSpec(1), 2, None, (_transition(done=True),), policy_failure="timeout")
    with pytest.raises(ValueError, match="policy_failure"):
        EpisodeRecord(EpisodeSpec(1), 2, None, (), policy_failure="crashed")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Transition"):
        EpisodeRecord(EpisodeSpec(1), 2, None, ((0, None),))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="EpisodeSpec"):
        EpisodeRecord(1, 2, None, ())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="policy_seed"):
        EpisodeRecord(EpisodeSpec(1), -2, None, ())
    for code in ("exception", "timeout", "invalid_action", "protocol_error"):
        assert EpisodeRecord(EpisodeSpec(1), 2, None, (_transition(),), policy_failure=code).policy_failure == code  # type: ignore[arg-type]


def test_invalid_action_carries_no_message() -> None:
    assert str(InvalidAction()) == ""
    with pytest.raises(TypeError):
        InvalidAction("the hidden goal is at (3, 4)")  # type: ignore[call-arg]


def test_episode_summary_separates_completed_from_failed_episodes() -> None:
    assert EpisodeSummary("completed", 2, 5).reward == 2.0
    assert EpisodeSummary("policy_failed", None, 0, "timeout").failure == "timeout"
    with pytest.raises(ValueError, match="reward"):
        EpisodeSummary("completed", math.nan, 5)
    with pytest.raises(ValueError, match="failure"):
        EpisodeSummary("policy_failed", None, 5)
    with pytest.raises(ValueError, match="reward"):
        EpisodeSummary("policy_failed", 1.0, 5, "exception")
    with pytest.raises(ValueError, match="status"):
        EpisodeSummary("aborted", None, 5)  # type: ignore[arg-type]


# --- BenchmarkSpec -------------------------------------------------------------------------------------------------


def _spec(**overrides: object) -> BenchmarkSpec:
    fields: dict[str, object] = {
        "id": "toy/Counter-v1/mean-return-v1",
        "description": "Count to the target.",
        "observation_space": {"type": "integer"},
        "action_space": {"type": "integer", "values": [0, 1]},
        "metadata": {"family": "toy"},
        "max_episode_steps": 5,
        "primary_metric": "mean_return",
        "score_direction": "maximize",
    }
    fields.update(overrides)
    return BenchmarkSpec(**fields)  # type: ignore[arg-type]


def test_benchmark_spec_validates_its_fields() -> None:
    assert _spec().environment_parameters == {}
    for name in ("id", "description", "primary_metric"):
        with pytest.raises(ValueError, match=name):
            _spec(**{name: ""})
    for steps in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_episode_steps"):
            _spec(max_episode_steps=steps)
    with pytest.raises(ValueError, match="score_direction"):
        _spec(score_direction="up")
    with pytest.raises(TypeError, match="metadata"):
        _spec(metadata=None)
    with pytest.raises(ValueError, match="finite"):
        _spec(environment_parameters={"gravity": math.inf})


def test_environment_digest_matches_the_reference_encoding() -> None:
    """The digest EvoPolicyGym 0.3's Crafter package pins in its tests for Crafter's default parameters."""
    parameters = {"area": [64, 64], "view": [9, 9], "image_size": [64, 64], "reward": True, "max_episode_steps": 10000, "include_mp4_feedback": False}
    assert _spec(environment_parameters=parameters).environment_digest == "sha256:9777c328423dee6989889d83b67976b2946ce0b68e2cef7f692ff9ee90dfee55"


def test_environment_digest_ignores_key_order_but_not_types() -> None:
    digest = _spec(environment_parameters={"a": 1, "b": [1, 2]}).environment_digest
    assert _spec(environment_parameters={"b": [1, 2], "a": 1}).environment_digest == digest
    assert _spec(environment_parameters={"a": 1, "b": (1, 2)}).environment_digest != digest
    assert _spec(environment_parameters={"a": 1.0, "b": [1, 2]}).environment_digest != digest
    assert _spec(environment_parameters={"a": True, "b": [1, 2]}).environment_digest != digest


def test_environment_parameters_are_read_only_and_hand_out_copies() -> None:
    spec = _spec(environment_parameters={"layout": ["..", "#."]})
    layout = spec.environment_parameters["layout"]
    layout.append("mutated")  # type: ignore[union-attr]
    assert spec.environment_parameters["layout"] == ["..", "#."]
    with pytest.raises(TypeError):
        spec.environment_parameters["layout"] = []  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.metadata["family"] = "x"  # type: ignore[index]


# --- Program -------------------------------------------------------------------------------------------------------


def _program_dir(root: Path, files: dict[str, str | bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


def test_program_is_a_detached_snapshot_of_its_directory(tmp_path: Path) -> None:
    directory = _program_dir(tmp_path / "p", {"policy.py": "A = 1\n", "lib/helper.py": "B = 2\n", "data.bin": b"\x00\x01"})
    (directory / "__pycache__").mkdir()
    (directory / "__pycache__" / "policy.cpython-311.pyc").write_bytes(b"junk")
    (directory / "lib" / "stale.pyc").write_bytes(b"junk")
    program = Program.from_directory(directory)
    assert program.files == ("data.bin", "lib/helper.py", "policy.py")
    assert (program.file_count, program.total_bytes) == (3, 14)
    assert (program.entrypoint, program.policy_abi) == ("policy.py:make_policy", POLICY_ABI_VERSION)
    (directory / "policy.py").write_text("A = 'changed'\n")
    shutil.rmtree(directory)
    assert program.read_bytes("policy.py") == b"A = 1\n"
    assert str(tmp_path) not in repr(program)
    with pytest.raises(KeyError):
        program.read_bytes("missing.py")
    with pytest.raises(TypeError):
        Program()


def test_program_digest_covers_paths_and_bytes(tmp_path: Path) -> None:
    first = Program.from_directory(_program_dir(tmp_path / "a", {"policy.py": "A = 1\n", "x.txt": "x"}))
    same = Program.from_directory(_program_dir(tmp_path / "b", {"x.txt": "x", "policy.py": "A = 1\n"}))
    renamed = Program.from_directory(_program_dir(tmp_path / "c", {"policy.py": "A = 1\n", "y.txt": "x"}))
    edited = Program.from_directory(_program_dir(tmp_path / "d", {"policy.py": "A = 2\n", "x.txt": "x"}))
    assert first.digest == same.digest and first == same
    assert len({first.digest, renamed.digest, edited.digest}) == 3
    assert first.digest.startswith("sha256:") and len(first.digest) == 71


def test_program_refuses_a_symlink_escaping_its_directory(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("private")
    directory = _program_dir(tmp_path / "p", {"policy.py": "A = 1\n"})
    (directory / "notes.txt").symlink_to(secret)
    with pytest.raises(ProgramSourceError, match="symbolic link"):
        Program.from_directory(directory)
    (directory / "notes.txt").unlink()
    (directory / "sub").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(ProgramSourceError, match="symbolic link"):
        Program.from_directory(directory)


def test_program_refuses_a_symlinked_root_and_special_files(tmp_path: Path) -> None:
    directory = _program_dir(tmp_path / "p", {"policy.py": "A = 1\n"})
    (tmp_path / "link").symlink_to(directory, target_is_directory=True)
    with pytest.raises(ProgramSourceError, match="real directory"):
        Program.from_directory(tmp_path / "link")
    os.mkfifo(directory / "pipe")
    with pytest.raises(ProgramSourceError, match="special file"):
        Program.from_directory(directory)


def test_program_needs_policy_py_and_keeps_within_its_limits(tmp_path: Path) -> None:
    with pytest.raises(ProgramSourceError, match="policy.py"):
        Program.from_directory(_program_dir(tmp_path / "none", {"main.py": ""}))
    with pytest.raises(ProgramSourceError):
        Program.from_directory(tmp_path / "missing")
    directory = _program_dir(tmp_path / "p", {"policy.py": "A = 1\n", "a.txt": "12345", "b.txt": "12345"})
    with pytest.raises(ProgramLimitError, match="files"):
        Program.from_directory(directory, limits=ProgramLimits(max_files=2))
    with pytest.raises(ProgramLimitError, match="bytes"):
        Program.from_directory(directory, limits=ProgramLimits(max_file_bytes=4, max_total_bytes=100))
    with pytest.raises(ProgramLimitError, match="bytes"):
        Program.from_directory(directory, limits=ProgramLimits(max_file_bytes=6, max_total_bytes=15))
    with pytest.raises(ValueError):
        ProgramLimits(max_files=0)


def test_a_refused_program_leaves_no_descriptor_open(tmp_path: Path) -> None:
    linked = _program_dir(tmp_path / "linked", {"policy.py": "A = 1\n", "a/b/c/e.txt": "e", "a/b/d/e.txt": "e"})
    (linked / "a" / "b" / "d" / "link").symlink_to("/etc/passwd")
    big = _program_dir(tmp_path / "big", {"policy.py": "A = 1\n", "a/b/c/big.bin": b"x" * 100, "a/b/d/e.txt": "e"})
    open_before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(ProgramSourceError, match="symbolic link"):
            Program.from_directory(linked)
        with pytest.raises(ProgramLimitError, match="a/b/c/big.bin"):
            Program.from_directory(big, limits=ProgramLimits(max_file_bytes=50, max_total_bytes=1000))
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_program_writes_its_files_into_a_new_directory(tmp_path: Path) -> None:
    program = Program.from_directory(_program_dir(tmp_path / "p", {"policy.py": "A = 1\n", "lib/x.py": "B = 2\n"}))
    program.write_to(tmp_path / "copy")
    assert Program.from_directory(tmp_path / "copy") == program
    with pytest.raises(FileExistsError):
        program.write_to(tmp_path / "copy")


# --- evaluate and check_benchmark, in process ----------------------------------------------------------------------


class _CounterEnvironment:
    """Observations count up from 0; action 1 adds a point; 0 and 1 are the only actions; ends after 3 steps."""

    def __init__(self, episode: EpisodeSpec) -> None:
        self.seed = episode.environment_seed
        self.count = 0
        self.closed = False

    def reset(self) -> object:
        return {"count": 0, "seed_parity": self.seed % 2}

    def step(self, action: object) -> Step:
        if type(action) is not int or action not in (0, 1):
            raise InvalidAction()
        self.count += 1
        return Step({"count": self.count, "seed_parity": self.seed % 2}, float(action), terminated=self.count >= 3, metrics={"action": action})

    def close(self) -> None:
        self.closed = True


class _CounterBenchmark:
    def __init__(self) -> None:
        self.environments: list[_CounterEnvironment] = []

    @property
    def spec(self) -> BenchmarkSpec:
        return _spec(environment_parameters={"steps": 3})

    def episodes(self, split: str, *, seed: int, count: int) -> tuple[EpisodeSpec, ...]:
        offset = {"train": 0, "validation": 1000, "test": 2000}[split]
        return tuple(EpisodeSpec(offset + seed + index) for index in range(count))

    def make_environment(self, episode: EpisodeSpec) -> _CounterEnvironment:
        environment = _CounterEnvironment(episode)
        self.environments.append(environment)
        return environment

    def feedback(self, episodes: object) -> Feedback:
        records = list(episodes)  # type: ignore[call-overload]
        return Feedback(sum(record.total_reward for record in records), {"failures": [record.policy_failure for record in records]})


def _program(tmp_path: Path, source: str, extra: dict[str, str] | None = None) -> Program:
    files: dict[str, str | bytes] = {"policy.py": textwrap.dedent(source)}
    files.update(extra or {})
    return Program.from_directory(_program_dir(tmp_path / "program", files))


def _evaluate(program: Program, benchmark: object, **config: object) -> object:
    return evaluate(program, benchmark, execution=ProcessExecution.unsafe(), config=EvaluationConfig(**config))  # type: ignore[arg-type]


def test_evaluate_runs_a_program_in_process_and_returns_the_benchmarks_feedback(tmp_path: Path) -> None:
    program = _program(
        tmp_path,
        """
        from helpers import choose
        from evopolicygym.policy import PolicyContext

        class Always:
            def __init__(self, context):
                assert context.environment_parameters["steps"] == 3
            def act(self, observation):
                return choose(observation)

        def make_policy(context: PolicyContext):
            return Always(context)
        """,
        {"helpers.py": "def choose(observation):\n    return 1\n"},
    )
    benchmark = _CounterBenchmark()
    result = _evaluate(program, benchmark, episodes=2, seed=5)
    assert result.benchmark_id == "toy/Counter-v1/mean-return-v1"  # type: ignore[attr-defined]
    assert result.program_digest == program.digest  # type: ignore[attr-defined]
    assert result.environment_digest == benchmark.spec.environment_digest  # type: ignore[attr-defined]
    assert result.feedback == Feedback(6.0, {"failures": [None, None]})  # type: ignore[attr-defined]
    assert result.episodes == (EpisodeSummary("completed", 3.0, 3), EpisodeSummary("completed", 3.0, 3))  # type: ignore[attr-defined]
    assert [environment.seed for environment in benchmark.environments] == [1005, 1006]
    assert all(environment.closed for environment in benchmark.environments)
    assert "helpers" not in sys.modules


@pytest.mark.parametrize(
    ("act", "failure"),
    [
        ("raise RuntimeError('policy bug')", "exception"),
        ("raise SystemExit(3)", "exception"),
        ("raise ValueError('bad observation handling')", "protocol_error"),
        ("return 7", "invalid_action"),
        ("return {1, 2}", "protocol_error"),
        ("return float('nan')", "protocol_error"),
        ("import time; time.sleep(0.3); return 1", "timeout"),
    ],
    ids=["raises", "exits", "raises-value-error", "out-of-domain", "set", "nan", "too-slow"],
)
def test_policy_failures_are_episode_outcomes_not_exceptions(tmp_path: Path, act: str, failure: str) -> None:
    program = _program(tmp_path, f"class P:\n    def act(self, observation):\n        {act}\n\ndef make_policy(context):\n    return P()\n")
    result = _evaluate(program, _CounterBenchmark(), episodes=1, episode_timeout_seconds=0.2)
    assert result.episodes == (EpisodeSummary("policy_failed", None, 0, failure),)  # type: ignore[arg-type, attr-defined]
    assert result.feedback.content == {"failures": [failure]}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "source",
    [
        "raise ImportError('missing dependency')\n",
        "make_policy = 3\n",
        "def make_policy(context):\n    raise ValueError('no')\n",
        "def make_policy(context):\n    return object()\n",
    ],
    ids=["import-fails", "not-callable", "make-raises", "no-act"],
)
def test_a_policy_that_cannot_be_made_fails_with_exception(tmp_path: Path, source: str) -> None:
    program = _program(tmp_path, source)
    result = _evaluate(program, _CounterBenchmark(), episodes=1)
    assert result.episodes == (EpisodeSummary("policy_failed", None, 0, "exception"),)  # type: ignore[attr-defined]


def test_a_program_reads_its_data_files_and_imports_its_modules_lazily_during_the_episode(tmp_path: Path) -> None:
    program = _program(
        tmp_path,
        """
        from pathlib import Path

        class P:
            def act(self, observation):
                import lazy_helper
                return lazy_helper.choose(Path("table.txt").read_text())

        def make_policy(context):
            return P()
        """,
        {"lazy_helper.py": "def choose(text):\n    return int(text)\n", "table.txt": "1"},
    )
    directory = os.getcwd()
    environment_directories: list[str] = []

    class Watched(_CounterBenchmark):
        def make_environment(self, episode: EpisodeSpec) -> _CounterEnvironment:
            environment = super().make_environment(episode)
            step = environment.step

            def watched_step(action: object) -> Step:
                environment_directories.append(os.getcwd())
                return step(action)

            environment.step = watched_step  # type: ignore[method-assign]
            return environment

    result = _evaluate(program, Watched(), episodes=1)
    assert result.episodes == (EpisodeSummary("completed", 3.0, 3),)  # type: ignore[attr-defined]
    assert os.getcwd() == directory
    assert environment_directories == [directory] * 3
    assert "lazy_helper" not in sys.modules and "_evopolicygym_submission" not in sys.modules


def test_each_episode_gets_a_freshly_imported_program(tmp_path: Path) -> None:
    program = _program(
        tmp_path,
        """
        CALLS = []

        class P:
            def act(self, observation):
                CALLS.append(observation["count"])
                return 1 if len(CALLS) <= 3 else 0

        def make_policy(context):
            return P()
        """,
    )
    result = _evaluate(program, _CounterBenchmark(), episodes=2)
    assert [episode.reward for episode in result.episodes] == [3.0, 3.0]  # type: ignore[attr-defined]


def test_policy_seeds_are_derived_from_the_plan_seed_and_episode_index() -> None:
    seeds = [derive_policy_seed(7, index) for index in range(3)]
    assert len(set(seeds)) == 3 and all(0 <= seed <= U64_MAX for seed in seeds)
    assert seeds == [derive_policy_seed(7, index) for index in range(3)]
    assert derive_policy_seed(8, 0) != seeds[0]


def test_an_environment_that_never_ends_is_the_benchmarks_fault(tmp_path: Path) -> None:
    class Endless(_CounterBenchmark):
        def make_environment(self, episode: EpisodeSpec) -> _CounterEnvironment:
            environment = super().make_environment(episode)
            environment.step = lambda action: Step(None, 0.0, terminated=False)  # type: ignore[method-assign]
            return environment

    program = _program(tmp_path, "class P:\n    def act(self, o):\n        return 0\n\ndef make_policy(c):\n    return P()\n")
    benchmark = Endless()
    with pytest.raises(EvaluationError, match="max_episode_steps"):
        _evaluate(program, benchmark, episodes=1)
    assert benchmark.environments[0].closed


def test_evaluate_needs_explicit_consent_to_run_unisolated(tmp_path: Path) -> None:
    program = _program(tmp_path, "def make_policy(c):\n    return None\n")
    with pytest.raises(TypeError):
        ProcessExecution()
    with pytest.raises(TypeError, match="ProcessExecution"):
        evaluate(program, _CounterBenchmark(), execution=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="episodes"):
        EvaluationConfig(episodes=0)
    with pytest.raises(ValueError, match="episode_timeout_seconds"):
        EvaluationConfig(episode_timeout_seconds=math.inf)


def test_check_benchmark_passes_a_conforming_benchmark_and_runs_a_policy(tmp_path: Path) -> None:
    benchmark = _CounterBenchmark()
    program = _program(tmp_path, "class P:\n    def act(self, o):\n        return 1\n\ndef make_policy(c):\n    return P()\n")
    report = check_benchmark(benchmark, fixtures=(BenchmarkFixture(EpisodeSpec(3), (1, 0, 1)),), policy=program, episodes=2)
    assert report.benchmark_id == "toy/Counter-v1/mean-return-v1"
    assert report.issues == () and report.passed
    report.raise_for_errors()
    assert isinstance(benchmark, Benchmark)


def test_check_benchmark_reports_nondeterminism_and_broken_episodes() -> None:
    class Drifting(_CounterBenchmark):
        runs = 0

        def make_environment(self, episode: EpisodeSpec) -> _CounterEnvironment:
            Drifting.runs += 1
            return super().make_environment(EpisodeSpec(episode.environment_seed + Drifting.runs))

    report = check_benchmark(Drifting(), fixtures=(BenchmarkFixture(EpisodeSpec(3), (1,)),))
    assert [issue.code for issue in report.issues] == ["environment.nondeterministic"]
    with pytest.raises(BenchmarkError, match="environment.nondeterministic"):
        report.raise_for_errors()

    report = check_benchmark(_CounterBenchmark(), fixtures=(BenchmarkFixture(EpisodeSpec(3), ("bad",)),), policy=lambda context: object())
    assert [issue.code for issue in report.issues] == ["environment.replay", "environment.replay"]
    assert [issue.code for issue in check_benchmark(object()).issues] == ["benchmark.interface"]  # type: ignore[arg-type]


def test_check_benchmark_reports_a_failing_feedback_and_an_episode_that_never_ends() -> None:
    class NoFeedback(_CounterBenchmark):
        def feedback(self, episodes: object) -> Feedback:
            raise RuntimeError("broken")

    class Endless(_CounterBenchmark):
        def make_environment(self, episode: EpisodeSpec) -> _CounterEnvironment:
            environment = super().make_environment(episode)
            environment.step = lambda action: Step(None, 0.0, terminated=False)  # type: ignore[method-assign]
            return environment

    class Always:
        def act(self, observation: object) -> int:
            return 1

    assert [issue.code for issue in check_benchmark(NoFeedback(), policy=lambda context: Always()).issues] == ["benchmark.feedback"]
    report = check_benchmark(Endless(), policy=lambda context: Always())
    assert [issue.code for issue in report.issues] == ["environment.episode"]
    assert "max_episode_steps" in report.issues[0].message


# --- the package ---------------------------------------------------------------------------------------------------


def test_importing_the_policy_abi_loads_nothing_else_of_the_package() -> None:
    code = "import sys, evopolicygym.policy; print(sorted(m for m in sys.modules if m.split('.')[0] == 'evopolicygym'))"
    output = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(COMPAT)}, capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "['evopolicygym', 'evopolicygym.policy']"


def test_the_package_is_stdlib_only_and_parses_as_python_3_11() -> None:
    project = tomllib.loads((COMPAT / "pyproject.toml").read_text())["project"]
    assert (project["name"], project["version"], project["dependencies"]) == ("epg-evopolicygym-compat", "0.3.0", [])
    import evopolicygym

    assert evopolicygym.__version__ == "0.3.0"
    stdlib = sys.stdlib_module_names
    for path in sorted((COMPAT / "evopolicygym").rglob("*.py")):
        tree = ast.parse(path.read_text(), feature_version=(3, 11))
        for node in ast.walk(tree):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in stdlib, f"{path.relative_to(COMPAT)} imports {name}"


# --- the reference's packages --------------------------------------------------------------------------------------

_MIRROR = Path("/work/.mirror/Linzwcs+EvoPolicyGym/repo")
_KNOWN_HEAD = "d279185"
# (package directory under environments/, import name, Benchmark class). The first four need only the standard
# library; the toy-text ones need gymnasium, which this venv has.
_PACKAGES = [
    ("atcoder/ahc054/treants_forest", "treants_forest", "TreantsForestBenchmark"),
    ("atcoder/ahc057/molecules", "molecules", "MoleculesBenchmark"),
    ("atcoder/ahc058/apple_incremental_game", "apple_incremental_game", "AppleIncrementalGameBenchmark"),
    ("codechef/june18/warehouseman", "warehouseman", "WarehousemanBenchmark"),
    ("gymnasium/toy_text/taxi", "taxi", "TaxiBenchmark"),
    ("gymnasium/toy_text/frozen_lake", "frozen_lake", "FrozenLakeBenchmark"),
    ("gymnasium/toy_text/cliff_walking", "cliff_walking", "CliffWalkingBenchmark"),
    ("gymnasium/toy_text/blackjack", "blackjack", "BlackjackBenchmark"),
]


class _Checkout:
    """Read access to a checkout of the reference repository: a git directory (bare or not) or a plain directory tree."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.plain = (root / "environments").is_dir() and not (root / "HEAD").is_file()

    def _git(self, *args: str) -> bytes:
        return subprocess.run(["git", "-C", str(self.root), *args], capture_output=True, check=True, timeout=120).stdout

    def head(self) -> str:
        return "" if self.plain else self._git("rev-parse", "HEAD").decode().strip()

    def paths(self, under: str) -> list[str]:
        if self.plain:
            return sorted(path.relative_to(self.root).as_posix() for path in (self.root / under).rglob("*") if path.is_file())
        return self._git("ls-tree", "-r", "--name-only", "HEAD", under).decode().split("\n")[:-1]

    def read(self, path: str) -> bytes:
        return (self.root / path).read_bytes() if self.plain else self._git("show", f"HEAD:{path}")

    def extract(self, under: str, destination: Path) -> Path:
        if self.plain:
            shutil.copytree(self.root / under, destination)
        else:
            destination.mkdir(parents=True)
            archive = self._git("archive", "--format=tar", f"HEAD:{under}")
            subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True, timeout=120)
        return destination


@pytest.fixture(scope="module")
def checkout() -> _Checkout:
    named = os.environ.get("EPG_EVOPOLICYGYM_CHECKOUT")
    root = Path(named) if named else _MIRROR
    if not root.is_dir():
        pytest.skip(f"no checkout of EvoPolicyGym: set EPG_EVOPOLICYGYM_CHECKOUT to one (looked for {root})")
    return _Checkout(root)


@pytest.fixture
def isolated_imports(tmp_path: Path) -> Iterator[None]:
    """Undo sys.path changes and drop from sys.modules what was imported from tmp_path (third-party modules stay loaded)."""
    path, modules = list(sys.path), set(sys.modules)
    try:
        yield
    finally:
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path) + os.sep):
                del sys.modules[name]


def _first_syntax_error(source_root: Path) -> str | None:
    for path in sorted(source_root.rglob("*.py")):
        try:
            ast.parse(path.read_bytes())
        except SyntaxError as error:
            return f"{path.relative_to(source_root)} line {error.lineno}"
    return None


def test_the_stdlib_only_packages_are_the_four_listed(checkout: _Checkout) -> None:
    stdlib_only = []
    for path in checkout.paths("environments"):
        if path.endswith("/pyproject.toml") and "/vendor/" not in path:
            dependencies = tomllib.loads(checkout.read(path).decode())["project"].get("dependencies", [])
            if [dependency.split("=")[0] for dependency in dependencies] == ["evopolicygym"]:
                stdlib_only.append(path.removeprefix("environments/").removesuffix("/pyproject.toml"))
    assert stdlib_only == [directory for directory, _, _ in _PACKAGES[:4]]


@pytest.mark.parametrize(("directory", "module", "benchmark_class"), _PACKAGES, ids=[entry[1] for entry in _PACKAGES])
def test_a_reference_package_runs_its_baseline_program_unchanged(
    checkout: _Checkout, isolated_imports: None, tmp_path: Path, directory: str, module: str, benchmark_class: str
) -> None:
    package = checkout.extract(f"environments/{directory}", tmp_path / module)
    error = _first_syntax_error(package / "src")
    if error is not None:
        pytest.skip(f"{directory} needs Python 3.12 syntax ({error}); this is Python {sys.version_info.major}.{sys.version_info.minor}")
    if module in ("taxi", "frozen_lake", "cliff_walking", "blackjack"):
        pytest.importorskip("gymnasium", reason=f"{directory} needs gymnasium")
    sys.path.insert(0, str(package / "src"))
    imported = __import__(module)
    benchmark = getattr(imported, benchmark_class)()
    baseline = imported.baseline_program()

    assert isinstance(benchmark, Benchmark)
    assert type(benchmark.spec) is BenchmarkSpec and benchmark.spec.environment_digest.startswith("sha256:")
    plan = tuple(benchmark.episodes("validation", seed=0, count=2))
    assert plan == tuple(benchmark.episodes("validation", seed=0, count=2))
    assert len(plan) == 2 and all(type(episode) is EpisodeSpec for episode in plan)
    assert type(baseline) is Program and "policy.py" in baseline.files

    result = evaluate(baseline, benchmark, execution=ProcessExecution.unsafe(), config=EvaluationConfig(split="validation", episodes=1, seed=0))
    assert type(result.feedback) is Feedback and math.isfinite(result.feedback.score)
    assert [episode.status for episode in result.episodes] == ["completed"]
    assert result.episodes[0].steps > 0
    assert result.benchmark_id == benchmark.spec.id and result.program_digest == baseline.digest


def test_how_many_baseline_programs_need_python_3_12(checkout: _Checkout) -> None:
    """Every packaged baseline policy.py parsed with the 3.11 grammar; at the known commit, 22 of 64 need 3.12 syntax."""
    policies = [path for path in checkout.paths("environments") if "/programs/" in path and path.endswith("/policy.py")]
    newer = []
    for path in policies:
        try:
            ast.parse(checkout.read(path), feature_version=(3, 11))
        except SyntaxError:
            newer.append(path)
    print(f"{len(newer)} of {len(policies)} baseline policy.py files need Python 3.12+ syntax")
    if checkout.head().startswith(_KNOWN_HEAD):
        assert (len(policies), len(newer)) == (64, 22)
    assert len(policies) > 0
