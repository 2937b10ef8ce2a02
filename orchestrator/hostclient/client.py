"""A Host API client for programs inside the agent container.

Imports: the standard library, grpc, protobuf and the generated epg.v1 modules only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from epg.v1 import host_api_pb2 as pb
from epg.v1 import host_api_pb2_grpc as pb_grpc

ERROR_METADATA_KEY = "epg-error-code"
DEFAULT_SOCKET = "/epg/host/api.sock"
# Refusals gRPC answers itself, without an epg-error-code: the Host's transport refuses a request message over its
# cap (1 MiB, far above the Host API's own limit) with RESOURCE_EXHAUSTED before the Host sees it, and so it does a
# call beyond the Host's cap on calls under way, which says so in its details (then the Host is "busy").
UNCODED_REFUSALS = {grpc.StatusCode.RESOURCE_EXHAUSTED: "request_too_large"}
CONCURRENCY_REFUSAL = "Concurrent RPC limit exceeded"


def uncoded_refusal(status: grpc.StatusCode, details: str) -> str:
    """The Host API code of a call gRPC refused itself: busy, request_too_large, or the gRPC status in lower case."""
    if status is grpc.StatusCode.RESOURCE_EXHAUSTED and CONCURRENCY_REFUSAL in details:
        return "busy"
    return UNCODED_REFUSALS.get(status) or status.name.lower()


@dataclass(frozen=True, slots=True, kw_only=True)
class HostApiError(Exception):
    """A refused call: code is one of the Host API's error codes (e.g. "budget_exhausted").

    When the call failed without reaching the Host (no socket, a deadline), code is the gRPC status
    in lower case (e.g. "unavailable", "deadline_exceeded").
    """

    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class SessionClient:
    """Calls the Host API with the Run's bearer token. Every method raises HostApiError when refused."""

    def __init__(self, socket_path: str | None = None, token: str | None = None, timeout_s: float = 3600.0) -> None:
        path = socket_path or os.environ.get("EPG_HOST_API", DEFAULT_SOCKET)
        self._token = token if token is not None else os.environ.get("EPG_SESSION_TOKEN", "")
        self._channel = grpc.insecure_channel(f"unix:{path}")
        self._stub = pb_grpc.HostApiStub(self._channel)
        self._timeout = timeout_s

    def close(self) -> None:
        self._channel.close()

    def _invoke(self, method: str, request: Any) -> dict[str, Any]:
        metadata = (("authorization", f"Bearer {self._token}"),)
        try:
            response = getattr(self._stub, method)(request, metadata=metadata, timeout=self._timeout)
        except grpc.RpcError as exc:
            # grpc's stubs say a trailing value is bytes; only a key ending in -bin carries bytes, ours a str.
            trailing: dict[str, str | bytes] = {item.key: item.value for item in exc.trailing_metadata() or ()}
            value = trailing.get(ERROR_METADATA_KEY)
            code = (value.decode() if isinstance(value, bytes) else value) or uncoded_refusal(exc.code(), exc.details() or "")
            raise HostApiError(code=code, message=exc.details() or "") from None
        return MessageToDict(response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)

    def task(self) -> dict[str, Any]:
        result = self._invoke("GetTask", pb.TaskRequest())
        result["public_spec"] = json.loads(result.pop("public_spec_json") or "{}")
        return result

    def status(self) -> dict[str, Any]:
        return self._invoke("GetStatus", pb.StatusRequest())

    def submit(self, episodes: str) -> dict[str, Any]:
        return self._invoke("Submit", pb.SubmitRequest(episodes=episodes))

    def finish(self, candidates: list[str]) -> dict[str, Any]:
        return self._invoke("Finish", pb.FinishRequest(candidates=candidates))


def finish_and_report(client: SessionClient, candidates: list[str]) -> int:
    """Finish with candidates, print the receipt or the refusal; return an exit status."""
    try:
        print(json.dumps(client.finish(candidates)), flush=True)
    except HostApiError as exc:
        print(f"finish refused: {exc}", flush=True)
        return 1
    return 0
