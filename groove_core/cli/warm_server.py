"""The server side of the command line answered by a running server
(:mod:`groove_core.cli.warm`): a thread of every ``groove serve`` that runs the commands
sent to its socket against the KBs it holds."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import stat
import struct
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
    MATCH_ENV,
    MAX_REQUEST,
    OUTPUT_ENV,
    SUFFIX,
    read_line,
    runtime_dir,
)


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

_held: Held | None = None
_holding = threading.local()
#: Builds the command line as ``groove`` would in the current folder (the plugins its
#: groove.toml enables); set by :mod:`groove_core.cli.main`, which this module must not
#: import (the command line imports this module).
cli_factory: Callable[[], Any] | None = None


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


class LocalServer:
    """Answers command-line requests on this user's socket, one at a time, on a thread of
    its own (a command changes the process's folder and captures its output)."""

    def __init__(
        self,
        apps: Sequence[tuple[Path, Path | None, Any]],
        *,
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
        self.background = background
        self.idle_exit = idle_exit
        self.on_stop = on_stop or (lambda: os._exit(0))
        self.path: Path | None = None
        self.last_used = time.monotonic()
        self._sock: socket.socket | None = None
        self._clis: dict[tuple[str, tuple[int, int] | None], Any] = {}

    def start(self) -> Path | None:
        """Listen (a thread); the socket's path, or None when no safe folder exists."""
        folder = runtime_dir(create=True)
        if folder is None:
            return None
        self.path = folder / f"{os.getpid()}-{int(time.time() * 1000)}{SUFFIX}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(self.path))
        # The folder (0700, ours) already keeps others out; the socket says so too. Not
        # through the umask: that is the whole process's, and other threads write files.
        self.path.chmod(0o600)
        sock.listen(16)
        self._sock = sock
        threading.Thread(target=self._serve, name="groove-cli", daemon=True).start()
        if self.idle_exit:
            threading.Thread(target=self._idle_watch, name="groove-idle", daemon=True).start()
        return self.path

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()

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
        global _held
        _held = self.held
        assert self._sock is not None
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with conn:
                try:
                    self._one(conn)
                except Exception:  # a broken client must not stop the server
                    continue

    def _one(self, conn: socket.socket) -> None:
        if not _same_user(conn):
            return
        # One request at a time: a client that sends slowly (or not at all) must not hold
        # the others, who then wait for it or run alone.
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
        answer = self._run(request)
        if "refused" not in answer:  # asked about other KBs only, it is still idle
            self.last_used = time.monotonic()
        _log().info(
            "command line",
            command=request["argv"][0] if request.get("argv") else None,
            code=answer.get("code"),
            refused=answer.get("refused"),
        )
        conn.settimeout(ANSWER_TIMEOUT)
        conn.sendall(json.dumps(answer, ensure_ascii=False).encode() + b"\n")

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
            assert cli_factory is not None, "groove_core.cli.main sets it"
            self._clis[key] = cli_factory()
        return self._clis[key]


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


def _same_user(conn: socket.socket) -> bool:
    """Whether the peer runs as this process's user (Linux: SO_PEERCRED; elsewhere the
    socket's folder, 0700 and ours, is the guard)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return bool(uid == os.getuid())
