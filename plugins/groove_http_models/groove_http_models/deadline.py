"""One deadline for a whole request: connecting, sending, the status line, headers and body.

urllib's ``timeout`` bounds each socket operation, so a server that sends a byte now and
then (or a proxy that trickles) holds a request forever. The handlers here give every
socket operation only what is left of one deadline, set when the request is opened;
past it the operation raises :class:`TimeoutError`, as a plain socket timeout does.
"""

from __future__ import annotations

import functools
import http.client
import io
import math
import socket
import time
import urllib.request
from typing import Any


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the request's deadline passed")
    return left


class _BoundedReader(io.RawIOBase):
    """The socket's reading side; each read gets what is left of the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        # Through the socket's own file, which keeps it open once urllib closes the
        # connection's handle (it does, right after the headers).
        self._raw = sock.makefile("rb", buffering=0)
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        self._sock.settimeout(_left(self._deadline))
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _BoundedSocket:
    """What http.client uses of a connected socket, each operation within the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: Any) -> None:
        self._sock.settimeout(_left(self._deadline))  # sendall's timeout is for all of it
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb") -> io.BufferedReader:
        return io.BufferedReader(_BoundedReader(self._sock, self._deadline))

    def close(self) -> None:
        self._sock.close()


class _BoundedConnection(http.client.HTTPConnection):
    def __init__(self, host: str, *, deadline: float, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self.deadline = deadline
        self._create_connection = self._open_socket

    def _open_socket(
        self, address: tuple[str, int], timeout: Any = None, source: Any = None
    ) -> socket.socket:
        sock = socket.create_connection(address, _left(self.deadline), source)
        sock.settimeout(_left(self.deadline))  # what a TLS handshake, if any, may take
        return sock

    def connect(self) -> None:
        super().connect()
        self.sock = _BoundedSocket(self.sock, self.deadline)


class _BoundedHTTPSConnection(_BoundedConnection, http.client.HTTPSConnection):
    pass


class _Bounded(urllib.request.AbstractHTTPHandler):
    def do_open(
        self, http_class: Any, req: urllib.request.Request, **http_conn_args: Any
    ) -> http.client.HTTPResponse:
        timeout = req.timeout
        deadline = time.monotonic() + timeout if isinstance(timeout, int | float) else math.inf
        https = isinstance(http_class, type) and issubclass(http_class, http.client.HTTPSConnection)
        bounded = _BoundedHTTPSConnection if https else _BoundedConnection
        return super().do_open(functools.partial(bounded, deadline=deadline), req, **http_conn_args)


class HTTPHandler(_Bounded, urllib.request.HTTPHandler):
    """``http://`` with the whole request within its ``timeout``."""


class HTTPSHandler(_Bounded, urllib.request.HTTPSHandler):
    """``https://`` with the whole request, TLS handshake included, within its ``timeout``."""
