"""Driving groove as its users' programs do: an MCP client in process, a process killed
mid-write, a server awaited on its port, an embedder watched as it is called."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    pass


T = TypeVar("T")


def drive_mcp(server: Any, scenario: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``scenario(client)`` against an in-process MCP server (``build_mcp_server``)
    with the SDK's real client, and return what it returns."""
    import asyncio

    from mcp import Client

    async def main() -> T:
        async with Client(server) as client:
            return await scenario(client)

    return asyncio.run(main())


def call_tools(server: Any, *requests: tuple[str, dict[str, Any]]) -> list[Any]:
    """Call each ``(tool name, arguments)`` in order on an in-process MCP server; the
    ``CallToolResult`` of each."""

    async def scenario(client: Any) -> list[Any]:
        return [await client.call_tool(name, args) for name, args in requests]

    return drive_mcp(server, scenario)


def kill_midway(
    proc: Any, full_run: float, share: float, clock: Callable[[], float] = time.monotonic
) -> tuple[bool, float]:
    """SIGKILL the started process ``proc`` (a ``subprocess.Popen``) ``share`` of the way
    into a run that took ``full_run`` seconds: whether it was still going (killed), and the
    run length to aim by next (shorter when this one finished first: the machine got
    faster). The process is reaped either way."""
    import signal

    began = clock()
    time.sleep(share * full_run)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    else:
        full_run = min(full_run, clock() - began)
    proc.wait(timeout=60)
    return killed, full_run


class KillRounds:
    """Rounds of a crash-safety test: in each, one started run is SIGKILLed part of the way
    through (:func:`kill_midway`), at a random share (within ``share``, from ``seed``) of
    ``full_run``, the seconds a whole run takes here (shortened as runs finish sooner).

    Iterate :meth:`rounds`; in each round, prepare, :meth:`kill` a run, then check what it
    left. :attr:`kills` counts the runs that were still going when killed."""

    def __init__(self, full_run: float, *, seed: int, share: tuple[float, float]) -> None:
        import random

        self.full_run = full_run
        self.kills = 0
        self._rng = random.Random(seed)
        self._share = share

    @classmethod
    def timed(
        cls, start: Callable[[], Any], *, timeout: float, seed: int, share: tuple[float, float]
    ) -> KillRounds:
        """Rounds aimed by one whole run of ``start()`` (a ``subprocess.Popen``), timed now;
        it must succeed."""
        began = time.monotonic()
        status = start().wait(timeout=timeout)
        assert status == 0, f"the whole run to time failed (exit status {status})"
        return cls(time.monotonic() - began, seed=seed, share=share)

    def rounds(self, most: int, *, enough: int) -> Iterator[int]:
        """Round numbers from 0: ``most`` rounds, or fewer once ``enough`` runs were killed."""
        for round_ in range(most):
            if self.kills >= enough:
                return
            yield round_

    def kill(self, proc: Any) -> bool:
        """Kill the started run ``proc`` part of the way through; whether it was still going."""
        killed, self.full_run = kill_midway(proc, self.full_run, self._rng.uniform(*self._share))
        self.kills += killed
        return killed


def wait_until_listening(proc: Any, port: int, timeout: float = 30.0) -> None:
    """Wait for a server process started by a test to accept connections on loopback
    ``port``; fail with its stderr if it exits first, or after ``timeout`` seconds."""
    import socket

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            stderr = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"the server exited ({proc.returncode}): {stderr}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listened on port {port} in {timeout} s") from None
            time.sleep(0.1)


class WatchedEmbedder:
    """Wraps an embedder for tests of the indexer's embedding thread: counts its calls and
    how many run at once, notes their threads, signals the start of each (``started[n]``
    for call ``n``), and pauses ``pause`` seconds in each so that calls can overlap."""

    def __init__(self, inner: Any, pause: float = 0.02) -> None:
        self.inner = inner
        self.identity = inner.identity
        self.pause = pause
        self.running = 0
        self.most_at_once = 0
        self.threads: set[str] = set()
        self.calls = 0
        self.started = [threading.Event() for _ in range(64)]
        self.lock = threading.Lock()

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed_documents(self, texts: Any) -> Any:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            call, self.calls = self.calls, self.calls + 1
        self.threads.add(threading.current_thread().name)
        self.started[call].set()
        try:
            time.sleep(self.pause)
            return self.inner.embed_documents(texts)
        finally:
            with self.lock:
                self.running -= 1

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)
