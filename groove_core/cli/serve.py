"""``groove serve``: the knowledge base over MCP, on stdio (default) or streamable HTTP.

Only click is imported at module level so that ``groove --help`` stays fast; the MCP SDK,
the index and the embedder load when the command runs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from groove_core.cli.common import LOG_LEVELS, configure_logging, handle_errors, search_folders
from groove_core.cli.options import all_option, config_option, defaulted, kbs_option
from groove_core.mcp.budget import DEFAULT_MAX_RESPONSE_CHARS, MIN_RESPONSE_CHARS
from groove_core.mcp.defaults import DEFAULT_READERS
from groove_core.mcp.http import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_READ_TIMEOUT,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    TOKEN_ENV,
    HttpLimits,
    connection_cap,
    is_loopback,
)

#: A bearer token is a few dozen characters: a file longer than this is the wrong file, and
#: reading on would let it (or a device) exhaust memory.
MAX_TOKEN_BYTES = 4096


@dataclass(frozen=True)
class HttpOptions:
    """What ``--transport http`` needs beyond host and port."""

    host: str
    port: int
    token_file: Path | None
    allow_hosts: tuple[str, ...]
    allow_origins: tuple[str, ...]
    limits: HttpLimits


#: Seconds a background server waits for a command before it stops (--idle-timeout).
DEFAULT_IDLE_TIMEOUT = 1800.0
#: Seconds ``--background`` waits for the server it started to answer.
BACKGROUND_START_TIMEOUT = 120.0


@dataclass(frozen=True)
class LocalOptions:
    """The command-line-only server (``--background`` starts one)."""

    only: bool
    idle_timeout: float | None
    #: The lock (:class:`~groove_core.cli.warm_server.BackgroundLock`) the command that
    #: started this server took for it: inherited, already held.
    lock_fd: int | None = None
    #: How the command line this server answers with is built (:func:`_command_line`).
    cli_factory: Callable[[], Any] | None = None


def _command_line() -> Callable[[], Any]:
    """How the server builds the command line it answers with: as the ``groove`` group
    that started it builds itself (``GrooveGroup.cli_factory``, handed down rather than
    imported: the group imports this module); a command run on its own answers with
    the group it belongs to as it is."""
    root = click.get_current_context().find_root().command
    factory: Callable[[], Any] | None = getattr(root, "cli_factory", None)
    return factory if factory is not None else (lambda: root)


@click.command("serve")
@kbs_option
@all_option
@config_option
@defaulted(
    "--transport",
    click.Choice(["stdio", "http"]),
    "stdio",
    "stdio for a client that starts groove itself; http for streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to bind.")
@defaulted(
    "--port", click.IntRange(1, 65535), 8765, "HTTP: port to listen on (the endpoint is /mcp)."
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"HTTP: require 'Authorization: Bearer TOKEN', the token read from this file "
    f"(or from ${TOKEN_ENV}). Never logged. Refused on stdio.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="HOST",
    help="HTTP: another Host header value to accept (repeatable), e.g. the name clients use "
    "for this machine. Loopback names and the bound address are always accepted.",
)
@click.option(
    "--allow-origin",
    "allow_origins",
    multiple=True,
    metavar="ORIGIN",
    help="HTTP: a browser Origin to accept (repeatable), e.g. https://app.example.",
)
@defaulted(
    "--max-connections",
    click.IntRange(1),
    DEFAULT_MAX_CONNECTIONS,
    "HTTP: open connections at most (also kept below the file descriptor limit).",
)
@defaulted(
    "--read-timeout",
    click.FloatRange(0.1),
    DEFAULT_READ_TIMEOUT,
    "HTTP: seconds a connection has to deliver a whole request (headers and body).",
)
@defaulted(
    "--max-sessions",
    click.IntRange(1),
    DEFAULT_MAX_SESSIONS,
    "HTTP: MCP sessions open at most; at the cap the one idle longest is closed to "
    "admit a new one.",
)
@defaulted(
    "--session-idle-timeout",
    click.FloatRange(1.0),
    DEFAULT_SESSION_IDLE_TIMEOUT,
    "HTTP: seconds a session may go without a request before it is closed (its client "
    "then starts a new one).",
)
@defaulted(
    "--max-response-chars",
    click.IntRange(MIN_RESPONSE_CHARS),
    DEFAULT_MAX_RESPONSE_CHARS,
    "Size budget of each tool response, in characters; what does not fit is reported as truncated.",
)
@click.option(
    "--readers",
    type=click.IntRange(1, 64),
    default=None,
    help="Worker threads answering tool calls, each with its own index connection: searches "
    f"from several clients run in parallel. Default: the storage backend's ({DEFAULT_READERS} "
    "for SQLite, the connection pool's size for PostgreSQL).",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Keep the index current while serving (re-index on file changes, debounced).",
)
@click.option(
    "--background",
    is_flag=True,
    help="Start a detached server for the command line alone (no MCP): groove search, get "
    "and status then answer from it, its model loaded and its index open. See --idle-timeout "
    "and --stop.",
)
@click.option(
    "--stop", "stop_server", is_flag=True, help="Stop the background server holding the KB."
)
@defaulted(
    "--idle-timeout",
    click.FloatRange(1.0),
    DEFAULT_IDLE_TIMEOUT,
    "With --background: seconds without a command before the server stops on its own.",
)
@click.option("--local-only", is_flag=True, hidden=True)  # what --background runs
@click.option("--lock-fd", type=int, hidden=True)  # the lock --background hands it
@defaulted("--log-level", click.Choice(LOG_LEVELS), "info", "Logging to stderr.")
@handle_errors
def serve_cmd(
    kbs: tuple[Path, ...],
    all_kbs: bool,
    config_path: Path | None,
    transport: str,
    host: str,
    port: int,
    token_file: Path | None,
    allow_hosts: tuple[str, ...],
    allow_origins: tuple[str, ...],
    max_connections: int,
    read_timeout: float,
    max_sessions: int,
    session_idle_timeout: float,
    max_response_chars: int,
    readers: int | None,
    watch: bool,
    background: bool,
    stop_server: bool,
    idle_timeout: float,
    local_only: bool,
    lock_fd: int | None,
    log_level: str,
) -> None:
    """Serve the knowledge base to LLM agents over MCP (tools: search, get_document,
    list_documents, related, index_status, and those plugins add). See docs/mcp.md.

    Several --kb (or --all) serve several knowledge bases from one server: the tools take
    a `kb` argument, and search covers them all by default.

    Every server also answers `groove search`, `get` and `status` for its KBs from this
    user's command line (a local socket only this user can open), so those skip loading
    the model and opening the index; `--background` starts one for that alone.
    """
    folders = [f.resolve() for f in search_folders(kbs, all_kbs)]
    config_path = config_path.resolve() if config_path else None
    if stop_server:
        _stop(folders)
        return
    if background:
        _start_background(folders, config_path, watch, idle_timeout)
        return
    if token_file is not None and transport == "stdio":
        # Silently serving without the authentication asked for would be worse than not
        # starting: on stdio the client starts groove itself and nothing is authenticated.
        raise click.UsageError("--token-file applies to --transport http only, not stdio")
    # Applied at once, so it wins over the default that handle_errors set up (docs/mcp.md).
    configure_logging(log_level, server=True)
    limits = HttpLimits(max_connections, read_timeout, max_sessions, session_idle_timeout)
    http = HttpOptions(host, port, token_file, allow_hosts, allow_origins, limits)
    local = LocalOptions(local_only, idle_timeout if local_only else None, lock_fd, _command_line())
    _serve(
        folders, config_path, transport, http, max_response_chars, readers, watch, log_level, local
    )


def read_token(token_file: Path | None) -> str | None:
    """The bearer token from ``token_file``, else from the environment, else None."""
    from groove_core.config import ConfigError

    if token_file is not None:
        token = _read_token_file(token_file)
        if not token or any(c.isspace() for c in token):
            raise ConfigError(f"the token file {token_file} must hold one token, without spaces")
        return token
    if TOKEN_ENV not in os.environ:
        return None
    token = os.environ[TOKEN_ENV].strip()
    # Set but empty is a mistake (a variable that failed to expand), never "no auth".
    if not token or any(c.isspace() for c in token):
        raise ConfigError(
            f"${TOKEN_ENV} is set but is not one token without spaces: set it to a token, "
            "or unset it to serve without authentication"
        )
    return token


def _read_token_file(path: Path) -> str:
    """Its text, read only if it is a regular file of at most MAX_TOKEN_BYTES bytes: a FIFO
    would block the start forever and a device such as /dev/zero never ends
    (groove_core.files)."""
    from groove_core.config import ConfigError
    from groove_core.files import NotRegularFile, read_regular

    def refuse(why: str) -> ConfigError:
        return ConfigError(f"cannot read the token file {path}: {why}")

    try:
        data = read_regular(path, MAX_TOKEN_BYTES)
    except NotRegularFile as err:
        raise refuse(str(err)) from None
    except OSError as err:
        raise refuse(err.strerror or str(err)) from None
    if len(data) > MAX_TOKEN_BYTES:
        raise refuse(f"larger than {MAX_TOKEN_BYTES:,} bytes, too large for a token")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise refuse("not UTF-8 text") from None


def _serve(
    folders: list[Path],
    config_path: Path | None,
    transport: str,
    http: HttpOptions,
    max_chars: int,
    readers: int | None,
    watch: bool,
    log_level: str,
    local: LocalOptions,
) -> None:
    import structlog

    from groove_core.cli.warm_server import LocalServer
    from groove_core.mcp.protocol import GrooveServer
    from groove_core.mcp.resources import WatchBus, change_events
    from groove_core.mcp.server import build_mcp_server
    from groove_core.multi_kb import open_kbs

    log = structlog.get_logger("groove.serve")
    # Before the index and the embedder load: a bad token source stops the start at once,
    # and so does another background server of these KBs.
    token = read_token(http.token_file) if transport == "http" else None
    lock = _hold_background_lock(folders, local) if local.only else None
    kbs = open_kbs(folders, config_path)
    apps = [kb.app for kb in kbs]
    bus = WatchBus()
    activity: dict[str, Callable[[], str | None]] = {}
    for kb in kbs:
        if watch:
            from groove_core.watch import Watcher

            def announce(added: list[str], modified: list[str], removed: list[str],
                         name: str = kb.name) -> None:  # fmt: skip
                bus.publish_from_thread(change_events(name, added, modified, removed))

            # Its own connection on its own thread; searches keep reading through WAL.
            watcher = Watcher(kb.app, on_changes=announce)
            activity[kb.name] = watcher.progress
            watcher.start()
        elif not kb.app.backend.exists():
            log.warning(
                "no index yet: tools will fail until 'groove index' runs", kb=str(kb.app.kb)
            )
    if local.only:
        try:
            _serve_local(kbs, config_path, local)
        finally:
            assert lock is not None
            lock.close()
        return
    server = build_mcp_server(
        kbs, max_response_chars=max_chars, readers=readers, bus=bus, activity=activity
    )
    # The command line shares the server's apps (the embedder behind one lock).
    assert isinstance(server, GrooveServer) and server.documents is not None
    listener = LocalServer(
        [(kb.app.kb, config_path, kb.app) for kb in server.documents.kbs],
        cli_factory=_factory(local),
    )
    # Before the socket exists: a SIGTERM the moment it appears must still remove it.
    _close_on_sigterm(listener)
    if listener.start() is None:
        log.warning("no private folder for the command line's socket: not listening")
    served = ", ".join(str(app.kb) for app in apps)
    log.info("serving", kb=served, transport=transport, max_response_chars=max_chars)
    try:
        if transport == "stdio":
            server.run("stdio")
        else:
            _serve_http(server, http, token, log_level)
    finally:
        listener.close()


def _close_on_sigterm(listener: Any) -> None:
    """On SIGTERM, remove the command line's socket, then end as SIGTERM ends a process
    (on stdio nothing else runs at exit; HTTP's uvicorn takes the signal while it serves
    and raises it again once it has stopped)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return  # a server run inside a program (tests): its own business

    def terminated(signum: int, _frame: Any) -> None:
        listener.close()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, terminated)


