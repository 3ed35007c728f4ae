"""``groove serve --transport http``: the MCP app behind the guards an open port needs.

- **Connections**: at most ``max_connections`` open at once, and each must deliver a whole
  request (head and body) within ``read_timeout`` seconds. 1,100 connections that each sent
  a header line now and then once exhausted the process's 1,024 file descriptors and every
  real client timed out; uvicorn alone times out neither headers nor bodies. When the cap is
  reached, the connection that has waited longest for its request is closed to make room,
  so a slow sender cannot keep out a client that sends a whole request at once.
- **Sessions**: at most ``max_sessions`` MCP sessions, each closed after
  ``session_idle_timeout`` seconds without a request. The MCP SDK alone keeps 10,000 for 30
  minutes and then answers every new client 503: 10,500 sessions opened in ~40 s locked
  everyone out for half an hour. At the cap the session idle longest is closed instead (its
  client gets 404 and starts a new one, as the protocol says).
- **Authentication**: an optional bearer token, compared in constant time, never logged.
- **Clients that go away** before their request is read (a connection the cap closed, a
  client that gave up) are one debug line, not an ``Exception in ASGI application``
  traceback: 200 ``subscriptions/listen`` streams against the cap of 100 left a dozen.
- **Host and Origin**: always checked (DNS rebinding), against loopback names, the bound
  address and whatever ``--allow-host``/``--allow-origin`` add; the MCP SDK alone turns the
  checks off for any address other than loopback. Both must be well formed first: the SDK
  matches ``name:*`` by prefix, so ``127.0.0.1:80@evil.example`` would pass as loopback.

uvicorn and the MCP SDK are imported by the functions that need them: ``groove --help``
imports this module's callers only.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import asyncio

    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Receive, Scope, Send

DEFAULT_MAX_CONNECTIONS = 100
DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_MAX_SESSIONS = 1000
DEFAULT_SESSION_IDLE_TIMEOUT = 600.0
#: Seconds an idle keep-alive connection stays open between requests (uvicorn's default).
KEEP_ALIVE_TIMEOUT = 5
#: Largest request head (request line and headers) in bytes; h11's own default.
MAX_HEAD_BYTES = 16 * 1024
#: File descriptors kept for the process itself (index, WAL, models, logs) below the limit.
RESERVED_FDS = 64
#: Connections accepted in one go (the listen backlog): asyncio accepts up to this many before
#: any is looked at, so the cap must leave this much room below the descriptor limit.
ACCEPT_BATCH = 32
TOKEN_ENV = "GROOVE_MCP_TOKEN"

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_log = logging.getLogger("groove.http")


@dataclass(frozen=True)
class HttpLimits:
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def connection_cap(wanted: int) -> int:
    """``wanted``, lowered to what the process's file descriptor limit leaves room for."""
    try:
        import resource
    except ImportError:  # Windows: no such limit to respect
        return wanted
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - RESERVED_FDS - ACCEPT_BATCH))


# -- Host and Origin ---------------------------------------------------------------------


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def security_settings(
    host: str, allow_hosts: tuple[str, ...], allow_origins: tuple[str, ...]
) -> TransportSecuritySettings:
    """Host/Origin checks that stay on whatever address is bound.

    Loopback names are always accepted, and the bound address itself unless it is a
    wildcard (0.0.0.0, ::), for which no Host value is implied: ``--allow-host`` says which.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    names = list(_LOOPBACK_NAMES)
    if host not in ("0.0.0.0", "::", ""):
        names.append(_bracketed(host))
    hosts = [form for name in names for form in (name, f"{name}:*")]
    for extra in allow_hosts:
        hosts += [extra] if extra.rsplit(":", 1)[-1].isdigit() else [extra, f"{extra}:*"]
    origins = [f"http://{name}:*" for name in names]
    origins += [o.rstrip("/") for o in allow_origins]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


#: ``name[:port]``: a DNS name or IPv4 address, or a bracketed IPv6 address.
_HOST_VALUE = r"(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?"
_HOST_RE = re.compile(_HOST_VALUE)
_ORIGIN_RE = re.compile(rf"[A-Za-z][A-Za-z0-9+.-]*://{_HOST_VALUE}|null")


class WellFormedHost:
    """Refuse a request whose Host (400) or Origin (403) header is not a plain host and port.

    The MCP SDK accepts ``name:*`` by prefix (``host.startswith("name:")``), so anything
    after the colon would pass: ``127.0.0.1:80@evil.example`` would count as loopback. Once the
    value is known to be ``name[:digits]`` that prefix match is exact.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            hosts = [v for k, v in scope["headers"] if k == b"host"]
            origins = [v for k, v in scope["headers"] if k == b"origin"]
            refusal = None
            if len(hosts) != 1 or not _HOST_RE.fullmatch(hosts[0].decode("latin-1")):
                refusal = ("Invalid Host header", 400)
            elif len(origins) > 1 or not all(
                _ORIGIN_RE.fullmatch(o.decode("latin-1")) for o in origins
            ):
                refusal = ("Invalid Origin header", 403)
            if refusal is not None:
                from starlette.responses import PlainTextResponse

                _log.debug("refusing a request: %s", refusal[0].lower())
                await PlainTextResponse(refusal[0], status_code=refusal[1])(scope, receive, send)
                return
        await self.app(scope, receive, send)


