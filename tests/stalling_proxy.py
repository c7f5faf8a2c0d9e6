"""A TCP proxy on 127.0.0.1 that can stop forwarding without closing anything.

It stands for a network partition the local kernel cannot see: every socket stays open
and keeps acknowledging packets, but no byte goes through any more, in either direction,
and new connections are accepted and then left silent. Loopback only; ``close()`` (or
leaving the ``with`` block) stops every thread and closes every socket.
"""

from __future__ import annotations

import selectors
import socket
import threading
from types import TracebackType


class StallingProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target`` until :meth:`stall` is called."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stalled = threading.Event()
        self._closing = threading.Event()
        self._sockets: list[socket.socket] = [self._listener]
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="stalling-proxy", daemon=True)
        self._thread.start()

    def stall(self) -> None:
        """Stop forwarding; keep every connection open (a silent partition)."""
        self._stalled.set()

    def close(self) -> None:
        """Stop the proxy and close every socket it holds."""
        self._closing.set()
        self._thread.join(timeout=10)
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def __enter__(self) -> StallingProxy:
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, None)
        peers: dict[socket.socket, socket.socket] = {}
        while not self._closing.is_set():
            for key, _ in selector.select(timeout=0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    self._accept(selector, peers)
                elif not self._stalled.is_set():
                    self._forward(sock, peers, selector)
            if self._stalled.is_set():
                # Stop reading: the kernel keeps the connections up, no byte moves.
                for sock in list(peers):
                    selector.unregister(sock)
                    peers.pop(sock)
        selector.close()

    def _accept(self, selector: selectors.BaseSelector, peers: dict[socket.socket, socket.socket]) -> None:
        client, _ = self._listener.accept()
        with self._lock:
            self._sockets.append(client)
        if self._stalled.is_set():
            return  # accepted, and then silence
        server = socket.create_connection(self.target, timeout=10)
        with self._lock:
            self._sockets.append(server)
        peers[client], peers[server] = server, client
        selector.register(client, selectors.EVENT_READ, None)
        selector.register(server, selectors.EVENT_READ, None)

    def _forward(
        self, sock: socket.socket, peers: dict[socket.socket, socket.socket], selector: selectors.BaseSelector
    ) -> None:
        other = peers.get(sock)
        if other is None:
            return
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if data:
            other.sendall(data)
            return
        for end in (sock, other):  # one side closed: close the pair, as a real path would
            selector.unregister(end)
            peers.pop(end, None)
            end.close()
