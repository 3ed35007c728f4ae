"""Keep the index current while files change: poll, debounce, re-index incrementally.

Polling (one ``stat`` per file a loader claims, per interval) needs no extra dependency
and works the same on every OS and file system, network mounts included; at 10,000 files
a poll costs tens of milliseconds. A burst of saves is one re-index: after a change is seen, the
watcher waits until the tree stops changing for ``debounce`` seconds.

A run's vector pass (ADR-0015) can last long with a slow embedder: the watcher stops it
between batches when a file changes, indexes the change, and goes on embedding after, so
an edit is searchable within seconds and the server still finishes the embedding.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from groove_core.index_report import IndexProgress, IndexReport
from groove_core.logs import get_logger
from groove_core.walk import walk_kb

if TYPE_CHECKING:
    from groove_core.app import Groove

Snapshot = dict[str, tuple[int, int]]
#: Documents a re-index added, modified and removed (KB-relative paths).
ChangesFn = Callable[[list[str], list[str], list[str]], None]

log = get_logger("groove.watch")

#: A failed re-index is tried again after this many seconds without a change, doubled after
#: each failure in a row up to RETRY_MAX_SECONDS (a model server away, a full disk).
RETRY_SECONDS = 5.0
RETRY_MAX_SECONDS = 600.0


class Watcher:
    """Re-indexes ``app``'s knowledge base whenever the files its loaders read change.

    Uses its own :class:`Groove` (and so its own SQLite connection), so a server in the
    same process keeps searching through WAL while the watcher writes.
    """

    def __init__(
        self,
        app: Groove,
        *,
        interval: float = 1.0,
        debounce: float = 0.5,
        on_report: Callable[[IndexReport], None] | None = None,
        on_changes: ChangesFn | None = None,
    ) -> None:
        from groove_core.app import Groove

        self.app = Groove(app.kb, app.config, app.plugins)
        self.interval = interval
        self.debounce = debounce
        self.on_report = on_report or (lambda _report: None)
        self.on_changes = on_changes
        #: The running index run's latest progress and when it began (None between runs).
        self._progress: tuple[IndexProgress, float] | None = None
        self._began = 0.0
        #: The tree before the changes the next run indexes (what on_changes is told).
        self._before: Snapshot | None = None
        self.stop = threading.Event()
        self.runs = 0
        #: Chunks the last run left without a vector: the next poll goes on embedding.
        self.pending = 0
        #: The tree the next run indexes: its vector pass stops when the tree differs.
        self._baseline: Snapshot | None = None
        #: Runs failed in a row, and when to try again without a change (monotonic).
        self._failures = 0
        self._retry_at: float | None = None

    def snapshot(self) -> Snapshot:
        skipped: list[tuple[str, str]] = []
        files = walk_kb(
            self.app.kb,
            self.app.config,
            self.app.index_file,
            skipped,
            loaders=self.app.plugins.loaders(),
        )
        return {f.rel: (f.size, f.mtime_ns) for f in files}

    def _settle(self, current: Snapshot) -> Snapshot:
        """Wait until two snapshots ``debounce`` apart agree (a burst of saves is over)."""
        while not self.stop.wait(self.debounce):
            following = self.snapshot()
            if following == current:
                break
            current = following
        return current

    def progress(self) -> str | None:
        """The running re-index as the CLI's progress line says it, or None when idle."""
        from groove_core.progress import describe

        current = self._progress
        if current is None:
            return None
        event, began = current
        return describe(event, time.monotonic() - began)

    def _on_progress(self, event: IndexProgress) -> None:
        self._progress = (event, self._began)

    def _reindex(self) -> None:
        before, self._before = self._before, None
        self._began = time.monotonic()
        try:
            report = self.app.index(
                stop=self._interrupter(self._baseline), progress=self._on_progress
            )
        except Exception as err:  # keep watching: a later run may succeed
            self._failures += 1
            wait = min(RETRY_MAX_SECONDS, RETRY_SECONDS * 2 ** (self._failures - 1))
            self._retry_at = time.monotonic() + wait
            log.error("re-index failed", error=str(err), retry_seconds=wait)
            self.pending = 0  # tried again on the next change or after the wait, not every poll
            # What it wrote stays (an update writes each batch searchable before embedding
            # it); its changes are told with the run that succeeds, from the same tree.
            self._before = before
            return
        finally:
            self._progress = None
        self.runs += 1
        self._failures, self._retry_at = 0, None
        self.pending = report.vectors_pending
        log.info(
            "re-indexed",
            added=report.added,
            changed=report.changed,
            removed=report.removed,
            embedded=report.chunks_embedded,
            not_embedded=report.vectors_pending,
            seconds=round(report.seconds, 2),
        )
        self.on_report(report)
        if self.on_changes is not None and before is not None and self._baseline is not None:
            after = self._baseline
            self.on_changes(
                sorted(after.keys() - before.keys()),
                sorted(p for p in after.keys() & before.keys() if after[p] != before[p]),
                sorted(before.keys() - after.keys()),
            )

    def _interrupter(self, baseline: Snapshot | None) -> Callable[[], bool]:
        """What the vector pass asks between batches: stop when the watcher stops, or
        when the tree no longer matches ``baseline`` (looked at once an interval at most)."""
        looked = time.monotonic()

        def stop() -> bool:
            nonlocal looked
            if self.stop.is_set():
                return True
            if baseline is None or time.monotonic() - looked < self.interval:
                return False
            looked = time.monotonic()
            return self._guarded(self.snapshot, baseline) != baseline

        return stop

    def run(self) -> None:
        """Index once to catch up, then watch until :attr:`stop` is set.

        The baseline is taken before catching up: an edit made while that first index runs
        then differs from it and is indexed on the next poll (taken after, it would match
        the edited file and be missed until the file changed again).
        """
        last = self._baseline = self._guarded(self.snapshot)
        self._reindex()
        while not self.stop.wait(self.interval):
            last = self._guarded(functools.partial(self._cycle, last), last)

    def _cycle(self, last: Snapshot | None) -> Snapshot:
        """One poll: re-index when the tree changed; the snapshot to compare the next with."""
        current = self.snapshot()
        due = self._retry_at is not None and time.monotonic() >= self._retry_at
        if current == last and not self.pending and not due:
            return current
        settled = current if current == last else self._settle(current)
        if not self.stop.is_set():
            self._baseline = settled
            if self._before is None:  # else a failed run's tree, whose changes are untold
                self._before = last
            self._reindex()
        return settled

    def _guarded(
        self, step: Callable[[], Snapshot], fallback: Snapshot | None = None
    ) -> Snapshot | None:
        """Run one step; any failure is logged and watching goes on (a thread that died here
        would leave a server answering from a stale index for good)."""
        try:
            return step()
        except Exception as err:
            log.error("watch cycle failed", error=str(err), kind=type(err).__name__)
            return fallback

    def start(self) -> threading.Thread:
        """Run in a daemon thread (for ``groove serve --watch``)."""
        thread = threading.Thread(target=self.run, name="groove-watch", daemon=True)
        thread.start()
        return thread
