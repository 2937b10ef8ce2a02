"""Generate the Python protobuf and gRPC modules of proto/epg/v1, and their type stubs, into a directory.

Usage: python scripts/gen-proto.py [OUT_DIR]   (default: sdk/, the SDK distribution,
which places the modules in the `epg.v1` package).

protoc writes the modules (`*_pb2.py`, `*_pb2_grpc.py`); mypy-protobuf's two protoc plugins
(the `dev` extra) write a stub beside each (`*_pb2.pyi`, `*_pb2_grpc.pyi`), so the type checker
sees every message field, enum value and gRPC method of the protocol.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
SDK_ROOT = ROOT / "sdk"
PROTO_ROOT = ROOT / "proto"
GRPC_SERVICES = {"runner.proto", "host_api.proto"}
STUB_PLUGINS = ("protoc-gen-mypy", "protoc-gen-mypy_grpc")


def _plugin(name: str) -> Path:
    """The path of mypy-protobuf's protoc plugin `name`: beside this interpreter, else on PATH.

    Raises SystemExit naming the extra to install when mypy-protobuf is not installed.
    """
    beside = Path(sys.executable).parent / name
    found = beside if beside.is_file() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: install mypy-protobuf (the orchestrator's `dev` extra)")
    return Path(found)


def generate(out_dir: Path) -> list[Path]:
    """Write the generated modules and their stubs below out_dir; return the written paths.

    Raises SystemExit when protoc fails or mypy-protobuf is missing.
    """
    protos = sorted((PROTO_ROOT / "epg" / "v1").glob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    plugins = [f"--plugin={name}={_plugin(name)}" for name in STUB_PLUGINS]
    for proto in protos:
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", *plugins, f"--python_out={out_dir}", f"--mypy_out={out_dir}"]
        if proto.name in GRPC_SERVICES:
            args += [f"--grpc_python_out={out_dir}", f"--mypy_grpc_out={out_dir}"]
        args.append(str(proto.relative_to(PROTO_ROOT)))
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {proto}")
    package = out_dir / "epg" / "v1"
    for init in (out_dir / "epg" / "__init__.py", package / "__init__.py"):
        if not init.exists():
            init.write_text('"""Generated protobuf modules of the epg.v1 protocol."""\n')
    return sorted([*package.glob("*.py"), *package.glob("*.pyi")])


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else SDK_ROOT
    for path in generate(target):
        print(path)
