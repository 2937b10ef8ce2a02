"""The kernel's closed code sets and their protobuf mirrors map one to one."""

from __future__ import annotations

from epg.v1 import runner_pb2
from epg_sdk.codes import FailureCode, RunnerOutcome
from epg_sdk.protocol.codes import FAILURES, OUTCOMES, failure_to_proto


def proto_values(enum_name: str) -> dict[str, int]:
    descriptor = runner_pb2.DESCRIPTOR.enum_types_by_name[enum_name]
    return {value.name: value.number for value in descriptor.values if not value.name.endswith("_UNSPECIFIED")}


def test_outcomes_cover_every_proto_runner_outcome_except_unspecified():
    numbers = proto_values("RunnerOutcome")
    assert numbers, "the RunnerOutcome enum has values"
    assert set(OUTCOMES) == set(numbers.values())
    assert runner_pb2.RUNNER_OUTCOME_UNSPECIFIED not in OUTCOMES


def test_outcomes_cover_every_kernel_runner_outcome_exactly_once():
    mapped = list(OUTCOMES.values())
    assert sorted(mapped) == sorted(RunnerOutcome)
    assert len(mapped) == len(set(mapped))


def test_outcome_names_agree_between_proto_and_kernel():
    names = {number: name for name, number in proto_values("RunnerOutcome").items()}
    for number, outcome in OUTCOMES.items():
        assert names[number] == "RUNNER_OUTCOME_" + outcome.name


def test_failures_cover_every_kernel_failure_code():
    assert set(FAILURES) == set(FailureCode)


def test_failures_cover_every_proto_failure_code_except_unspecified_one_to_one():
    numbers = proto_values("FailureCode")
    assert numbers, "the FailureCode enum has values"
    mapped = list(FAILURES.values())
    assert sorted(mapped) == sorted(numbers.values())
    assert len(mapped) == len(set(mapped))
    assert runner_pb2.FAILURE_CODE_UNSPECIFIED not in mapped


def test_failure_names_agree_between_proto_and_kernel():
    names = {number: name for name, number in proto_values("FailureCode").items()}
    for failure, number in FAILURES.items():
        assert names[number] == "FAILURE_CODE_" + failure.name


def test_no_failure_is_sent_as_unspecified():
    assert failure_to_proto(None) == runner_pb2.FAILURE_CODE_UNSPECIFIED
    for failure in FailureCode:
        assert failure_to_proto(failure) == FAILURES[failure]
