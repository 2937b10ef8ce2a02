"""The checked-in sdk/epg/v1 modules and their type stubs are exactly what the protos in proto/epg/v1 generate."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_proto", REPO / "scripts" / "gen-proto.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_protobuf_modules_are_not_stale(tmp_path):
    generated = _generator().generate(tmp_path)
    fresh = {path.name: path.read_bytes() for path in generated}
    package = REPO / "sdk" / "epg" / "v1"
    checked_in = {path.name: path.read_bytes() for path in [*package.glob("*.py"), *package.glob("*.pyi")]}
    assert sorted(fresh) == sorted(checked_in), "run `make proto`"
    stale = [name for name in fresh if fresh[name] != checked_in[name]]
    assert not stale, f"stale generated code {stale}: run `make proto` and commit the result"


def test_every_proto_file_has_generated_code():
    protos = {p.stem for p in (REPO / "proto" / "epg" / "v1").glob("*.proto")}
    modules = {p.name.removesuffix("_pb2.py") for p in (REPO / "sdk" / "epg" / "v1").glob("*_pb2.py")}
    assert protos == modules


def test_every_generated_protobuf_module_has_a_type_stub():
    package = REPO / "sdk" / "epg" / "v1"
    modules = {p.stem for p in package.glob("*_pb2*.py")}
    stubs = {p.stem for p in package.glob("*_pb2*.pyi")}
    assert modules == stubs
    assert {"runner_pb2_grpc", "host_api_pb2_grpc"} <= stubs