# -- clients that go away -----------------------------------------------------------------


def _only_disconnects(err: BaseException) -> bool:
    """Whether ``err`` is starlette's ClientDisconnect, or a group of nothing else."""
    from starlette.requests import ClientDisconnect

    if isinstance(err, BaseExceptionGroup):
        return all(_only_disconnects(e) for e in err.exceptions)
    return isinstance(err, ClientDisconnect)


def _went_away() -> None:
    _log.debug("a client went away before its request was read")


class QuietDisconnects:
    """A request whose client went away before its body was read ends quietly: the MCP
    SDK's handler lets starlette's ClientDisconnect out, and uvicorn would log it as an
    ``Exception in ASGI application`` with a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except BaseException as err:
            if not _only_disconnects(err):
                raise
            _went_away()


class _DisconnectLogFilter(logging.Filter):
    """Drops a log record whose exception is a client gone away (the SDK logs one with
    ``logger.exception``), leaving :func:`_went_away`'s debug line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        if err is not None and _only_disconnects(err):
            _went_away()
            return False
        return True


#: The loggers that report a client gone away as an error with a traceback: the SDK's
#: streamable HTTP transport, and uvicorn's (for whatever still reaches it).
_DISCONNECT_LOGGERS = ("mcp.server.streamable_http", "uvicorn.error")


def quiet_disconnect_logs() -> None:
    """Filter the loggers of :data:`_DISCONNECT_LOGGERS` (once)."""
    for name in _DISCONNECT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DisconnectLogFilter) for f in logger.filters):
            logger.addFilter(_DisconnectLogFilter())


# -- the bearer token --------------------------------------------------------------------