def _hold_background_lock(folders: list[Path], local: LocalOptions) -> Any:
    """The lock of the background server of ``folders``, held for this process's life;
    a clear error when another one holds it."""
    from groove_core.cli.warm import runtime_dir
    from groove_core.cli.warm_server import BackgroundLock

    folder = runtime_dir(create=True)
    if folder is None:
        raise click.ClickException("no private folder for the command line's socket")
    if local.lock_fd is not None:
        os.set_inheritable(local.lock_fd, False)  # not to the embedding child, if any
    lock = BackgroundLock(folder, folders, local.lock_fd)
    if not lock.take():
        holder = lock.holder()
        lock.close()
        raise click.ClickException(_running(folders, holder))
    if local.lock_fd is None:
        lock.record(os.getpid())
    return lock


def _running(folders: list[Path], pid: int | None) -> str:
    who = f" (pid {pid})" if pid is not None else ""
    return f"a background server for {', '.join(map(str, folders))} is already running{who}"


def _serve_http(server: Any, http: HttpOptions, token: str | None, log_level: str) -> None:
    import structlog

    from groove_core.mcp.http import run_http

    log = structlog.get_logger("groove.serve")
    if not token and not is_loopback(http.host):
        log.warning(
            "serving without authentication on a non-loopback address: anyone who can reach "
            f"it can read the knowledge base; set --token-file or ${TOKEN_ENV}",
            host=http.host,
        )
    cap = connection_cap(http.limits.max_connections)
    if cap < http.limits.max_connections:
        log.warning("connection cap lowered to fit the file descriptor limit", cap=cap)
    log.info(
        "listening",
        url=f"http://{http.host}:{http.port}/mcp",
        auth="bearer token" if token else "none",
        max_connections=cap,
        read_timeout=http.limits.read_timeout,
        max_sessions=http.limits.max_sessions,
        session_idle_timeout=http.limits.session_idle_timeout,
    )
    run_http(
        server,
        host=http.host,
        port=http.port,
        token=token,
        limits=dataclasses.replace(http.limits, max_connections=cap),
        allow_hosts=http.allow_hosts,
        allow_origins=http.allow_origins,
        log_level="warning" if log_level == "info" else log_level,
    )


