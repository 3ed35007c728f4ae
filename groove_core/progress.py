"""How ``groove index`` shows its progress: a bar on a terminal, a line every few seconds
otherwise (a log, a pipe, CI), so a long run is never silent and never floods the log.

Both say the same things: chunks indexed (the first stage, which makes every changed file
searchable by its words) or embedded (the second, ADR-0015), the rate, how far the stage
is (by the bytes of changed files, or chunks when embedding) and an ETA drawn from that
fraction. An embedding stage that lasts says once that searching works meanwhile.
"""

from __future__ import annotations

import io
import os
import shutil
import threading
import time
from collections.abc import Callable
from typing import TextIO

from groove_core.index_report import IndexProgress

#: Seconds between two progress lines when stderr is not a terminal.
DEFAULT_LINE_INTERVAL = 5.0
#: Overrides :data:`DEFAULT_LINE_INTERVAL` (seconds, a float).
INTERVAL_ENV = "GROOVE_PROGRESS_INTERVAL"
#: Seconds between two redraws of the bar: often enough to look alive, rarely enough to be
#: cheap on a slow terminal.
BAR_REDRAW = 0.1
#: After this many seconds of embedding, the display says once that the KB is searchable
#: meanwhile (a quick run is not told what it does not need to know).
SEARCHABLE_NOTE_AFTER = 5.0
#: That line.
SEARCHABLE_NOTE = (
    "every file is searchable by its words now; semantic search covers each chunk once it "
    "is embedded (interrupting is safe: the next 'groove index' goes on from there)"
)


