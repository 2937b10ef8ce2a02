"""Generate the Python protobuf and gRPC modules of proto/epg/v1 into a directory.

Usage: python scripts/gen-proto.py [OUT_DIR]   (default: sdk/, the SDK distribution,
which places the modules in the `epg.v1` package).
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
SDK_ROOT = ROOT / "sdk"
PROTO_ROOT = ROOT / "proto"
GRPC_SERVICES = {"runner.proto", "host_api.proto"}


def generate(out_dir: Path) -> list[Path]:
    """Write the generated modules below out_dir; return the written paths."""
    protos = sorted((PROTO_ROOT / "epg" / "v1").glob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    for proto in protos:
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={out_dir}"]
        if proto.name in GRPC_SERVICES:
            args.append(f"--grpc_python_out={out_dir}")
        args.append(str(proto.relative_to(PROTO_ROOT)))
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {proto}")
    package = out_dir / "epg" / "v1"
    for init in (out_dir / "epg" / "__init__.py", package / "__init__.py"):
        if not init.exists():
            init.write_text('"""Generated protobuf modules of the epg.v1 protocol."""\n')
    return sorted(package.glob("*.py"))


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else SDK_ROOT
    for path in generate(target):
        print(path)