def _factory(local: LocalOptions) -> Callable[[], Any]:
    if local.cli_factory is None:
        raise click.ClickException("the server was started without its command line")
    return local.cli_factory


def _serve_local(kbs: list[Any], config_path: Path | None, local: LocalOptions) -> None:
    """Answer the command line only, until idle for ``local.idle_timeout`` or stopped."""
    import signal
    import threading

    import structlog

    from groove_core.cli.warm_server import LocalServer

    log = structlog.get_logger("groove.serve")
    done = threading.Event()
    listener = LocalServer(
        [(kb.app.kb, config_path, kb.app) for kb in kbs],
        cli_factory=_factory(local),
        background=True,
        idle_exit=local.idle_timeout,
        on_stop=done.set,
    )
    # Before the socket exists: a SIGTERM while it starts or the model loads ends the
    # server once it can, and the socket goes with it.
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    path = listener.start()
    if path is None:
        raise click.ClickException("no private folder for the command line's socket")
    try:
        # The model loads now, not on the first search; one that fails takes the socket along.
        for kb in kbs:
            kb.app.embedder.embed_query("warm up")
        kbs_held = ", ".join(str(k.app.kb) for k in kbs)
        log.info("serving the command line", kb=kbs_held, pid=os.getpid())
        done.wait()
    finally:
        listener.close()


