"""The Host API servicer: authenticates every call, checks its shape, and hands off to the Run's host.

Every call passes RequestGuard first, in this order: the bearer token, the
request's size, its parse; then the servicer checks the request's shape. So
each refusal an agent can cause carries an `epg-error-code`, including those
gRPC would otherwise answer itself (an unknown method, a call without a
request message, bytes that are no request message), and a caller without
the token learns only `unauthenticated`: the guard reads no request of such
a caller.

One refusal stays gRPC's own: an authenticated call whose message is over
the transport cap (TRANSPORT_MAX_RECEIVE_BYTES) is refused by gRPC as it
reads the message, with RESOURCE_EXHAUSTED and no `epg-error-code`. The
session client reads that status as `request_too_large`.

Who may call at all is decided before that, by the socket file: serve()
makes it 0600, owned by the agent's uid (or the Host's own), so another user
of the machine cannot even connect; root still can. And at most
MAX_CONCURRENT_RPCS calls are under way at once (running or waiting for a
worker): gRPC refuses any call beyond them with RESOURCE_EXHAUSTED and no
`epg-error-code`, so no number of calls makes the server queue without bound.

gRPC threads do no budget logic: the RunHost (and its SessionState) owns it.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar, TypeVarTuple

import grpc
from google.protobuf.message import DecodeError

from epg.v1 import host_api_pb2 as pb
from epg.v1 import host_api_pb2_grpc as pb_grpc
from orchestrator.hostapi.errors import ERROR_METADATA_KEY, GRPC_STATUS
from orchestrator.kernel.ports import SubmitReceipt
from orchestrator.kernel.rejections import RejectionCode, RequestRejected
from orchestrator.kernel.session import StatusView

log = logging.getLogger(__name__)
Args = TypeVarTuple("Args")
Result = TypeVar("Result")

MAX_REQUEST_BYTES = 64 * 1024
# gRPC's own limit, above MAX_REQUEST_BYTES so that the typed check normally answers; it bounds what one call buffers.
TRANSPORT_MAX_RECEIVE_BYTES = 1024 * 1024
MAX_SELECTOR_CHARS = 16 * 1024
MAX_CANDIDATES_LISTED = 64
WORKERS = 8
# Calls running or waiting for a worker, at most; each may buffer up to TRANSPORT_MAX_RECEIVE_BYTES.
MAX_CONCURRENT_RPCS = 16
HOST_API_METHODS = tuple(m.name for m in pb.DESCRIPTOR.services_by_name["HostApi"].methods)


class RunHostPort(Protocol):
    """What the servicer needs from the Run: each method raises RequestRejected on refusal."""

    def task(self) -> tuple[str, str, dict[str, Any]]:
        """(instructions, benchmark id, public spec)."""

    def status(self) -> StatusView: ...

    def feedback_path(self, submission_id: str) -> str: ...

    def max_candidates(self) -> int: ...

    def submit(self, selector: str) -> SubmitReceipt: ...

    def finish(self, candidates: list[str]) -> tuple[str, ...]: ...


class RequestGuard(grpc.ServerInterceptor):
    """Authenticates every call, then bounds and parses its request, before the servicer sees it.

    Each registered method handler is replaced by one that takes the request
    as a stream of raw bytes, so that gRPC neither parses it nor counts its
    messages: the guard authenticates before it reads anything, then refuses,
    in order, `request_too_large` (over MAX_REQUEST_BYTES) and
    `malformed_request` (no message, or bytes that do not parse as the
    method's request message). A message after the first is ignored, as gRPC
    does for a unary call. An unknown method gets `unknown_method`, also
    after the token check.
    """

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = continuation(handler_call_details)
        # Every Host API method is unary-unary (see host_api.proto): a handler without both parts is none of them.
        if handler is None or handler.unary_unary is None or handler.request_deserializer is None:
            return grpc.stream_unary_rpc_method_handler(self._unknown_method)
        return grpc.stream_unary_rpc_method_handler(
            self._guarded(handler.unary_unary, handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )

    def _guarded(self, behavior: Callable[[Any, grpc.ServicerContext], Any],
                 parse: Callable[[bytes], Any]) -> Callable[[Iterator[bytes], grpc.ServicerContext], Any]:
        def guarded(messages: Iterator[bytes], context: grpc.ServicerContext) -> Any:
            self._authenticate(context)
            raw = next(messages, None)
            if raw is None:
                _abort(context, RequestRejected(RejectionCode.MALFORMED_REQUEST, "the call carried no request message"))
            if len(raw) > MAX_REQUEST_BYTES:
                _abort(context, RequestRejected(
                    RejectionCode.REQUEST_TOO_LARGE, f"the request is {len(raw)} bytes, over the limit of {MAX_REQUEST_BYTES}"))
            try:
                request = parse(raw)
            except DecodeError:
                _abort(context, RequestRejected(
                    RejectionCode.MALFORMED_REQUEST, "the request bytes are not a valid request message of this method"))
            return behavior(request, context)

        return guarded

    def _unknown_method(self, messages: Iterator[bytes], context: grpc.ServicerContext) -> NoReturn:
        self._authenticate(context)
        _abort(context, RequestRejected(
            RejectionCode.UNKNOWN_METHOD, f"no such method: the Host API (epg.v1.HostApi) has {', '.join(HOST_API_METHODS)}"))

    def _authenticate(self, context: grpc.ServicerContext) -> None:
        supplied = dict(context.invocation_metadata()).get("authorization", "")
        if not hmac.compare_digest(supplied if isinstance(supplied, bytes) else supplied.encode(), self._expected):
            _abort(context, RequestRejected(RejectionCode.UNAUTHENTICATED, "missing or wrong bearer token"))


class HostApiServicer(pb_grpc.HostApiServicer):
    """Checks the shape of authenticated, parsed requests and hands off to the Run's host.

    It does not authenticate: serve it only behind RequestGuard, as serve() does.
    """

    def __init__(self, host: RunHostPort) -> None:
        self._host = host

    def _call(self, context: grpc.ServicerContext, function: Callable[[*Args], Result], *args: *Args) -> Result:
        try:
            return function(*args)
        except RequestRejected as rejected:
            _abort(context, rejected)
        except Exception:  # a Host bug must still answer with a code, and be logged
            log.exception("Host API call failed")
            _abort(context, RequestRejected(RejectionCode.INTERNAL, "the Host failed to answer this call"))

    # methods -------------------------------------------------------------------
    def GetTask(self, request: pb.TaskRequest, context: grpc.ServicerContext) -> pb.Task:
        instructions, benchmark_id, spec = self._call(context, self._host.task)
        return pb.Task(instructions=instructions, benchmark_id=benchmark_id, public_spec_json=json.dumps(spec))

    def GetStatus(self, request: pb.StatusRequest, context: grpc.ServicerContext) -> pb.Status:
        status = self._call(context, self._host.status)
        return status_message(status, self._host)

    def Submit(self, request: pb.SubmitRequest, context: grpc.ServicerContext) -> pb.SubmitReceipt:
        if len(request.episodes) > MAX_SELECTOR_CHARS:
            _abort(context, RequestRejected(RejectionCode.INVALID_SELECTOR, f"selector longer than {MAX_SELECTOR_CHARS} characters"))
        result = self._call(context, self._host.submit, request.episodes)
        return pb.SubmitReceipt(
            submission_id=result.submission_id,
            program_digest=result.program_digest,
            score=result.score,
            episodes_used=result.episodes_used,
            episodes_left=result.episodes_left,
            submissions_left=result.submissions_left,
            policy_failures=result.policy_failures,
            feedback_path=result.feedback_path,
        )

    def Finish(self, request: pb.FinishRequest, context: grpc.ServicerContext) -> pb.FinishReceipt:
        if len(request.candidates) > MAX_CANDIDATES_LISTED:
            _abort(context, RequestRejected(RejectionCode.TOO_MANY_CANDIDATES, f"more than {MAX_CANDIDATES_LISTED} candidates listed"))
        candidates = self._call(context, self._host.finish, list(request.candidates))
        return pb.FinishReceipt(candidates=list(candidates))


def status_message(status: StatusView, host: RunHostPort) -> pb.Status:
    return pb.Status(
        episodes_total=status.episodes_total,
        episodes_used=status.episodes_used,
        episodes_left=status.episodes_left,
        submissions_used=status.submissions_used,
        submissions_left=status.submissions_left,
        pool_size=status.pool_size,
        max_episodes_per_submission=status.max_episodes_per_submission or 0,
        finish_policy=str(status.finish_policy),
        max_candidates=host.max_candidates(),
        finished=status.finished,
        candidates=list(status.candidates),
        submissions=[
            pb.SubmissionSummary(
                id=s.id,
                number=s.number,
                program_digest=s.program_digest,
                selector=s.selector,
                state=s.state,
                score=s.score if s.score is not None else 0.0,
                has_score=s.score is not None,
                policy_failures=s.policy_failures or 0,
                feedback_path=host.feedback_path(s.id) if s.state == "completed" else "",
            )
            for s in status.submissions
        ],
    )


def _abort(context: grpc.ServicerContext, rejected: RequestRejected) -> NoReturn:
    context.set_trailing_metadata(((ERROR_METADATA_KEY, rejected.code.value),))
    context.abort(GRPC_STATUS[rejected.code], rejected.message)


def serve(host: RunHostPort, token: str, socket_path: Path, *, owner: tuple[int, int] | None = None,
          workers: int = WORKERS, max_concurrent_rpcs: int = MAX_CONCURRENT_RPCS) -> grpc.Server:
    """Serve the Host API on a Unix socket that only owner's uid (uid, gid) and root can connect to; return the server.

    owner None means the Host's own uid (an agent that runs as the Host's
    user). The socket is bound in a fresh 0700 directory beside socket_path,
    given to owner with mode 0600 and only then renamed to socket_path, so
    no other user can connect at any moment whatever the umask. Raises
    OSError when the socket cannot be made (a path too long for a Unix
    socket, a directory not writable).
    """
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="epg-host-api"),
        interceptors=[RequestGuard(token)],
        options=[("grpc.max_receive_message_length", TRANSPORT_MAX_RECEIVE_BYTES)],
        maximum_concurrent_rpcs=max_concurrent_rpcs,
    )
    pb_grpc.add_HostApiServicer_to_server(HostApiServicer(host), server)
    private = Path(tempfile.mkdtemp(prefix=".", dir=socket_path.parent))  # 0700: nobody else reaches what is bound in it
    directory = os.open(private, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    name = socket_path.name
    try:
        # Bound through the directory's descriptor: a Unix socket's path is limited to 107 bytes, and a Run directory
        # below a deep checkout (or a test's temporary directory) is longer than that.
        try:
            port = server.add_insecure_port(f"unix:/proc/self/fd/{directory}/{name}")
        except RuntimeError as exc:
            raise OSError(f"could not listen on {private / name}: {exc}") from exc
        if port == 0:
            raise OSError(f"could not listen on {private / name}")
        if owner is not None:
            os.chown(name, *owner, dir_fd=directory, follow_symlinks=False)
        os.chmod(f"/proc/self/fd/{directory}/{name}", 0o600)
        os.replace(name, socket_path, src_dir_fd=directory)
    except BaseException:
        server.stop(grace=None)
        raise
    finally:
        for leftover in os.listdir(directory):
            os.unlink(leftover, dir_fd=directory)
        os.close(directory)
        private.rmdir()
    server.start()
    return server
