"""The server side of the command line answered by a running server
(:mod:`groove_core.cli.warm`): a thread of every ``groove serve`` that runs the commands
sent to its socket against the KBs it holds.

Threads: one accepts connections (and removes the mark a client left on the socket when
this server did not answer it, :data:`~groove_core.cli.warm.SILENT`, once the command
thread shows it works again: idle, or done with a command since); one per connection reads
its request, answers ``who`` and ``stop`` itself, and while the command waits its turn and
runs sends a newline every :data:`~groove_core.cli.warm.KEEPALIVE` seconds, so a client
tells a busy server from a frozen one; one runs the commands, one at a time (a command
changes the process's folder and captures its output).

A command stuck on the command thread (a plugin that hangs) would hold every client behind
it until its client's deadline: a command still waiting its turn behind one that has run
for :data:`STUCK_SECONDS` is refused instead (its client runs it alone, at once), and the
mark the stuck command's client leaves stays until that command ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import queue
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groove_core import logs
from groove_core.cli.warm import (
    ANSWER_TIMEOUT,
    COMMANDS,
    KEEPALIVE,
    MATCH_ENV,
    MAX_REQUEST,
    OUTPUT_ENV,
    SILENT,
    SUFFIX,
    alive,
    read_line,
    runtime_dir,
    same_user,
)
from groove_core.errors import GrooveError


class NotHeld(Exception):
    """The command asks for a KB (or configuration) this server does not hold."""


@dataclass
class Held:
    """What a server holds: its KBs' apps by (folder, configuration file), opened on
    the server's command-line thread, and the configuration files' state at start."""

    apps: dict[tuple[Path, Path | None], Any]
    config_files: dict[Path, tuple[int, int] | None] = field(default_factory=dict)
    #: Each KB folder's identity at start (device, inode): a folder deleted since, or
    #: moved away with another moved to its path, is no longer the KB held.
    folders: dict[Path, tuple[int, int] | None] = field(default_factory=dict)
    #: The packages installed where Python imports from, at start (:func:`installation`).
    installed: Installed = field(default_factory=dict)

    def get(self, kb: Path, config_path: Path | None) -> Any:
        key = (kb.expanduser().resolve(), config_path.resolve() if config_path else None)
        if key not in self.apps:
            raise NotHeld(str(key[0]))
        if _folder_id(key[0]) != self.folders.get(key[0]):
            raise NotHeld(f"{key[0]} is not the folder it was when the server started")
        return self.apps[key]

    def changed(self) -> str | None:
        for path, seen in self.config_files.items():
            if _file_state(path) != seen:
                return f"{path} changed since the server started"
        if installation(self.installed) != self.installed:
            return "a package was installed, upgraded or removed since the server started"
        return None


#: Per folder packages may be installed in: each ``.dist-info``/``.egg-info`` entry's
#: (name, inode, modification time), or None when the folder is not there.
Installed = dict[str, frozenset[tuple[str, int, int]] | None]


def installation(folders: Iterable[str] | None = None) -> Installed:
    """The installed packages' records in each folder Python imports from (``folders``,
    or ``sys.path``'s, :func:`_import_folders`): installing, upgrading or removing a
    package (groove, a plugin, even at the same version) adds, replaces or removes its
    record, while the server keeps running the code it imported. Other files in those
    folders do not count. A listing of a few folders per command."""
    found: Installed = {}
    for path in _import_folders() if folders is None else folders:
        try:
            with os.scandir(path) as entries:
                found[path] = frozenset(
                    (e.name, e.inode(), e.stat().st_mtime_ns)
                    for e in entries
                    if e.name.endswith((".dist-info", ".egg-info"))
                )
        except OSError:
            found[path] = None
    return found


def _import_folders() -> list[str]:
    """``sys.path``'s absolute entries that are folders, less the script's or working
    folder Python puts first (a KB or a project, whose files come and go)."""
    paths = sys.path if sys.flags.safe_path else sys.path[1:]
    return [p for p in paths if os.path.isabs(p) and os.path.isdir(p)]


def _folder_id(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


def _file_state(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


#: Seconds a client has to send its whole request (a command line: a few hundred bytes).
REQUEST_SECONDS = 2.0
#: Connections served at once; one more is closed at once (its client runs alone).
MAX_CLIENTS = 64
#: Connections the kernel queues before the accepting thread takes them: a full queue
#: refuses a connection (macOS, BSD), which a client would take for a dead server's.
LISTEN_BACKLOG = 2 * MAX_CLIENTS
#: Seconds between the accepting thread's looks at the socket's silent mark.
MARK_CHECK = 1.0
#: Seconds a command may run before the commands waiting behind it are refused (their
#: clients run them alone rather than wait for one that may never end).
STUCK_SECONDS = 15.0

_held: Held | None = None
_holding = threading.local()


def refuse_if_held(why: str) -> None:
    """Inside a server answering the command line: refuse (the client runs it itself)."""
    if getattr(_holding, "active", False):
        raise NotHeld(why)


def held_app(kb: Path, config_path: Path | None) -> Any | None:
    """Inside a server answering the command line: the app it holds for ``kb`` (or
    :class:`NotHeld`); elsewhere None (open it as usual)."""
    if not getattr(_holding, "active", False) or _held is None:
        return None
    return _held.get(kb, config_path)


@dataclass
class _Job:
    """One command for the command thread, and its answer once run."""

    request: dict[str, Any]
    answer: dict[str, Any] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False
    #: Taken by the command thread (under the server's lock): no longer cancelled.
    started: bool = False


class LocalServer:
    """Answers command-line requests on this user's socket, one at a time, on a thread of
    its own (a command changes the process's folder and captures its output); see the
    module's doc for its threads."""

    def __init__(
        self,
        apps: Sequence[tuple[Path, Path | None, Any]],
        *,
        cli_factory: Callable[[], Any],
        background: bool = False,
        idle_exit: float | None = None,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.held = Held(
            {(kb.resolve(), cfg.resolve() if cfg else None): app for kb, cfg, app in apps}
        )
        self.held.installed = installation()
        for kb, cfg, _ in apps:
            self.held.folders[kb.resolve()] = _folder_id(kb.resolve())
            for path in (cfg, kb / "groove.toml"):
                if path is not None:
                    self.held.config_files[path.resolve()] = _file_state(path)
        #: Builds the command line as ``groove`` would in the current folder (the plugins
        #: its groove.toml enables): ``groove_core.cli.main.startup_cli``, handed down by
        #: the ``groove`` group that started the server (this module must not import it).
        self.cli_factory = cli_factory
        self.background = background
        self.idle_exit = idle_exit
        self.on_stop = on_stop or (lambda: os._exit(0))
        self.path: Path | None = None
        #: The name the socket listens under before it is renamed to ``path``.
        self._starting: Path | None = None
        self.last_used = time.monotonic()
        self._sock: socket.socket | None = None
        self._clis: dict[tuple[str, tuple[int, int] | None], Any] = {}
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._clients = threading.BoundedSemaphore(MAX_CLIENTS)
        #: Guards the command thread's state below and each job's started/cancelled.
        self._state = threading.Lock()
        #: When the command now running began (monotonic), None while idle; how many
        #: commands it finished: what tells the accepting thread it works.
        self._running_since: float | None = None
        self._finished = 0

    def start(self) -> Path | None:
        """Listen (threads); the socket's path, or None when no safe folder exists.

        The socket listens under a name no client looks at before it is renamed to the
        one they do: a client never finds it bound and not yet listening, which it would
        take for a dead server's socket and remove."""
        folder = runtime_dir(create=True)
        if folder is None:
            return None
        _remove_unfinished(folder)
        name = f"{os.getpid()}-{int(time.time() * 1000)}{SUFFIX}"
        path, starting = folder / name, folder / f".{name}.new"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Known before either name exists: a SIGTERM handled between two of these lines
        # (the serve command's, which calls close) removes whichever of them does.
        self.path, self._starting, self._sock = path, starting, sock
        try:
            sock.bind(str(starting))
            # The folder (0700, ours) already keeps others out; the socket says so too. Not
            # through the umask: that is the whole process's, and other threads write files.
            starting.chmod(0o600)
            sock.listen(LISTEN_BACKLOG)
            starting.rename(path)
        except BaseException:
            sock.close()
            with contextlib.suppress(OSError):
                starting.unlink()
            self.path = self._starting = self._sock = None
            raise
        threading.Thread(target=self._work, name="groove-cli", daemon=True).start()
        threading.Thread(target=self._serve, name="groove-cli-accept", daemon=True).start()
        if self.idle_exit:
            threading.Thread(target=self._idle_watch, name="groove-idle", daemon=True).start()
        return self.path

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._jobs.put(None)
        if self.path is not None:
            for path in (self._starting, self.path, Path(f"{self.path}{SILENT}")):
                with contextlib.suppress(OSError):
                    if path is not None:
                        path.unlink()

    def _shut(self) -> None:
        self.close()
        self.on_stop()

    def _idle_watch(self) -> None:
        assert self.idle_exit is not None
        while True:
            time.sleep(min(self.idle_exit, 5.0))
            if time.monotonic() - self.last_used > self.idle_exit:
                self._shut()
                return

    def _serve(self) -> None:
        """Accept connections, each served by a thread of its own; now and then remove
        the mark of a client that found this server silent, once it answers again."""
        sock = self._sock
        assert sock is not None and self.path is not None
        mark = f"{self.path}{SILENT}"
        try:
            sock.settimeout(MARK_CHECK)
        except OSError:
            return  # closed before this thread began (a server stopped at once)
        seen: int | None = None
        while True:
            seen = self._tidy_mark(mark, seen)
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            if not self._clients.acquire(blocking=False):
                conn.close()  # too many at once: that client runs its command alone
                continue
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _tidy_mark(self, mark: str, seen: int | None) -> int | None:
        """Remove the silent mark once the command thread works: idle, or it finished a
        command since the mark was first ``seen`` (the count of commands finished then).
        While one command stays stuck the mark stays, and clients skip this server
        without waiting. What to pass next time."""
        if not os.path.lexists(mark):
            return None
        with self._state:
            idle, finished = self._running_since is None, self._finished
        if idle or (seen is not None and finished != seen):
            with contextlib.suppress(OSError):
                os.unlink(mark)
            return None
        return finished if seen is None else seen

    def _stuck_behind(self, job: _Job) -> str | None:
        """Why ``job``, still waiting its turn, is given up (cancelled): the command
        running has run for :data:`STUCK_SECONDS`; or None."""
        with self._state:
            if job.started or self._running_since is None:
                return None
            took = time.monotonic() - self._running_since
            if took < STUCK_SECONDS:
                return None
            job.cancelled = True
        return f"busy: queued behind a command running for {took:.0f} s"

    def _client(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(None)
                self._one(conn)
        except Exception:  # a broken client must not stop the server
            pass
        finally:
            self._clients.release()

    def _one(self, conn: socket.socket) -> None:
        if not same_user(conn):
            return
        # A client that sends slowly (or not at all) loses its turn within seconds.
        data = read_line(conn, MAX_REQUEST, REQUEST_SECONDS)
        try:
            request = json.loads(data)
        except ValueError:
            return
        if not isinstance(request, dict):
            return
        if request.get("op") == "stop":
            conn.sendall(self._stop(request))
            return
        if request.get("op") == "who":
            # A stale background server is stopping: not one that serves these KBs.
            background = self.background and self._stale() is None
            who = {"pid": os.getpid(), "background": background,
                   "kbs": [str(kb) for kb, _ in self.held.apps]}  # fmt: skip
            conn.sendall(json.dumps(who).encode() + b"\n")
            return
        if request.get("op") != "run":
            return
        conn.settimeout(ANSWER_TIMEOUT)
        # Alive, said at once: a client that has gone meanwhile (it gave up on a server
        # that was stopped, and the request waited for it) gets no command run for it.
        conn.sendall(b"\n")
        job = _Job(request)
        self._jobs.put(job)
        try:
            # Working, or waiting its turn: said to the client now and then; behind a
            # command that seems stuck, refused (the client runs it alone).
            while not job.done.wait(KEEPALIVE):
                if (why := self._stuck_behind(job)) is not None:
                    conn.sendall(json.dumps({"refused": why}).encode() + b"\n")
                    return
                conn.sendall(b"\n")
        except OSError:
            job.cancelled = True  # the client went on without us: not run for nobody
            raise
        conn.sendall(json.dumps(job.answer, ensure_ascii=False).encode() + b"\n")

    def _work(self) -> None:
        """The commands, one at a time, in the order they came."""
        global _held
        _held = self.held
        while True:
            job = self._jobs.get()
            if job is None:
                return  # closed
            with self._state:
                if not job.cancelled:
                    job.started = True
                    self._running_since = time.monotonic()
            if not job.started:
                job.done.set()
                continue
            try:
                job.answer = self._answer(job.request)
            except Exception as err:  # the client runs the command alone
                job.answer = {"refused": f"the server failed: {type(err).__name__}"}
            finally:
                with self._state:
                    self._running_since = None
                    self._finished += 1
            job.done.set()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = self._run(request)
        if "refused" not in answer:  # asked about other KBs only, it is still idle
            self.last_used = time.monotonic()
        _log().info(
            "command line",
            command=request["argv"][0] if request.get("argv") else None,
            code=answer.get("code"),
            refused=answer.get("refused"),
        )
        return answer

    def _stale(self) -> str | None:
        """Why this server can no longer answer (a configuration changed since it
        started), or None. A background server then stops, to make way for a fresh one."""
        why = self.held.changed()
        if why is not None and self.background:
            threading.Timer(0.1, self._shut).start()
        return why

    def _stop(self, request: dict[str, Any]) -> bytes:
        mine = {str(kb) for kb, _ in self.held.apps}
        asked = set(request.get("kbs") or ())
        if self.background and asked and asked <= mine:
            threading.Timer(0.1, self._shut).start()
            return json.dumps({"stopped": True, "pid": os.getpid()}).encode() + b"\n"
        return json.dumps({"stopped": False}).encode() + b"\n"

    def _run(self, request: dict[str, Any]) -> dict[str, Any]:
        from groove_core import __version__

        argv, cwd, env = request.get("argv"), request.get("cwd"), request.get("env") or {}
        if request.get("version") != __version__:
            return {"refused": "another groove version"}
        if request.get("python") != sys.prefix:
            # another virtual environment: the same groove, maybe other plugins
            return {"refused": "another Python environment"}
        if not (isinstance(argv, list) and argv and argv[0] in COMMANDS):
            return {"refused": "not a command this server answers"}
        if not isinstance(cwd, str) or not os.path.isdir(cwd) or not isinstance(env, dict):
            return {"refused": "a bad request"}
        if not _same_registry(request.get("where")):
            return {"refused": "another registry of KB names (its environment)"}
        if (why := self._stale()) is not None:
            return {"refused": why}
        out, err = io.StringIO(), io.StringIO()
        with _as_client(cwd, env):
            cli = self._cli()
            _holding.active = True
            try:
                # a plugin's log line too goes to the command's stderr, as alone
                with (
                    contextlib.redirect_stdout(out),
                    contextlib.redirect_stderr(err),
                    logs.to_stream(err, stdout_tty=request.get("stdout_tty") is True),
                ):
                    code = _invoke(cli, argv)
            except NotHeld as why:
                return {"refused": f"not held here: {why}"}
            finally:
                _holding.active = False
        return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}

    def _cli(self) -> Any:
        """The command line as the client would build it in its folder (the plugins its
        groove.toml enables), built once per configuration state."""
        here = Path("groove.toml").resolve()
        key = (str(here), _file_state(here))
        if key not in self._clis:
            self._clis[key] = self.cli_factory()
        return self._clis[key]


def _remove_unfinished(folder: Path) -> None:
    """Remove the sockets servers bound and died before naming (``.PID-MS.sock.new``):
    this user's, of processes that are gone."""
    try:
        with os.scandir(folder) as entries:
            names = [e.name for e in entries]
    except OSError:
        return
    for name in names:
        if not (name.startswith(".") and name.endswith(f"{SUFFIX}.new")):
            continue
        path = folder / name
        try:
            info = path.lstat()
        except OSError:
            continue
        if (
            stat.S_ISSOCK(info.st_mode)
            and info.st_uid == os.getuid()
            and not alive(name[1:].partition("-")[0])
        ):
            with contextlib.suppress(OSError):
                path.unlink()


def _same_registry(where: Any) -> bool:
    """Whether the client's environment ``where`` names this server's registry folder."""
    from groove_core.registry import config_home

    if not isinstance(where, dict):
        return False
    theirs = {k: v for k, v in where.items() if k in MATCH_ENV and isinstance(v, str)}
    return config_home(theirs) == config_home()


def _invoke(cli: Any, argv: list[str]) -> int:
    """Run ``argv`` as ``groove`` would: its exit status (click's ``SystemExit``)."""
    try:
        cli.main(args=argv, prog_name="groove", color=True)
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


@contextlib.contextmanager
def _as_client(cwd: str, env: dict[str, Any]) -> Iterator[None]:
    """The client's folder and output environment, for one command."""
    before_cwd = os.getcwd()
    saved = {k: os.environ.get(k) for k in OUTPUT_ENV}
    os.chdir(cwd)
    for k in OUTPUT_ENV:
        value = env.get(k)
        if isinstance(value, str):
            os.environ[k] = value
        else:
            os.environ.pop(k, None)
    try:
        yield
    finally:
        os.chdir(before_cwd)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _log() -> Any:
    import structlog

    return structlog.get_logger("groove.serve")


class LockError(GrooveError):
    """The background server's lock file cannot be opened or locked."""


class BackgroundLock:
    """Whoever holds it starts or is the background server of ``folders`` (a lock file in
    the socket folder, one per set of KB folders): two ``serve --background`` at once start
    one server. The starting command takes it and hands it to the server it starts (an
    inherited descriptor), which holds it for its life: the lock is free again when that
    server ends, however it ends. The file holds the server's pid."""

    def __init__(self, folder: Path, folders: Sequence[Path], fd: int | None = None) -> None:
        key = hashlib.sha256("\0".join(sorted(str(f) for f in folders)).encode()).hexdigest()
        self.path = folder / f"background-{key[:16]}.lock"
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        if fd is not None:
            self.fd = fd
            return
        try:
            self.fd = os.open(self.path, flags, 0o600)
        except OSError as err:
            hint = " (a symbolic link there? remove it)" if os.path.islink(self.path) else ""
            raise LockError(
                f"cannot open the background server's lock file {self.path}: "
                f"{err.strerror or err}{hint}"
            ) from None

    @property
    def log_path(self) -> Path:
        """The log of the background server of these folders (one at a time)."""
        return self.path.with_suffix(".log")

    def take(self) -> bool:
        """Take it; False while another process holds it."""
        import fcntl

        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as err:  # ENOLCK: a file system without locks (NFS)
            raise LockError(
                f"cannot lock the background server's lock file {self.path}: "
                f"{err.strerror or err} (set XDG_RUNTIME_DIR or TMPDIR to a local folder)"
            ) from None
        return True

    def record(self, pid: int | None) -> None:
        """Write the holder's pid (None: not known yet)."""
        os.ftruncate(self.fd, 0)
        if pid is not None:
            os.pwrite(self.fd, str(pid).encode(), 0)

    def holder(self) -> int | None:
        """The pid its holder recorded, or None."""
        try:
            text = os.pread(self.fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