def line_interval() -> float:
    """The interval from :data:`INTERVAL_ENV`, or the default when unset or not a number."""
    raw = os.environ.get(INTERVAL_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_LINE_INTERVAL
    return value if value >= 0 else DEFAULT_LINE_INTERVAL


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``: short, and stable in width for a redrawn line."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class IndexProgressDisplay:
    """A :data:`~groove_core.indexer.ProgressFn` that writes to ``stream``; call
    :meth:`close` when the run ends (it ends the bar's line).

    Between events it keeps time itself (``heartbeat``, on by default with the real
    clock): a stage whose events are minutes apart (a slow embedder's batches, its
    start-up) still gets a line every interval, its elapsed time going on."""

    def __init__(
        self,
        stream: TextIO,
        *,
        terminal: bool,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool | None = None,
    ) -> None:
        self.stream = stream
        self.terminal = terminal
        self.interval = (
            BAR_REDRAW if terminal else (line_interval() if interval is None else interval)
        )
        self.clock = clock
        self._stage = ""
        self._started = 0.0
        self._last_shown: float | None = None
        self._current: IndexProgress | None = None
        self._unshown = False
        self._event_at = 0.0
        self._bar_drawn = False
        self._noted = False
        self._lock = threading.Lock()
        self._heartbeat = clock is time.monotonic if heartbeat is None else heartbeat
        self._stopped = threading.Event()
        self._ticker: threading.Thread | None = None

    def __call__(self, event: IndexProgress) -> None:
        with self._lock:
            now = self.clock()
            if event.stage != self._stage:
                self._end_bar()
                self._stage, self._started = event.stage, now
                # A log's first line comes after one interval: a quick run stays silent.
                self._last_shown = None if self.terminal else now
            self._current, self._unshown, self._event_at = event, True, now
            if self._last_shown is None or now - self._last_shown >= self.interval:
                self._last_shown = now
                self._show(now)
        if self._heartbeat and self._ticker is None and self.interval > 0:
            self._ticker = threading.Thread(target=self._tick, name="groove-progress", daemon=True)
            self._ticker.start()

    def close(self) -> None:
        self._stopped.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        with self._lock:
            self._end_bar()

    def _tick(self) -> None:
        """Show the stage again, its elapsed time going on, when no event came for an
        interval (a terminal's bar: every second)."""
        every = max(self.interval, 1.0) if self.terminal else self.interval
        while not self._stopped.wait(every):
            with self._lock:
                now = self.clock()
                if self._current is None or self._stopped.is_set():
                    continue
                if self._last_shown is not None and now - self._last_shown < every:
                    continue
                self._last_shown = now
                self._show(now)

    def _show(self, now: float) -> None:
        if self._current is None:
            return
        event, elapsed = self._current, now - self._started
        self._unshown = False
        if event.stage == "embedding" and elapsed >= SEARCHABLE_NOTE_AFTER and not self._noted:
            self._noted = True
            # On its own line, above the bar (redrawn below it).
            self.stream.write(("\r\x1b[K" if self._bar_drawn else "") + SEARCHABLE_NOTE + "\n")
        if self.terminal:
            width = terminal_width(self.stream)
            self.stream.write("\r" + bar_line(event, elapsed, width) + "\x1b[K")
            self._bar_drawn = True
        else:
            self.stream.write(describe(event, elapsed) + "\n")
        self.stream.flush()

    def _end_bar(self) -> None:
        """On a terminal, the stage's last state (the bar ends full, not where the last
        redraw happened to fall), then the end of its line."""
        if self._bar_drawn:
            if self._unshown:
                self._show(self._event_at)
            self.stream.write("\n")
            self.stream.flush()
            self._bar_drawn = False
        self._current, self._unshown = None, False


def terminal_width(stream: TextIO) -> int:
    """The width of the terminal ``stream`` draws on: ``$COLUMNS``, else the stream's own
    terminal (stdout, which shutil asks, may be a pipe while stderr is the terminal)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        columns = 0
    return columns if columns > 0 else shutil.get_terminal_size().columns


def fraction(event: IndexProgress) -> float | None:
    """How far the run is, from 0 to 1; None before anything is known to need work."""
    if event.work_total > 0:
        return min(event.work_done / event.work_total, 1.0)
    if event.files_total > 0:
        return event.files_done / event.files_total
    return None


def _eta(event: IndexProgress, elapsed: float) -> str | None:
    done = fraction(event)
    if done is None or done >= 1:
        return None
    if done == 0 or elapsed <= 0:
        return "unknown"
    return duration(elapsed * (1 - done) / done)


def _chunks(event: IndexProgress) -> tuple[int, str]:
    """The chunks the stage has done, and what it did to them."""
    if event.stage in ("embedding", "re-embedding"):
        return event.chunks_embedded, "embedded"
    return event.chunks_indexed, "indexed"  # indexing, or filling a leg's index


def _rate(event: IndexProgress, elapsed: float) -> float:
    return _chunks(event)[0] / elapsed if elapsed > 0 else 0.0


def describe(event: IndexProgress, elapsed: float) -> str:
    """One line for a log: ``indexing 42% | 1200 chunks indexed, 850.3 chunks/s |
    120/400 files | ETA 20s | elapsed 14s``, then ``embedding 3% | 300 chunks embedded,
    5.1 chunks/s | ETA 31m40s | elapsed 59s``."""
    done = fraction(event)
    parts = [event.stage if done is None else f"{event.stage} {done:.0%}"]
    count, verb = _chunks(event)
    parts.append(f"{count} chunks {verb}, {_rate(event, elapsed):.1f} chunks/s")
    if event.files_total:
        parts.append(f"{event.files_done}/{event.files_total} files")
    eta = _eta(event, elapsed)
    if eta is not None:
        parts.append(f"ETA {eta}")
    parts.append(f"elapsed {duration(elapsed)}")
    return " | ".join(parts)


def bar_line(event: IndexProgress, elapsed: float, width: int) -> str:
    """``[#####-----] 42% ETA 1m20s | 1200 chunks, 85.3/s | 120/400 files``: the ETA
    first, so a narrow terminal keeps it; cut to the width so the line never wraps (a
    wrapped line cannot be redrawn with a carriage return)."""
    done = fraction(event) or 0.0
    cells = 20
    filled = int(done * cells)
    head = f"[{'#' * filled}{'-' * (cells - filled)}] {event.stage} {done:.0%}"
    eta = _eta(event, elapsed)
    parts = [head if eta is None else f"{head} ETA {eta}"]
    parts.append(f"{_chunks(event)[0]} chunks, {_rate(event, elapsed):.1f}/s")
    if event.files_total:
        parts.append(f"{event.files_done}/{event.files_total} files")
    return " | ".join(parts)[: max(width - 1, 1)]
