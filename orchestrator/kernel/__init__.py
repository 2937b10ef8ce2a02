"""The pure kernel: Programs, codes, Episode outcomes. Imports no Docker, gRPC, protobuf, typer or rich."""
