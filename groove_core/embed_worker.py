"""Embedding in a process of its own, for a long index run.

An in-process embedder that computes on the CPU (the default one is numpy) needs the
interpreter lock between its calls into native code. Beside it, the rest of an index run
(reading, chunking, folding, a storage backend's own Python) takes that lock in turns with
it, and the embedding, which sets the run's length, runs slower than alone: on PostgreSQL,
whose writer computes term statistics in Python, a 10k-chunk run took 1.12–1.29× the
embedder alone (docs/benchmarks.md, "The embedder in a process of its own"). In a child
process the embedding keeps a core to itself and the parent process's work runs on the other.

The child builds the embedder from the same configuration and plugins as the parent and
answers batches of texts with their vectors over a socket pair (``multiprocessing``'s
message framing); nothing else passes between them. It lives for one index run: the parent
closes its end when the run ends, and a child whose parent died sees the socket close (or,
stuck in a batch, that its parent is gone) and exits. The parent checks every batch as it
would its own embedder's (:func:`groove_core.embedding.checked_vectors`, in the indexer),
and the child's identity against its own embedder's: a child that builds another embedder
is not used (the run embeds in its own process, as when the child cannot start).

A child that is stopped (SIGSTOP, or a Ctrl-Z sent to it alone) is not waited for without
end: the parent looks at it while it waits for an answer, and one that stays stopped for
:data:`STOPPED_SECONDS` is killed, which counts as a child that could not start (the run
embeds in its own process) or that died during the run (the run's vector pass fails with
one line). What the child writes reaches the standard error of the parent through a pipe
the parent reads, never through that descriptor itself: a child orphaned while stopped
cannot keep that stream (a pipe to ``tee``, say) open after the parent has gone.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from groove_core.embedding import EmbedderError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    import numpy as np

    from groove_core.config import GrooveConfig

#: What a run must read (bytes of changed files) before ``own_process = "auto"`` embeds in a
#: child: about a thousand chunks, tens of seconds of the default embedder. The child's start
#: (about half a second, overlapping the run's first files) is lost in such a run; a short
#: one (an edit, a few files) keeps the embedder of the process it runs in.
OWN_PROCESS_BYTES = 1_000_000
#: Or how many chunks wait for a vector when the run starts (a run after one that was
#: interrupted or stopped reads little and embeds what that one left; a re-embed reads none).
OWN_PROCESS_CHUNKS = 1_000
#: Seconds a child may stay stopped (SIGSTOP) while the parent waits for it; then it is
#: killed. A debugger's stop (tracing) does not count.
STOPPED_SECONDS = 10.0
#: Seconds between two looks of the parent at a child it waits for.
STOP_POLL = 1.0


def available() -> bool:
    """Whether this platform can run the child (Unix: the socket is passed by descriptor)."""
    return os.name == "posix" and bool(sys.executable)


def wanted(
    config: GrooveConfig, embedder: Any, work_bytes: int, waiting: Callable[[], int]
) -> bool:
    """Whether a run that reads ``work_bytes`` embeds in a child, by ``[embedder]
    own_process``: ``"auto"`` for an embedder that says it computes in this process
    (``cpu_bound``) and a run that reads at least :data:`OWN_PROCESS_BYTES` or starts with
    at least :data:`OWN_PROCESS_CHUNKS` chunks waiting for a vector (``waiting()``, asked
    only then)."""
    mode = config.embedder.own_process
    if mode == "never" or not available():
        return False
    if mode == "always":
        return True
    if not getattr(embedder, "cpu_bound", False):
        return False
    return work_bytes >= OWN_PROCESS_BYTES or waiting() >= OWN_PROCESS_CHUNKS


@contextlib.contextmanager
def run_embedder(
    config: GrooveConfig,
    embedder: Any,
    *,
    allowed: bool,
    work_bytes: int,
    waiting: Callable[[], int],
    warnings: list[tuple[str, str]],
) -> Iterator[Any]:
    """The embedder for one run: ``embedder``, or an :class:`EmbedderProcess` of it when
    ``allowed`` (the plugins are installed ones) and :func:`wanted`; closed when the run
    ends, its warning (the run embedded here after all) added to ``warnings``."""
    if not (allowed and wanted(config, embedder, work_bytes, waiting)):
        yield embedder
        return
    worker = EmbedderProcess(config, embedder)
    try:
        yield worker
    finally:
        worker.close()
        if worker.warning is not None:
            warnings.append(("[embedder] own_process", worker.warning))


class _NoChild(Exception):
    """The child did not get as far as answering: the run embeds in its own process."""


class _Stopped(Exception):
    """The child stayed stopped while the parent waited for it, and was killed."""


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped by a signal (SIGSTOP, SIGTSTP): its state in
    ``/proc`` (Linux), else ``ps``'s."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[:1]
        return state == [b"T"]
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return False  # Linux: the process is gone
    except OSError:
        return False
    try:
        done = subprocess.run(
            ["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.stdout.strip().startswith(b"T")


#: Seconds the copier of the child's output goes on once told to stop (a process the
#: child started may hold the pipe open, and write, for ever).
COPY_AFTER_STOP = 1.0


def _copy_to_stderr(proc: subprocess.Popen[bytes], stop: threading.Event | None = None) -> None:
    """Copy what the child writes to this process's standard error (its descriptor: a
    command's captured ``sys.stderr`` is not where the child's lines belong), until the
    pipe's end, or, once ``stop`` is set, until nothing more is there to read (at most
    :data:`COPY_AFTER_STOP` seconds): a process the child started (and left running) keeps
    the pipe open, and the copier must not wait on it for ever. Closes the pipe."""
    import selectors

    pipe = proc.stdout
    assert pipe is not None
    with pipe, selectors.DefaultSelector() as selector:
        selector.register(pipe.fileno(), selectors.EVENT_READ)
        until: float | None = None
        while True:
            if stop is not None and stop.is_set():
                until = until or time.monotonic() + COPY_AFTER_STOP
                if time.monotonic() > until:
                    return
            if not selector.select(0.1):
                if until is not None:
                    return  # told to stop, and nothing more to copy
                continue
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                return
            with contextlib.suppress(OSError):
                while chunk:
                    chunk = chunk[os.write(2, chunk) :]


class EmbedderProcess:
    """An embedder whose batches are embedded by a child process (see the module's doc).

    It is ``embedder``, the parent process's: the same identity and dimension. The child
    starts on the first batch, in the thread that asks for it (the indexer's embedding
    thread), so the run's first files are written meanwhile. A child that cannot start or build the
    embedder leaves the run to ``embedder`` in this process, as without a child, and
    :attr:`warning` says why; one that dies later is an :class:`EmbedderError` (the chunks
    left keep no vector until the next run). Batches are asked one at a time, as the
    indexer does; :meth:`close` ends the child.
    """

    cpu_bound = False  # the work is the child's

    def __init__(self, config: GrooveConfig, embedder: Any) -> None:
        self._config = config
        self._embedder = embedder
        self._conn: Connection | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._dim = 0
        self._lock = threading.Lock()
        self._closed = False
        self._here = False  # embedding in this process: the child could not start
        self._copier: threading.Thread | None = None
        #: Tells the copier to finish once the child is gone (:func:`_copy_to_stderr`).
        self._copied = threading.Event()
        #: Why the run embedded in this process after all (None: it did not).
        self.warning: str | None = None

    @property
    def identity(self) -> str:
        identity: str = self._embedder.identity
        return identity

    @property
    def dim(self) -> int:
        if self._dim:
            return self._dim
        dim: int = self._embedder.dim
        return dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            if self._closed:
                raise EmbedderError("the embedding process was closed")
            if not self._here and self._conn is None:
                try:
                    self._conn = self._start()
                except _NoChild as err:
                    self._here = True
                    self.warning = f"{err}; the run embedded in its own process"
            if self._here:
                vectors: np.ndarray = self._embedder.embed_documents(texts)
                return vectors
            conn = self._conn
            assert conn is not None
            never = '[embedder] own_process = "never" embeds in the run\'s own process'
            try:
                conn.send(("embed", list(texts)))
                reply = self._receive(conn)
            except (EOFError, OSError):
                raise EmbedderError(f"{self._died()}; {never}") from None
            except _Stopped as err:
                raise EmbedderError(f"{err}; {never}") from None
            answered: np.ndarray = _answer(reply)
            return answered

    def embed_query(self, text: str) -> np.ndarray:
        # A query is embedded where it is asked (a search never comes here).
        vector: np.ndarray = self._embedder.embed_query(text)
        return vector

    def _start(self) -> Connection:
        from multiprocessing.connection import Connection

        identity = self.identity  # the parent process's (one that cannot say fails here)
        mine, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                # -P: nothing importable from the folder groove runs in (a numpy.py there,
                # a checkout of groove) shadows what the child imports.
                [sys.executable, "-P", "-m", "groove_core.embed_child", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                # Never this process's standard output (an MCP stdio server speaks there),
                # and not its standard error itself: a pipe this process copies there.
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                # Not the terminal's process group: a Ctrl-C is the parent process's to handle,
                # which then closes the socket.
                start_new_session=True,
            )
        except OSError as err:
            mine.close()
            raise _NoChild(f"the embedding process could not start: {err}") from None
        finally:
            theirs.close()
        self._copied = threading.Event()
        self._copier = threading.Thread(
            target=_copy_to_stderr,
            args=(self._proc, self._copied),
            name="groove-embed-stderr",
            daemon=True,
        )
        self._copier.start()
        conn = Connection(mine.detach())
        try:
            conn.send(("config", self._config))
            ready = self._receive(conn)
        except (EOFError, OSError):
            conn.close()
            raise _NoChild(self._died()) from None
        except _Stopped as err:
            conn.close()
            raise _NoChild(str(err)) from None
        except BaseException:
            conn.close()
            self._reap(0)
            raise
        problem = None
        if ready[0] != "ready":
            problem = f"the embedding process could not make the embedder: {ready[1]}"
        elif ready[1] != identity:
            problem = f"the embedding process made the embedder {ready[1]}, not {identity}"
        if problem is not None:
            conn.close()
            self._reap()
            raise _NoChild(problem)
        self._dim = ready[2]
        return conn

    def _receive(self, conn: Connection) -> Any:
        """The child's next message; :class:`_Stopped` (the child killed) when it stays
        stopped for :data:`STOPPED_SECONDS` meanwhile."""
        proc = self._proc
        stopped_since: float | None = None
        while not conn.poll(STOP_POLL):
            if proc is None or not _stopped(proc.pid):
                stopped_since = None
                continue
            now = time.monotonic()
            stopped_since = now if stopped_since is None else stopped_since
            if now - stopped_since >= STOPPED_SECONDS:
                proc.kill()
                proc.wait()
                raise _Stopped(
                    f"the embedding process (pid {proc.pid}) was stopped (SIGSTOP) and did "
                    f"not go on for {STOPPED_SECONDS:g} s: it was ended"
                )
        return conn.recv()

    def _died(self) -> str:
        code = self._reap()
        how = f"exit status {code}" if code is None or code >= 0 else f"signal {-code}"
        return f"the embedding process ended unexpectedly ({how})"

    def _reap(self, wait: float = 5.0) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        try:
            return proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def close(self) -> None:
        """End the child: it exits when its socket closes (killed if it does not within
        seconds). A batch still in flight (the run interrupted while waiting for it) is not
        waited for: the child is killed, and the waiting embedding ends with an error."""
        self._closed = True
        if not self._lock.acquire(blocking=False):
            proc = self._proc
            if proc is not None:
                proc.kill()
            self._lock.acquire()
        try:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            self._reap()
            self._proc = None
            if self._copier is not None:
                # The child's last words, before the run's own; the copier ends (and
                # closes the pipe) even where a process the child left holds it open.
                self._copied.set()
                self._copier.join(2.0 + COPY_AFTER_STOP)
                self._copier = None
        finally:
            self._lock.release()


def _answer(reply: tuple[Any, ...]) -> Any:
    if reply[0] == "vectors":
        return reply[1]
    raise EmbedderError(str(reply[1]))


def _pickled(message: tuple[Any, ...]) -> bytes:
    """``message`` as :meth:`Connection.send` would send it (pickled first, so that what
    cannot be pickled is an error here, before anything is written)."""
    from multiprocessing.reduction import ForkingPickler

    return bytes(ForkingPickler.dumps(message))


def serve(conn: Connection, make: Callable[[GrooveConfig], Any]) -> None:
    """The child's work: build the embedder from the parent process's configuration (``make``),
    then answer batches until the parent closes the socket."""
    import numpy as np

    from groove_core.errors import GrooveError

    try:
        _kind, config = conn.recv()
    except EOFError:
        return
    try:
        embedder = make(config)
        conn.send(("ready", embedder.identity, embedder.dim))
    except GrooveError as err:
        conn.send(("error", str(err)))
        return
    except Exception as err:  # reported to the parent, which raises it
        conn.send(("error", f"the embedder could not be made: {type(err).__name__}: {err}"))
        return
    while True:
        try:
            _kind, texts = conn.recv()
        except EOFError:
            return
        try:
            # An array, whatever the embedder returned (a tensor would make the parent
            # import its library to unpickle it); the parent checks it as always.
            vectors = np.asarray(embedder.embed_documents(texts))
            answer = _pickled(("vectors", vectors))
        except GrooveError as err:
            answer = _pickled(("error", str(err)))
        except Exception as err:  # reported to the parent, which raises it
            failed = f"the embedder {embedder.identity} failed: {type(err).__name__}: {err}"
            answer = _pickled(("error", failed))
        conn.send_bytes(answer)
