"""The view's HTTP app (Starlette on uvicorn): one page, its script and style, JSON of the index, a Run and a suite,
Feedback images, and server-sent events that say when to fetch again.

Bound to 127.0.0.1 only. Every request needs the access token: the URL printed at start holds it as `?token=`, which
the app accepts once, swapping it for an HttpOnly, SameSite=Strict cookie (and a redirect to the URL without it);
after that the token counts only in that cookie or an `Authorization: Bearer` header. A request without the token gets
401, one naming another host (DNS rebinding) 403. Every response carries a Content-Security-Policy that
allows this origin alone (no inline script, no other host), `X-Content-Type-Options: nosniff` and
`Referrer-Policy: no-referrer`. The page is read-only: there is no request that writes.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from orchestrator.view import reading

COOKIE = "epg_view_token"
STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"view.js": "text/javascript; charset=utf-8", "view.css": "text/css; charset=utf-8"}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"), (b"cache-control", b"no-store"),
           (b"cross-origin-resource-policy", b"same-origin")]
POLL_SECONDS = 0.5  # how often a live page's files are looked at (stat only)
PING_SECONDS = 15.0
WATCHED = ("index", "run", "suite")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Guard:
    """ASGI middleware: the Host header must name this server, the token must come with the request; every response
    gets the security headers."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: frozenset[str]) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts
        self.url_used = False  # set once a request brought the token in its URL (one event loop: no lock needed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if headers.get("host", "") not in self.hosts:
            await PlainTextResponse("not this host", status_code=403)(scope, receive, with_headers)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        authorised = self._authorised(headers)
        given = query.get("token")
        if given is not None:
            # The URL's token is taken once, by the first browser to open it; that browser goes on with the cookie (and
            # may open the URL again), any other gets 401: a URL seen later on a screen or in a history is spent.
            fresh = not self.url_used and secrets.compare_digest(given.encode(), self.token.encode())
            if authorised or fresh:
                self.url_used = True
                rest = urlencode({k: v for k, v in query.items() if k != "token"})
                response = RedirectResponse(scope["path"] + (f"?{rest}" if rest else ""), status_code=303)
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
                await response(scope, receive, with_headers)
                return
        if not authorised:
            why = ("the URL's token was taken by the browser that opened it first: use that browser, or start epg-orchestrate view "
                   "again for a new URL" if given is not None and self.url_used else
                   "the access token is missing or wrong: open the URL epg-orchestrate view printed")
            await PlainTextResponse(why, status_code=401)(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)

    def _authorised(self, headers: dict[str, str]) -> bool:
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer ") and secrets.compare_digest(bearer[7:].encode(), self.token.encode()):
            return True
        cookie: SimpleCookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except CookieError:  # a malformed Cookie header carries no token
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and secrets.compare_digest(morsel.value.encode(), self.token.encode())


class Documents:
    """The JSON documents of the pages, each kept with the signature of the files it was read from, so a document is read
    again only when its Run or suite changed. The lock guards the dictionary."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._kept: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def get(self, what: str, path: str) -> dict[str, Any]:
        """The document of what ("index", "run", "suite") at path. Raises reading.NotFound."""
        sign = reading.signature(self.root, what, path)
        with self._lock:
            kept = self._kept.get((what, path))
        if kept is not None and sign and kept[0] == sign:
            return kept[1]
        if what == "index":
            document = reading.index(self.root)
        elif what == "run":
            document = reading.run_page(self.root, path)
        else:
            document = reading.suite_page(self.root, path)
        with self._lock:
            if len(self._kept) > 256:
                self._kept.clear()
            self._kept[(what, path)] = (sign, document)
        return document


def create_app(root: Path, *, token: str, port: int, poll_seconds: float = POLL_SECONDS) -> ASGIApp:
    """The ASGI app over root, answering only requests to 127.0.0.1:port or localhost:port that carry token."""
    documents = Documents(root)
    page = (STATIC / "page.html").read_bytes()

    def html(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8")

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return PlainTextResponse("not found", status_code=404)
        return Response((STATIC / name).read_bytes(), media_type=STATIC_FILES[name])

    def api(request: Request) -> Response:
        what = request.path_params["what"]
        if what not in WATCHED:
            return JSONResponse({"error": "not found"}, status_code=404)
        try:
            return JSONResponse(documents.get(what, request.query_params.get("path", ".")))
        except reading.NotFound as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)

    def image(request: Request) -> Response:
        query = request.query_params
        try:
            data, media_type = reading.artifact_image(root, query.get("path", "."), query.get("submission", ""), query.get("name", ""))
        except reading.NotFound as exc:
            return PlainTextResponse(str(exc), status_code=404)
        return Response(data, media_type=media_type, headers={"content-disposition": 'inline; filename="artifact"'})

    async def watch(request: Request) -> Response:
        what, path = request.query_params.get("what", ""), request.query_params.get("path", ".")
        if what not in WATCHED:
            return PlainTextResponse("not found", status_code=404)
        return StreamingResponse(_changes(root, what, path, poll_seconds), media_type="text/event-stream")

    def no_icon(request: Request) -> Response:
        return Response(status_code=204)

    app = Starlette(routes=[
        Route("/favicon.ico", no_icon), Route("/", html), Route("/run", html), Route("/suite", html),
        Route("/static/{name}", static), Route("/api/image", image), Route("/api/watch", watch), Route("/api/{what}", api),
    ])
    return Guard(app, token=token, hosts=frozenset({f"127.0.0.1:{port}", f"localhost:{port}"}))


async def _changes(root: Path, what: str, path: str, poll_seconds: float) -> AsyncIterator[str]:
    """Server-sent events: "change" (its data a counter) whenever the watched files' signature changes, the first at once;
    a comment line every PING_SECONDS otherwise, so a closed page is noticed."""
    last: str | None = None
    count = 0
    quiet_since = time.monotonic()
    yield "retry: 1000\n\n"
    while True:
        sign = await anyio.to_thread.run_sync(reading.signature, root, what, path)
        if sign != last:
            last = sign
            count += 1
            quiet_since = time.monotonic()
            yield f"event: change\ndata: {json.dumps(count)}\n\n"
        elif time.monotonic() - quiet_since > PING_SECONDS:
            quiet_since = time.monotonic()
            yield ": ping\n\n"
        await anyio.sleep(poll_seconds)


def bind(port: int) -> socket.socket:
    """A listening TCP socket on 127.0.0.1:port (0: any free port). Raises OSError (the port is taken)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return sock


def serve(root: Path, port: int, announce: Callable[[str], None]) -> None:
    """Serve the view of root on 127.0.0.1:port until interrupted; announce gets the URL (with its token) once the port
    is bound. Raises OSError when the port cannot be bound."""
    import uvicorn

    sock = bind(port)
    bound = sock.getsockname()[1]
    token = secrets.token_urlsafe(32)
    app = create_app(root, token=token, port=bound)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    announce(f"http://127.0.0.1:{bound}/?token={token}")
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
