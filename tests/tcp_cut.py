"""A loopback TCP relay that can be cut and healed: one client's network to ZooKeeper.

While cut it closes every relayed connection and refuses new ones, so the client
sees its connection drop and cannot reconnect, while the server (and every other
client) carries on: a partition between one broker and the metadata store.
"""
from __future__ import annotations

import select
import socket
import threading


class CuttableRelay:
    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, target_port)
        self._listener = socket.create_server((host, 0))
        self.port = self._listener.getsockname()[1]
        self.hosts = f"{host}:{self.port}"
        self._cut = threading.Event()
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            self._spawn(self._pump, client, upstream)

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while not self._cut.is_set():
                ready, _, _ = select.select([a, b], [], [], 0.05)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except OSError:
            pass
        finally:
            a.close()
            b.close()

    def cut(self) -> None:
        self._cut.set()

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed = True
        self._cut.set()
        self._listener.close()
        for t in self._threads:
            t.join(timeout=2)
