"""The mirror between the kernel's SessionError codes, the proto ErrorCode and gRPC status codes."""

from __future__ import annotations

import grpc

from epg.v1 import host_api_pb2 as pb
from orchestrator.kernel.errors import SessionError

ERROR_METADATA_KEY = "epg-error-code"

PROTO_CODES: dict[SessionError, int] = {
    SessionError.UNAUTHENTICATED: pb.ERROR_CODE_UNAUTHENTICATED,
    SessionError.INVALID_SELECTOR: pb.ERROR_CODE_INVALID_SELECTOR,
    SessionError.INDEX_OUT_OF_RANGE: pb.ERROR_CODE_INDEX_OUT_OF_RANGE,
    SessionError.TOO_MANY_EPISODES: pb.ERROR_CODE_TOO_MANY_EPISODES,
    SessionError.BUDGET_EXHAUSTED: pb.ERROR_CODE_BUDGET_EXHAUSTED,
    SessionError.SUBMISSIONS_EXHAUSTED: pb.ERROR_CODE_SUBMISSIONS_EXHAUSTED,
    SessionError.INVALID_PROGRAM: pb.ERROR_CODE_INVALID_PROGRAM,
    SessionError.UNKNOWN_SUBMISSION: pb.ERROR_CODE_UNKNOWN_SUBMISSION,
    SessionError.DUPLICATE_CANDIDATE: pb.ERROR_CODE_DUPLICATE_CANDIDATE,
    SessionError.TOO_MANY_CANDIDATES: pb.ERROR_CODE_TOO_MANY_CANDIDATES,
    SessionError.NO_CANDIDATES: pb.ERROR_CODE_NO_CANDIDATES,
    SessionError.FINISH_NOT_ALLOWED: pb.ERROR_CODE_FINISH_NOT_ALLOWED,
    SessionError.ALREADY_FINISHED: pb.ERROR_CODE_ALREADY_FINISHED,
    SessionError.BUSY: pb.ERROR_CODE_BUSY,
    SessionError.INTERNAL: pb.ERROR_CODE_INTERNAL,
    SessionError.REQUEST_TOO_LARGE: pb.ERROR_CODE_REQUEST_TOO_LARGE,
    SessionError.MALFORMED_REQUEST: pb.ERROR_CODE_MALFORMED_REQUEST,
    SessionError.UNKNOWN_METHOD: pb.ERROR_CODE_UNKNOWN_METHOD,
    SessionError.SESSION_CLOSED: pb.ERROR_CODE_SESSION_CLOSED,
}

GRPC_STATUS: dict[SessionError, grpc.StatusCode] = {
    SessionError.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    SessionError.INVALID_SELECTOR: grpc.StatusCode.INVALID_ARGUMENT,
    SessionError.INDEX_OUT_OF_RANGE: grpc.StatusCode.OUT_OF_RANGE,
    SessionError.TOO_MANY_EPISODES: grpc.StatusCode.INVALID_ARGUMENT,
    SessionError.BUDGET_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    SessionError.SUBMISSIONS_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    SessionError.INVALID_PROGRAM: grpc.StatusCode.INVALID_ARGUMENT,
    SessionError.UNKNOWN_SUBMISSION: grpc.StatusCode.NOT_FOUND,
    SessionError.DUPLICATE_CANDIDATE: grpc.StatusCode.INVALID_ARGUMENT,
    SessionError.TOO_MANY_CANDIDATES: grpc.StatusCode.INVALID_ARGUMENT,
    SessionError.NO_CANDIDATES: grpc.StatusCode.INVALID_ARGUMENT,
    SessionError.FINISH_NOT_ALLOWED: grpc.StatusCode.FAILED_PRECONDITION,
    SessionError.ALREADY_FINISHED: grpc.StatusCode.FAILED_PRECONDITION,
    SessionError.BUSY: grpc.StatusCode.UNAVAILABLE,
    SessionError.INTERNAL: grpc.StatusCode.INTERNAL,
    # The status gRPC itself answers for a message over its transport cap, so both refusals look alike.
    SessionError.REQUEST_TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
    SessionError.MALFORMED_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    SessionError.UNKNOWN_METHOD: grpc.StatusCode.UNIMPLEMENTED,
    SessionError.SESSION_CLOSED: grpc.StatusCode.FAILED_PRECONDITION,
}
