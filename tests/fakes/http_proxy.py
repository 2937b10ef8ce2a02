"""A small HTTP proxy for tests: forwards absolute-URI requests and tunnels CONNECT, to loopback targets only.

Every request it handles is appended to `Proxy.seen` as (method, target), so a
test can tell that traffic went through it. Standard library only.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Proxy(ThreadingHTTPServer):
    """Serve with `serve_forever()` in a thread; `url` is what HTTP(S)_PROXY should say."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def note(self, method: str, target: str) -> None:
        with self._lock:
            self.seen.append((method, target))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Proxy

    def do_CONNECT(self) -> None:
        self.server.note("CONNECT", self.path)
        host, _, port = self.path.rpartition(":")
        if host.strip("[]") not in _LOOPBACK:
            self.send_error(403, "this proxy reaches loopback only")
            return
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
        except OSError:
            self.send_error(502)
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        _tunnel(self.connection, upstream)

    def _forward(self) -> None:
        self.server.note(self.command, self.path)
        target = urlsplit(self.path)
        if target.scheme != "http" or target.hostname not in _LOOPBACK:
            self.send_error(403, "this proxy forwards http:// to loopback only")
            return
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "connection", "keep-alive")}
        connection = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=30)
        try:
            connection.request(self.command, target.path + (f"?{target.query}" if target.query else ""), body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except OSError:
            self.send_error(502)
            return
        finally:
            connection.close()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _forward

    def log_message(self, *args) -> None:
        pass


def _tunnel(client: socket.socket, upstream: socket.socket) -> None:
    sockets = [client, upstream]
    try:
        while True:
            readable, _, _ = select.select(sockets, [], [], 30)
            if not readable:
                return
            for source in readable:
                data = source.recv(65536)
                if not data:
                    return
                (upstream if source is client else client).sendall(data)
    except OSError:
        return
    finally:
        upstream.close()
