"""The mirror between the kernel's RejectionCode codes, the proto ErrorCode and gRPC status codes."""

from __future__ import annotations

import grpc

from epg.v1 import host_api_pb2 as pb
from orchestrator.kernel.rejections import RejectionCode

ERROR_METADATA_KEY = "epg-error-code"

PROTO_CODES: dict[RejectionCode, int] = {
    RejectionCode.UNAUTHENTICATED: pb.ERROR_CODE_UNAUTHENTICATED,
    RejectionCode.INVALID_SELECTOR: pb.ERROR_CODE_INVALID_SELECTOR,
    RejectionCode.INDEX_OUT_OF_RANGE: pb.ERROR_CODE_INDEX_OUT_OF_RANGE,
    RejectionCode.TOO_MANY_EPISODES: pb.ERROR_CODE_TOO_MANY_EPISODES,
    RejectionCode.BUDGET_EXHAUSTED: pb.ERROR_CODE_BUDGET_EXHAUSTED,
    RejectionCode.SUBMISSIONS_EXHAUSTED: pb.ERROR_CODE_SUBMISSIONS_EXHAUSTED,
    RejectionCode.INVALID_PROGRAM: pb.ERROR_CODE_INVALID_PROGRAM,
    RejectionCode.UNKNOWN_SUBMISSION: pb.ERROR_CODE_UNKNOWN_SUBMISSION,
    RejectionCode.DUPLICATE_CANDIDATE: pb.ERROR_CODE_DUPLICATE_CANDIDATE,
    RejectionCode.TOO_MANY_CANDIDATES: pb.ERROR_CODE_TOO_MANY_CANDIDATES,
    RejectionCode.NO_CANDIDATES: pb.ERROR_CODE_NO_CANDIDATES,
    RejectionCode.FINISH_NOT_ALLOWED: pb.ERROR_CODE_FINISH_NOT_ALLOWED,
    RejectionCode.ALREADY_FINISHED: pb.ERROR_CODE_ALREADY_FINISHED,
    RejectionCode.BUSY: pb.ERROR_CODE_BUSY,
    RejectionCode.INTERNAL: pb.ERROR_CODE_INTERNAL,
    RejectionCode.REQUEST_TOO_LARGE: pb.ERROR_CODE_REQUEST_TOO_LARGE,
    RejectionCode.MALFORMED_REQUEST: pb.ERROR_CODE_MALFORMED_REQUEST,
    RejectionCode.UNKNOWN_METHOD: pb.ERROR_CODE_UNKNOWN_METHOD,
    RejectionCode.SESSION_CLOSED: pb.ERROR_CODE_SESSION_CLOSED,
}

GRPC_STATUS: dict[RejectionCode, grpc.StatusCode] = {
    RejectionCode.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    RejectionCode.INVALID_SELECTOR: grpc.StatusCode.INVALID_ARGUMENT,
    RejectionCode.INDEX_OUT_OF_RANGE: grpc.StatusCode.OUT_OF_RANGE,
    RejectionCode.TOO_MANY_EPISODES: grpc.StatusCode.INVALID_ARGUMENT,
    RejectionCode.BUDGET_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    RejectionCode.SUBMISSIONS_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    RejectionCode.INVALID_PROGRAM: grpc.StatusCode.INVALID_ARGUMENT,
    RejectionCode.UNKNOWN_SUBMISSION: grpc.StatusCode.NOT_FOUND,
    RejectionCode.DUPLICATE_CANDIDATE: grpc.StatusCode.INVALID_ARGUMENT,
    RejectionCode.TOO_MANY_CANDIDATES: grpc.StatusCode.INVALID_ARGUMENT,
    RejectionCode.NO_CANDIDATES: grpc.StatusCode.INVALID_ARGUMENT,
    RejectionCode.FINISH_NOT_ALLOWED: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.ALREADY_FINISHED: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.BUSY: grpc.StatusCode.UNAVAILABLE,
    RejectionCode.INTERNAL: grpc.StatusCode.INTERNAL,
    # The status gRPC itself answers for a message over its transport cap, so both refusals look alike.
    RejectionCode.REQUEST_TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
    RejectionCode.MALFORMED_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    RejectionCode.UNKNOWN_METHOD: grpc.StatusCode.UNIMPLEMENTED,
    RejectionCode.SESSION_CLOSED: grpc.StatusCode.FAILED_PRECONDITION,
}
