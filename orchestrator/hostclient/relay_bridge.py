"""Inside the agent container: a loopback TCP endpoint that pipes each connection to the relay's Unix socket.

A model client configured with e.g. OPENAI_BASE_URL=http://127.0.0.1:PORT/v1
reaches the Host's relay this way, while the container keeps network none.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve_connection(client: socket.socket, relay_socket: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(relay_socket)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listen_port: int, relay_socket: str, ready: threading.Event | None = None) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", listen_port))
    listener.listen(64)
    if ready is not None:
        ready.set()
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_serve_connection, args=(client, relay_socket), daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epg-relay-bridge")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--socket", default="/epg/host/relay.sock")
    args = parser.parse_args(argv)
    serve(args.port, args.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
