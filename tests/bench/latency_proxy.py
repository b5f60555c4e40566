"""A TCP proxy on loopback that makes every request wait before it reaches the server, as an
object store's first-byte latency does (S3: tens of milliseconds), so a benchmark against a
loopback S3 server measures the transfer design (concurrency, request count), not only Python.

Each connection is relayed both ways by two threads; when the client starts sending after
the server has answered (a new request on a kept-alive connection) or sends first, the
relay waits ``delay`` seconds before passing it on. A request body that arrives in several
pieces waits once.

Both legs disable Nagle's algorithm (``TCP_NODELAY``), as HTTP servers and clients do: with
it, an answer relayed in two pieces (headers, then body) holds the second piece until the
first is acknowledged, and the receiver delays that acknowledgement by up to 40 ms, so
every request would wait about 40 ms more than ``delay``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

__all__ = ["delaying_proxy"]


class _Connection:
    def __init__(self, client: socket.socket, upstream: socket.socket, delay: float) -> None:
        self.client, self.upstream, self.delay = client, upstream, delay
        self.answered = True  # the next client bytes start a request
        self.lock = threading.Lock()

    def to_server(self) -> None:
        stop = threading.Event()
        while not stop.is_set():
            data = self.client.recv(65536)
            if not data:
                break
            with self.lock:
                waits, self.answered = self.answered, False
            if waits:
                stop.wait(self.delay)
            self.upstream.sendall(data)
        self._close()

    def to_client(self) -> None:
        while True:
            data = self.upstream.recv(65536)
            if not data:
                break
            with self.lock:
                self.answered = True
            self.client.sendall(data)
        self._close()

    def _close(self) -> None:
        for s in (self.client, self.upstream):
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _serve(listener: socket.socket, target: tuple[str, int], delay: float) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return  # closed: the proxy is stopping
        try:
            upstream = socket.create_connection(target)
        except OSError:
            client.close()
            continue
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(client, upstream, delay)
        for pump in (conn.to_server, conn.to_client):
            threading.Thread(target=_guard, args=(pump,), daemon=True).start()


def _guard(pump: Callable[[], None]) -> None:
    with suppress(OSError):  # a peer went away mid-relay: the other side sees it close
        pump()


@contextmanager
def delaying_proxy(target: str, delay: float) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` in front of ``target`` (``http://host:port``), every request
    delayed by ``delay`` seconds, for the duration of the block."""
    host, port = target.removeprefix("http://").rsplit(":", 1)
    listener = socket.create_server(("127.0.0.1", 0), backlog=256)
    threading.Thread(target=_serve, args=(listener, (host, int(port)), delay), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
