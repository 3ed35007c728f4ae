"""Reading a file that must be a regular one, without ever blocking on what is not.

A FIFO named like a note, a registry or a token file would block an ``open`` for reading
until something writes to it, and a device such as ``/dev/zero`` never ends. So a file is
opened non-blocking, checked on the open descriptor (a path can change between a ``stat``
and the ``open``), and read up to a bound. Light imports only: every command reads the KB
registry through this module.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class NotRegularFile(ValueError):
    """The path holds something other than a regular file (the message says what)."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, in a user's words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a plain file"


def open_regular(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o777) -> int:
    """A descriptor of the regular file at ``path`` (NotRegularFile for anything else;
    OSError as ``os.open`` raises it, with ``flags`` and ``mode`` as it takes them).
    Opened non-blocking, checked on the descriptor."""
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0), mode)
    found = os.fstat(fd).st_mode
    if not stat.S_ISREG(found):
        os.close(fd)
        raise NotRegularFile(f"not a regular file ({file_kind(found)})")
    return fd


def read_regular(path: Path | str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file at ``path``: reading one byte past
    the limit tells the caller the file is larger than it may be."""
    fd = open_regular(path)
    try:
        chunks = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