class BearerAuth:
    """Refuse every HTTP request without ``Authorization: Bearer <token>`` (401)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        from starlette.responses import JSONResponse

        response = JSONResponse(
            {"error": "unauthorized", "error_description": "a valid bearer token is required"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="groove"'},
        )
        await response(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
        scheme, _, credentials = given.partition(b" ")
        # Constant time: a timing difference must not tell how much of a guess was right.
        matches = hmac.compare_digest(credentials.strip(), self._token)
        return scheme.lower() == b"bearer" and matches


# -- connections -------------------------------------------------------------------------


def guarded_protocol(limits: HttpLimits) -> type[Any]:
    """uvicorn's h11 protocol with a read timeout per request and a cap on connections."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    received = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR)

    class GuardedH11Protocol(H11Protocol):
        guard: ClassVar[HttpLimits] = limits
        _deadline: asyncio.TimerHandle | None = None
        _waiting_since = 0.0
        _busy_since = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()
            self._make_room()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._disarm_when_received()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection gets its own deadline
                self._disarm_when_received()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._waiting_since = self.loop.time()
            self._deadline = self.loop.call_later(self.guard.read_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _disarm_when_received(self) -> None:
            if self.conn.their_state in received:
                if self._deadline is not None:
                    self._busy_since = self.loop.time()
                self._disarm()

        def _too_slow(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                _log.debug("closing a connection that sent no whole request in time")
                self.transport.close()

        def _make_room(self) -> None:
            mine = [c for c in self.connections if isinstance(c, GuardedH11Protocol)]
            closing = [c for c in mine if c.transport.is_closing()]
            excess = len(mine) - len(closing) - self.guard.max_connections
            if excess <= 0:
                return
            # A connection already closing is on its way out and must not be chosen again:
            # else every newcomer of one accept batch picks the same one and the cap does
            # not hold. abort() rather than close(), so that it is gone by the next turn of
            # the loop even while it still has an answer to flush to a client that does
            # not read; for the same reason a closing one is aborted too.
            for conn in closing:
                conn.transport.abort()
            others = [c for c in mine if c is not self and not c.transport.is_closing()]
            # Those waiting longest for a request first. With none waiting, every slot
            # holds an answer in progress: event streams (GET /mcp) stay open for as long
            # as a client likes, and closing the longest-running one rather than the
            # newcomer keeps a handful of held streams from locking every other client
            # out. A search takes milliseconds, so it is rarely the oldest.
            waiting = sorted((c for c in others if c._deadline), key=lambda c: c._waiting_since)
            busy = sorted((c for c in others if not c._deadline), key=lambda c: c._busy_since)
            _log.debug("connection cap reached: closing %d to make room", excess)
            for conn in (waiting + busy)[:excess]:
                conn.transport.abort()

    return GuardedH11Protocol


# -- sessions ----------------------------------------------------------------------------


def bound_sessions(server: MCPServer, limits: HttpLimits) -> None:
    """At ``limits.max_sessions`` open sessions, close the one idle longest to admit a new one.

    The SDK only refuses (503) at its limit, until some session expires; it offers no way
    to choose one to close, so this wraps the method that admits a session (called under
    the SDK's session lock, so admissions cannot race). mcp is pinned: the test of the cap
    (tests/test_mcp_http.py) notices if that method or the session registry moves.
    """
    manager = server.session_manager
    admit = manager._admit_session

    def admit_with_room(requestor: Any) -> Any:
        if len(manager._server_instances) >= limits.max_sessions:
            _close_idlest(manager)
        return admit(requestor)

    manager._admit_session = admit_with_room  # type: ignore[method-assign]


def _close_idlest(manager: Any) -> None:
    """Close the session whose last request ended longest ago; none while all are busy.

    A session's idle scope has an infinite deadline while a request is in flight (an open
    event stream included), else the time its idle timeout runs out: the smallest finite
    deadline is the session idle longest.
    """
    idle = {
        session_id: transport.idle_scope.deadline
        for session_id, transport in manager._server_instances.items()
        if transport.idle_scope is not None and math.isfinite(transport.idle_scope.deadline)
    }
    if not idle:
        return  # every session is answering: the SDK refuses the newcomer (503)
    session_id = min(idle, key=idle.__getitem__)
    _log.debug("session cap reached: closing the session idle longest")
    # Forgotten at once (its id answers 404 from now on, and the slot is free for the
    # newcomer); cancelling its idle scope ends its server task, which terminates it.
    transport = manager._server_instances.pop(session_id)
    manager._session_owners.pop(session_id, None)
    transport.idle_scope.cancel()


# -- running -----------------------------------------------------------------------------


def http_app(
    server: MCPServer,
    *,
    host: str,
    token: str | None,
    allow_hosts: tuple[str, ...] = (),
    allow_origins: tuple[str, ...] = (),
    limits: HttpLimits | None = None,
) -> ASGIApp:
    """The ASGI app of ``server`` at /mcp, with Host/Origin checks, the token check,
    groove's session limits, and quiet ends for clients that went away."""
    limits = limits or HttpLimits()
    app: ASGIApp = server.streamable_http_app(
        transport_security=security_settings(host, allow_hosts, allow_origins),
        host=host,
        max_sessions=limits.max_sessions,
        session_idle_timeout=limits.session_idle_timeout,
    )
    bound_sessions(server, limits)
    quiet_disconnect_logs()
    app = WellFormedHost(app)
    app = BearerAuth(app, token) if token else app
    return QuietDisconnects(app)


def run_http(
    server: MCPServer,
    *,
    host: str,
    port: int,
    token: str | None,
    limits: HttpLimits,
    allow_hosts: tuple[str, ...] = (),
    allow_origins: tuple[str, ...] = (),
    log_level: str = "info",
) -> None:
    import uvicorn

    app = http_app(
        server,
        host=host,
        token=token,
        allow_hosts=allow_hosts,
        allow_origins=allow_origins,
        limits=limits,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(limits),
        backlog=ACCEPT_BATCH,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
        # Open streams must not hold up a stop (Ctrl-C, a service manager's SIGTERM).
        timeout_graceful_shutdown=3,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        log_level=log_level,
    )
    uvicorn.Server(config).run()
