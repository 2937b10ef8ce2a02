"""The Benchmark's parameters digest: one canonical identity of its public parameters, taken from the runner or computed
by the Host the same way, recorded with every result, and a resume against other parameters refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from epg.v1 import runner_pb2
from epg_sdk.protocol import values
from orchestrator.kernel.evaluation import Evaluation
from orchestrator.kernel.ports import EvaluationFeedback
from orchestrator.kernel.program import Program, ProgramFile, program_digest
from orchestrator.protocol.runner_messages import benchmark_info
from orchestrator.records.feedback import evaluation_json
from orchestrator.records.models import AssessmentReport, RunManifest, ValidationReport
from orchestrator.run.driver import ParametersChanged, check_parameters

PARAMETERS = {"gravity": 9.8, "size": 3, "name": "pole", "layout": [1, 2], "flags": (True, None)}


def description(parameters, digest: str = "") -> runner_pb2.BenchmarkDescription:
    return runner_pb2.BenchmarkDescription(id="X-v0", primary_metric="return", horizon=10, observation_space=values.encode(None),
                                           action_space=values.encode(None), parameters=values.encode(parameters),
                                           parameters_digest=digest)


def parameters_digest(parameters):
    """The digest of parameters as a policy/v2 runner encodes them (exact values; arrays as our codec's tensors)."""
    try:
        return values.digest(values.encode_exact(parameters))
    except values.ValueCodecError:
        return values.digest(values.encode(parameters))


def test_the_digest_is_canonical_and_tells_types_and_values_apart():
    digest = parameters_digest(PARAMETERS)
    assert digest.startswith("sha256:") and len(digest) == 7 + 64
    assert parameters_digest(dict(reversed(list(PARAMETERS.items())))) == digest  # key order does not matter
    for changed in ({**PARAMETERS, "size": 4}, {**PARAMETERS, "size": 3.0}, {**PARAMETERS, "layout": (1, 2)},
                    {**PARAMETERS, "name": b"pole"}, {**PARAMETERS, "extra": None}):
        assert parameters_digest(changed) != digest
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert parameters_digest({"a": array}) == parameters_digest({"a": array.copy()})
    assert parameters_digest({"a": array}) != parameters_digest({"a": array.reshape(3, 2)})
    assert parameters_digest({"a": array}) != parameters_digest({"a": array.astype(np.float64)})
    with pytest.raises(values.ValueCodecError):
        parameters_digest({"a": object()})


def test_the_host_keeps_the_runners_digest_and_computes_one_when_it_sends_none():
    assert benchmark_info(description(PARAMETERS, "sha256:" + "1" * 64)).parameters_digest == "sha256:" + "1" * 64
    computed = benchmark_info(description(PARAMETERS)).parameters_digest
    assert computed == values.digest(values.encode(PARAMETERS))
    assert computed != benchmark_info(description({**PARAMETERS, "size": 5})).parameters_digest


def test_an_evaluation_result_records_the_parameters_digest():
    info = benchmark_info(description(PARAMETERS))
    files = (ProgramFile(path="policy.py", data=b"def make_policy(c):\n    return None\n"),)
    program = Program(files=files, digest=program_digest(files))
    document = evaluation_json(Evaluation(benchmark=info, program=program, split="test", seed=3,
                                          feedback=EvaluationFeedback(score=1.0, values={}, artifacts={}, episodes=())))
    assert document["parameters_digest"] == info.parameters_digest


def test_validation_and_assessment_reports_and_the_manifest_carry_the_digest():
    digest = parameters_digest(PARAMETERS)
    assert ValidationReport.model_validate({"parameters_digest": digest}).parameters_digest == digest
    assert AssessmentReport.model_validate({"score": 1.0, "episodes": [], "parameters_digest": digest}).parameters_digest == digest
    assert RunManifest.model_validate({"parameters_digest": digest}).parameters_digest == digest


def test_a_resume_against_other_parameters_is_refused_with_both_digests_named(tmp_path: Path):
    recorded, now = parameters_digest(PARAMETERS), parameters_digest({**PARAMETERS, "gravity": 1.6})
    manifest = RunManifest.model_validate({"parameters_digest": recorded})
    with pytest.raises(ParametersChanged) as refused:
        check_parameters(manifest, now, "X-v0", tmp_path)
    assert recorded in str(refused.value) and now in str(refused.value) and "X-v0" in str(refused.value)
    check_parameters(manifest, recorded, "X-v0", tmp_path)  # the same parameters resume
    check_parameters(RunManifest.model_validate({}), now, "X-v0", tmp_path)  # a Run recorded before the digest existed