def _start_background(
    folders: list[Path], config_path: Path | None, watch: bool, idle_timeout: float
) -> None:
    """Start a detached ``serve --local-only`` and wait until it answers; if another
    holds these KBs, or is starting for them, say so (and wait for the one starting)."""
    import subprocess
    import sys
    import time

    from groove_core.cli.warm import runtime_dir, served_by
    from groove_core.cli.warm_server import BackgroundLock

    if (pid := served_by(folders)) is not None:
        click.echo(_running(folders, pid))
        return
    folder = runtime_dir(create=True)
    if folder is None:
        raise click.ClickException(
            "no private folder for the command line's socket (set XDG_RUNTIME_DIR to a folder "
            "only you can enter)"
        )
    lock = BackgroundLock(folder, folders)
    try:
        if not _take_or_wait(lock, folders):
            return
        lock.record(None)
        args = [sys.executable, "-m", "groove_core", "serve", "--local-only"]
        args += [a for f in folders for a in ("--kb", str(f))]
        args += ["--config", str(config_path)] if config_path else []
        args += ["--watch"] if watch else []
        args += ["--idle-timeout", str(idle_timeout), "--lock-fd", str(lock.fd)]
        log_file = lock.log_path
        with open(log_file, "wb") as log:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # not stopped with the shell that started it
                env={**os.environ, "GROOVE_NO_SERVER": "1"},
                pass_fds=(lock.fd,),  # the server holds the lock from now on
            )
        lock.record(proc.pid)
    finally:
        lock.close()
    deadline = time.monotonic() + BACKGROUND_START_TIMEOUT
    while served_by(folders) != proc.pid:
        if proc.poll() is not None:
            raise click.ClickException(f"the background server stopped at start: {_last(log_file)}")
        if time.monotonic() > deadline:
            proc.terminate()
            raise click.ClickException(
                f"the background server did not answer in {BACKGROUND_START_TIMEOUT:g} s "
                f"(its log: {log_file})"
            )
        time.sleep(0.1)
    import shlex

    minutes = idle_timeout / 60
    stop = " ".join(f"--kb {shlex.quote(str(f))}" for f in folders)
    click.echo(
        f"serving {', '.join(map(str, folders))} for the command line (pid {proc.pid}); it "
        f"stops after {minutes:g} min without a command, or with: groove serve --stop {stop}"
    )


