"""A command line that reuses a running server: ``groove search``, ``get`` and ``status``
answered by a ``groove serve`` that already holds the KB (its model loaded, its index open).

Every ``groove serve`` also listens on a local socket, one file in a folder only its user
can enter (``$XDG_RUNTIME_DIR/groove``, else ``<tmp>/groove-<uid>``, mode 0700), and
checks that whoever connects runs as the same user. ``groove serve --background`` starts
one for command-line use alone, which stops after an idle time (``--stop`` stops it).

The client side must cost next to nothing, so it runs before the command line is built:
it sends its arguments, its folder and the environment that shapes output to each server
socket in turn. A server runs the very same command in its own process against the KBs it
holds, its output captured (colour kept, for the client's stdout to strip as it would),
and sends back stdout, stderr and the exit status, which the client prints and returns.
Anything a server cannot answer exactly as the command would alone (another KB or
configuration file, a configuration changed since it started, another groove version, a
plugin flag it does not know) it refuses before any output, and the client goes on to the
next socket, and at the end runs the command itself, silently. A dead server's socket is
removed by the next client that finds it refusing connections.

A server appears at once and whole: it listens on a socket of another name first and
renames it into place, so a socket that refuses a connection is a dead server's, never one
still starting. A server that is alive says so within a second while it works (a newline
now and then, before its answer); a client that hears nothing from one for
:data:`SIGN_OF_LIFE` seconds (a server stopped with SIGSTOP, or frozen) says so on one line,
marks its socket (:data:`SILENT`) and goes on without it, and later clients skip a marked
socket without waiting, for :data:`SILENT_SECONDS` or until the server, alive again, removes
the mark (within seconds of its command thread going on). A server whose one command thread
is stuck on a command refuses the commands queued behind it within seconds (their clients
run them alone). A client sends its request only to a server running as its user.

This module is the client and what both sides share: the standard library's lightest
modules only (every ``groove`` command pays for its import). The server is
:mod:`groove_core.cli.warm_server`.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import socket
import stat
import struct
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

#: Commands a running server answers for the command line.
COMMANDS = frozenset({"search", "get", "status"})
#: Environment variables that change what a command prints: sent with the request.
OUTPUT_ENV = ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TERM", "GROOVE_PROGRESS_INTERVAL")
#: Environment variables that decide which KB a name means (the registry's folder): a
#: server for which they mean another folder refuses, or ``--kb NAME`` would mean
#: another KB there.
MATCH_ENV = ("GROOVE_CONFIG_HOME", "XDG_CONFIG_HOME", "HOME", "APPDATA")
#: The largest request and answer (bytes): a command line, and one command's output.
MAX_REQUEST = 1 << 20
MAX_ANSWER = 64 << 20
#: Seconds a client waits for one server: to connect, and for the answer.
CONNECT_TIMEOUT = 0.5
ANSWER_TIMEOUT = 120.0
#: Seconds a client waits for a server's first byte, and between two: a server that works
#: on a command sends a newline every :data:`KEEPALIVE` seconds until its answer.
SIGN_OF_LIFE = 3.0
KEEPALIVE = 1.0
#: What a client adds to a socket's path to mark a server that did not answer (an empty
#: file), and for how long later clients skip it unless the server removes the mark.
SILENT = ".silent"
SILENT_SECONDS = 600.0
#: Sockets a client tries at most before running the command itself.
MAX_SOCKETS = 16
SUFFIX = ".sock"
#: click's pattern for the ANSI sequences it strips from output that is not a terminal.
_ANSI = re.compile(r"\033\[[0-?]*[ -/]*[@-~]")


def socket_folder(create: bool = False) -> str | None:
    """The folder of this user's server sockets, or None when it is not safe to use (not
    ours, or open to others): then nothing listens there and nothing is sent there."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        folder = os.path.join(base, "groove")
    else:
        tmp = next((os.environ[k] for k in ("TMPDIR", "TEMP", "TMP") if os.environ.get(k)), "/tmp")
        folder = os.path.join(tmp, f"groove-{os.getuid()}")
    if create:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return folder


