"""A fake Kubernetes API server on loopback, for tests only: what the Kubernetes backend uses, and no more.

Serves Pods (create, get, list, watch, delete, log, exec over the v4 channel
protocol), NetworkPolicies (create, list, delete) and Leases (create, get,
list, merge patch, delete) of any namespace, with equality label selectors and
the metadata.name field selector. Its kubelet (fake_kubelet.py) runs each Pod's
containers as local Docker containers with the hardened Docker spec, and is
told the server's loopback address as the `kubernetes` Service's. Nothing here
is a product feature.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

_POD_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?(?:/(exec|log))?$")
_NETPOL_PATH = re.compile(r"^/apis/networking\.k8s\.io/v1/namespaces/([^/]+)/networkpolicies(?:/([^/]+))?$")
_LEASE_PATH = re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?$")
_API_VERSIONS = {"Pod": "v1", "NetworkPolicy": "networking.k8s.io/v1", "Lease": "coordination.k8s.io/v1"}
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _matches(obj: dict[str, Any], label_selector: str, field_selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, label_selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    for term in filter(None, field_selector.split(",")):
        key, _, value = term.partition("=")
        if key != "metadata.name" or obj["metadata"]["name"] != value:
            return False
    return True


class Store:
    """The objects and the event log; the condition guards both, and watchers wait on it."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, namespace, name) -> object
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []  # (resourceVersion, kind, type, object)
        self.version = 0

    def _emit_locked(self, kind: str, kind_type: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.events.append((self.version, kind, kind_type, json.loads(json.dumps(obj))))
        self.condition.notify_all()

    def add(self, kind: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Store a new object; None when the name is taken."""
        meta = obj["metadata"]
        key = (kind, meta["namespace"], meta["name"])
        with self.condition:
            if key in self.objects:
                return None
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now())
            self.objects[key] = obj
            self._emit_locked(kind, "ADDED", obj)
            return json.loads(json.dumps(obj))

    def update(self, kind: str, namespace: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        with self.condition:
            obj = self.objects.get((kind, namespace, name))
            if obj is not None:
                change(obj)
                self._emit_locked(kind, "MODIFIED", obj)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.condition:
            obj = self.objects.get((kind, namespace, name))
            return None if obj is None else json.loads(json.dumps(obj))

    def remove(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.condition:
            obj = self.objects.pop((kind, namespace, name), None)
            if obj is not None:
                self._emit_locked(kind, "DELETED", obj)
            return obj

    def select(self, kind: str, namespace: str, labels: str, fields: str) -> tuple[int, list[dict[str, Any]]]:
        with self.condition:
            items = [json.loads(json.dumps(o)) for (k, ns, _), o in self.objects.items()
                     if k == kind and ns == namespace and _matches(o, labels, fields)]
            return self.version, items

    def all_objects(self) -> list[dict[str, Any]]:
        with self.condition:
            return [json.loads(json.dumps(o)) for o in self.objects.values()]


class FakeKubeApi:
    """The server; kubelet is told of every created and deleted Pod (create_pod(pod), delete_pod(pod)) and serves exec/log."""

    def __init__(self, kubelet: Any) -> None:
        self.store = Store()
        self.kubelet = kubelet
        kubelet.attach(self.store)
        self.requests: list[tuple[str, str]] = []  # (method, path): what the backend asked, for assertions
        api = self

        class Handler(_Handler):
            server_api = api

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-kube-api", daemon=True)
        self._thread.start()
        kubelet.service_address = ("127.0.0.1", self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, path: Path, namespace: str) -> Path:
        """A kubeconfig whose only context, "fake", points at this server."""
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
        }))
        return path

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.kubelet.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_api: FakeKubeApi

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # plumbing ----------------------------------------------------------------

    def _send_json(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str) -> None:
        self._send_json(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": message, "reason": reason, "code": code})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _route(self) -> tuple[str, str, str | None, str | None, dict[str, list[str]]] | None:
        parsed = urlparse(self.path)
        query = parse_qs(parsed.query)
        self.server_api.requests.append((self.command, parsed.path))
        if match := _POD_PATH.match(parsed.path):
            return "Pod", match.group(1), match.group(2), match.group(3), query
        if match := _NETPOL_PATH.match(parsed.path):
            return "NetworkPolicy", match.group(1), match.group(2), None, query
        if match := _LEASE_PATH.match(parsed.path):
            return "Lease", match.group(1), match.group(2), None, query
        self._status(404, "NotFound", f"the fake serves no {parsed.path}")
        return None

    # verbs -------------------------------------------------------------------

    def do_POST(self) -> None:
        route = self._route()
        if route is None:
            return
        kind, namespace, name, sub, _ = route
        if name is not None:
            return self._status(405, "MethodNotAllowed", "POST to a collection only")
        obj = self._body()
        obj["metadata"]["namespace"] = namespace
        if kind == "Pod":
            obj["status"] = {"phase": "Pending"}
        stored = self.server_api.store.add(kind, obj)
        if stored is None:
            return self._status(409, "AlreadyExists", f"{kind} {obj['metadata']['name']} already exists")
        if kind == "Pod":
            self.server_api.kubelet.create_pod(stored)
        self._send_json(201, stored)

    def do_GET(self) -> None:
        route = self._route()
        if route is None:
            return
        kind, namespace, name, sub, query = route
        store = self.server_api.store
        if sub == "exec":
            return self._exec(namespace, name, query)
        if sub == "log":
            text = self.server_api.kubelet.logs(namespace, name, query.get("container", [""])[0], int(query.get("tailLines", ["200"])[0]))
            if text is None:
                return self._status(404, "NotFound", f"pod {name} not found")
            data = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if name is not None:
            obj = store.get(kind, namespace, name)
            return self._send_json(200, obj) if obj else self._status(404, "NotFound", f"{kind} {name} not found")
        labels, fields = query.get("labelSelector", [""])[0], query.get("fieldSelector", [""])[0]
        if query.get("watch", ["false"])[0] in ("true", "True", "1"):
            return self._watch(kind, namespace, labels, fields, float(query.get("timeoutSeconds", ["30"])[0]))
        version, items = store.select(kind, namespace, labels, fields)
        self._send_json(200, {"apiVersion": _API_VERSIONS[kind], "kind": f"{kind}List",
                              "metadata": {"resourceVersion": str(version)}, "items": items})

    def do_PATCH(self) -> None:
        """A merge patch (RFC 7386) of one Lease, whatever the Content-Type says."""
        route = self._route()
        if route is None:
            return
        kind, namespace, name, _, _ = route
        if kind != "Lease" or name is None:
            return self._status(405, "MethodNotAllowed", "the fake patches single Leases only")
        patch = self._body()
        if self.server_api.store.get(kind, namespace, name) is None:
            return self._status(404, "NotFound", f"{kind} {name} not found")
        self.server_api.store.update(kind, namespace, name, lambda obj: _merge(obj, patch))
        self._send_json(200, self.server_api.store.get(kind, namespace, name))

    def do_DELETE(self) -> None:
        route = self._route()
        if route is None:
            return
        kind, namespace, name, _, _ = route
        if name is None:
            return self._status(405, "MethodNotAllowed", "the fake deletes single objects")
        obj = self.server_api.store.get(kind, namespace, name)
        if obj is None:
            return self._status(404, "NotFound", f"{kind} {name} not found")
        if kind == "Pod":
            self.server_api.kubelet.delete_pod(obj)
        self.server_api.store.remove(kind, namespace, name)
        if kind == "Pod":
            return self._send_json(200, obj)
        self._send_json(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})

    # watch ---------------------------------------------------------------------

    def _watch(self, kind: str, namespace: str, labels: str, fields: str, timeout_s: float) -> None:
        store = self.server_api.store
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        deadline = time.monotonic() + timeout_s
        with store.condition:
            cursor = store.version
            _, current = store.select(kind, namespace, labels, fields)
        try:
            for obj in current:
                self._chunk({"type": "ADDED", "object": obj})
            while True:
                with store.condition:
                    pending = [e for e in store.events if e[0] > cursor]
                    if not pending:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        store.condition.wait(min(remaining, 1.0))
                        continue
                    cursor = pending[-1][0]
                for _, event_kind, event_type, obj in pending:
                    if event_kind == kind and obj["metadata"]["namespace"] == namespace and _matches(obj, labels, fields):
                        self._chunk({"type": event_type, "object": obj})
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the watcher hung up
        self.close_connection = True

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # exec over a websocket (v4.channel.k8s.io) ------------------------------------

    def _exec(self, namespace: str, name: str, query: dict[str, list[str]]) -> None:
        if self.headers.get("Upgrade", "").lower() != "websocket":
            return self._status(400, "BadRequest", "exec needs a websocket upgrade")
        session = self.server_api.kubelet.open_exec(namespace, name, query.get("container", [""])[0], query.get("command", []))
        if session is None:
            return self._status(404, "NotFound", f"pod {name} has no running container to exec in")
        accept = base64.b64encode(hashlib.sha1((self.headers["Sec-WebSocket-Key"] + _WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        send_lock = threading.Lock()

        def send(opcode: int, payload: bytes) -> None:
            header = bytes([0x80 | opcode])
            n = len(payload)
            header += bytes([n]) if n < 126 else (bytes([126]) + struct.pack(">H", n) if n < 65536 else bytes([127]) + struct.pack(">Q", n))
            with send_lock:
                self.connection.sendall(header + payload)

        def inbound() -> None:  # websocket -> the process's stdin
            try:
                while True:
                    frame = _read_frame(self.rfile)
                    if frame is None or frame[0] == 0x8:
                        break
                    opcode, payload = frame
                    if opcode in (0x1, 0x2) and payload[:1] == b"\x00":
                        session.write_stdin(payload[1:])
            except OSError:
                pass
            finally:
                session.close_stdin()

        threading.Thread(target=inbound, daemon=True).start()
        try:
            for channel, data in session.output():
                send(0x2, bytes([channel]) + data)
            code = session.exit_code()
            status = ({"metadata": {}, "status": "Success"} if code == 0 else
                      {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                       "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}})
            send(0x2, b"\x03" + json.dumps(status).encode())
            send(0x8, struct.pack(">H", 1000))
        except OSError:
            try:  # the session broke: tell the client, as an API server closes the stream
                send(0x8, struct.pack(">H", 1011))
            except OSError:
                pass  # the client hung up first
        finally:
            session.close()


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def _read_frame(stream: Any) -> tuple[int, bytes] | None:
    """One client frame (masked, as clients must send them), defragmented by the caller's protocol use; None at EOF."""
    head = stream.read(2)
    if len(head) < 2:
        return None
    opcode, length = head[0] & 0x0F, head[1] & 0x7F
    if length == 126:
        (length,) = struct.unpack(">H", stream.read(2))
    elif length == 127:
        (length,) = struct.unpack(">Q", stream.read(8))
    mask = stream.read(4) if head[1] & 0x80 else b"\x00\x00\x00\x00"
    payload = stream.read(length)
    if len(payload) < length:
        return None
    return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