def _take_or_wait(lock: Any, folders: list[Path]) -> bool:
    """Take ``lock`` (True: start the server), or, while another process holds it, wait
    for the server it starts to answer and say so (False). A holder that does not answer
    (stopped, frozen) is said at once; one still starting is waited for."""
    import time

    from groove_core.cli.warm import served_by, silent

    deadline = time.monotonic() + BACKGROUND_START_TIMEOUT
    while not lock.take():
        holder = lock.holder()
        if (pid := served_by(folders)) is not None:
            click.echo(_running(folders, pid))
            return False
        if holder is not None and silent(holder):
            raise click.ClickException(
                f"{_running(folders, holder)} but does not answer (stopped?): 'kill -CONT "
                f"{holder}' resumes it, 'kill {holder}' ends it"
            )
        if time.monotonic() > deadline:
            raise click.ClickException(
                f"{_running(folders, holder)} but has not answered in "
                f"{BACKGROUND_START_TIMEOUT:g} s"
            )
        time.sleep(0.1)
    return True


def _last(log_file: Path) -> str:
    """The last line of a log: what a server that stopped at start said last."""
    lines = log_file.read_text(errors="replace").strip().splitlines()
    return lines[-1].removeprefix("groove: ").removeprefix("Error: ") if lines else "no output"


def _stop(folders: list[Path]) -> None:
    from groove_core.cli.warm import stop

    stopped = stop(folders)
    if not stopped:
        raise click.ClickException(f"no background server holds {', '.join(map(str, folders))}")
    click.echo(f"stopped (pid {', '.join(map(str, stopped))})")