def runtime_dir(create: bool = False) -> Path | None:
    """:func:`socket_folder` as a path."""
    from pathlib import Path

    folder = socket_folder(create)
    return None if folder is None else Path(folder)


# -- the client ----------------------------------------------------------------------------


def forward(argv: Sequence[str]) -> int | None:
    """Have a running server answer ``argv`` (``search ...``): its exit status once its
    output is printed, or None when none answered (the caller runs the command)."""
    if not argv or argv[0] not in COMMANDS or os.environ.get("GROOVE_NO_SERVER"):
        return None
    folder = socket_folder()
    if folder is None:
        return None
    request = None
    for path in _sockets(folder):
        try:
            request = request or _request(argv)
        except OSError:  # no current folder (deleted under the shell): the command says so
            return None
        try:
            answer = _ask(path, request)
        except KeyboardInterrupt:  # as the command says it alone (cli.common.handle_errors)
            sys.stderr.write("\ngroove: interrupted\n")
            return 130
        except Silent as why:
            # Said once: the mark spares the next commands the wait (and this line).
            _write(sys.stderr, f"groove: {why}; running this command without it\n")
            continue
        if answer is None or "refused" in answer:
            continue
        for stream, text in ((sys.stdout, answer["stdout"]), (sys.stderr, answer["stderr"])):
            # The server kept the colour; strip it where click would have (not a terminal).
            _write(stream, text if _tty(stream) else _ANSI.sub("", text))
        return int(answer["code"])
    return None


def _write(stream: Any, text: str) -> None:
    """``text`` on ``stream`` as click.echo writes it: a stream that says it is ASCII
    (``PYTHONIOENCODING=ascii``) is taken as misconfigured and given UTF-8."""
    if not text:
        return  # nothing, not even an encoding's byte-order mark
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        ascii_only = codecs.lookup(encoding).name == "ascii"
    except LookupError:
        ascii_only = False
    if ascii_only and hasattr(stream, "buffer"):
        stream.flush()
        stream.buffer.write(text.encode("utf-8", "replace"))
        stream.buffer.flush()
    else:
        stream.write(text)
        stream.flush()


def _request(argv: Sequence[str]) -> bytes:
    from groove_core import __version__

    env = {k: os.environ[k] for k in OUTPUT_ENV if k in os.environ}
    where = {k: os.environ.get(k) for k in MATCH_ENV}
    # sys.prefix: the Python environment, whose installed plugins the command would load
    # stdout_tty: a log line's colour, as structlog decides it alone (groove_core.logs)
    body = {"op": "run", "version": __version__, "argv": list(argv), "cwd": os.getcwd(),
            "env": env, "where": where, "python": sys.prefix,
            "stdout_tty": _tty(sys.stdout)}  # fmt: skip
    return json.dumps(body).encode() + b"\n"


