"""The copier of the embedding child's output (groove_core.embed_worker): a process the
child started and left running holds the pipe open, and the copier waited for its end for
ever (close() gave up after 2 s and left a thread and a descriptor behind, each run)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time

from groove_core import embed_worker


def test_the_copier_ends_and_closes_the_pipe_though_a_grandchild_holds_it() -> None:
    # The child writes, starts a grandchild that inherits the pipe, and exits.
    proc = subprocess.Popen(
        ["sh", "-c", "echo last words; sleep 30 & exit 0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stop = threading.Event()
    copier = threading.Thread(target=embed_worker._copy_to_stderr, args=(proc, stop), daemon=True)
    try:
        copier.start()
        proc.wait(10)
        began = time.monotonic()
        stop.set()
        copier.join(5)
        assert not copier.is_alive(), "the copier waits for a pipe a grandchild holds"
        assert time.monotonic() - began < embed_worker.COPY_AFTER_STOP + 1
        assert proc.stdout is not None and proc.stdout.closed
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)


def test_the_copier_copies_to_the_pipes_end_untold() -> None:
    proc = subprocess.Popen(["sh", "-c", "echo hello"], stdout=subprocess.PIPE)
    copier = threading.Thread(target=embed_worker._copy_to_stderr, args=(proc,), daemon=True)
    copier.start()
    copier.join(5)
    proc.wait(5)
    assert not copier.is_alive()
    assert proc.stdout is not None and proc.stdout.closed
