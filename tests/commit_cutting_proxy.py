"""A TCP proxy on 127.0.0.1 in front of PostgreSQL that can lose the answer to a COMMIT.

Armed, it forwards the client's ``COMMIT`` to the server, which commits, and then closes
the client's connection instead of forwarding the server's ``CommandComplete`` for it:
the client sees its connection break during ``COMMIT`` although the write landed (as
when the primary fails right after committing, or the network drops the reply).
"""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from types import TracebackType

_COMMIT_DONE = b"C\x00\x00\x00\x0bCOMMIT\x00"  # CommandComplete "COMMIT"


class CommitCuttingProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; :meth:`arm` loses the next COMMIT's answer."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._armed = threading.Event()
        self.cut = threading.Event()
        self._closing = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self) -> None:
        """Lose the answer to the next ``COMMIT`` the server sends back."""
        self.cut.clear()
        self._armed.set()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, from_server: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if from_server and self._armed.is_set() and _COMMIT_DONE in data:
                    self._armed.clear()
                    self.cut.set()
                    break  # the server committed; the client never hears it
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with suppress(OSError):  # the other direction may have closed it already
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._closing = True
        self._listener.close()
        for sock in self._sockets:
            sock.close()

    def __enter__(self) -> CommitCuttingProxy:
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()