def _tty(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (False for none, or a closed one)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _sockets(folder: str) -> list[str]:
    """The server sockets, the most recently started first, less those marked silent
    within :data:`SILENT_SECONDS`."""
    try:
        with os.scandir(folder) as entries:
            names = {e.name: e for e in entries}
    except OSError:
        return []
    now = time.time()
    found = []
    for name, entry in names.items():
        if not name.endswith(SUFFIX):
            continue
        mark = names.get(name + SILENT)
        if mark is not None and now - _mtime(mark) < SILENT_SECONDS:
            continue
        found.append((_mtime(entry), entry.path))
    found.sort(reverse=True)
    return [path for _, path in found[:MAX_SOCKETS]]


def silent(pid: int) -> bool:
    """Whether a socket of the server ``pid`` is marked as not answering."""
    folder = socket_folder()
    if folder is None:
        return False
    try:
        with os.scandir(folder) as entries:
            names = [e.name for e in entries]
    except OSError:
        return False
    return any(n.startswith(f"{pid}-") and n.endswith(SUFFIX + SILENT) for n in names)


class Silent(Exception):
    """A server gave no sign of life in time (stopped, or frozen); the message says which."""


def _pid_of(path: str) -> str:
    """The pid a server's socket is named after (``PID-MS.sock``)."""
    return os.path.basename(path).partition("-")[0]


def _mark_silent(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path + SILENT, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        os.utime(path + SILENT)


def _remove_dead(path: str) -> None:
    """Remove the socket ``path`` that refused a connection: a server that is gone (a live
    one's socket listens from the moment it has its name). Only a socket of this user, and
    not while the process it is named after lives: macOS and BSD refuse a connection to a
    live server whose listen queue is full. Anything else found under that name is left
    alone."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISSOCK(info.st_mode) and info.st_uid == os.getuid() and not alive(_pid_of(path)):
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.unlink(path + SILENT)


def alive(pid: str) -> bool:
    """Whether the process ``pid`` (a socket name's) exists; a name without one: no."""
    if not pid.isdigit() or int(pid) <= 0:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's (a pid reused), or unknown: leave the socket be
    return True


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def _ask(
    where: str | os.PathLike[str], request: bytes, timeout: float = ANSWER_TIMEOUT
) -> dict[str, Any] | None:
    """One exchange with the server at ``where``; None when it is not there (a socket
    whose server died is removed) or not this user's. :class:`Silent` (its socket marked)
    when it says nothing for :data:`SIGN_OF_LIFE` seconds, or works on for ``timeout``."""
    path = os.fspath(where)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            sock.connect(path)
        except ConnectionRefusedError:
            _remove_dead(path)  # nobody listens: a server that was killed
            return None
        except OSError:
            return None
        if not same_user(sock):
            return None  # the request holds the command line and the folder: not theirs
        sock.settimeout(SIGN_OF_LIFE)
        sock.sendall(request)
        data = _answer(sock, path, timeout)
    except Silent:
        _mark_silent(path)
        raise
    except OSError:
        return None
    finally:
        sock.close()
    try:
        answer = json.loads(data) if data else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _answer(sock: socket.socket, path: str, timeout: float) -> bytes:
    """The server's answer line, past the newlines it sends while it works; each read
    waits :data:`SIGN_OF_LIFE` seconds at most (the socket's timeout), all ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = read_line(sock, MAX_ANSWER)
        except TimeoutError:
            raise Silent(
                f"the groove server with pid {_pid_of(path)} did not answer in "
                f"{SIGN_OF_LIFE:g} s (stopped?)"
            ) from None
        if not data or data.strip():
            return data
        if time.monotonic() > deadline:
            raise Silent(
                f"the groove server with pid {_pid_of(path)} did not finish the command in "
                f"{timeout:g} s"
            )


def same_user(sock: socket.socket) -> bool:
    """Whether the peer of ``sock`` runs as this process's user (Linux: SO_PEERCRED;
    elsewhere the socket's folder, 0700 and ours, is the guard)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def read_line(sock: socket.socket, limit: int, seconds: float | None = None) -> bytes:
    """Bytes up to a newline, the peer's end, or ``limit``; with ``seconds``, what came
    within that time in all (a peer that sends a byte now and then cannot hold it)."""
    chunks, size = [], 0
    deadline = None if seconds is None else time.monotonic() + seconds
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request did not come in time")
            sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n") or size > limit:
            break
    return b"".join(chunks)[:limit]


def _ask_all(op: dict[str, Any]) -> list[dict[str, Any]]:
    folder = socket_folder()
    if folder is None:
        return []
    request = json.dumps(op).encode() + b"\n"
    answers = []
    for path in _sockets(folder):
        with contextlib.suppress(Silent):  # marked: the caller says what it means
            answers.append(_ask(path, request, timeout=10))
    return [a for a in answers if a]


def served_by(folders: Sequence[Path]) -> int | None:
    """The pid of a background server holding exactly ``folders``, or None."""
    wanted = sorted(str(f.resolve()) for f in folders)
    for answer in _ask_all({"op": "who"}):
        if answer.get("background") and sorted(answer.get("kbs") or []) == wanted:
            return int(answer["pid"])
    return None


def stop(folders: Sequence[Path]) -> list[int]:
    """Ask the background servers holding ``folders`` to stop: the pids that said yes."""
    asked = {"op": "stop", "kbs": [str(f.resolve()) for f in folders]}
    return [int(a["pid"]) for a in _ask_all(asked) if a.get("stopped")]
