"""Progress of ``groove index``: a line every few seconds in a log, a bar on a terminal.

The subprocess tests index with a slowed embedder (a plugin installed on PYTHONPATH as a
distribution, exactly as a third-party one is), so the run lasts long enough to report.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from groove_core.index_report import IndexProgress
from groove_core.progress import (
    SEARCHABLE_NOTE,
    IndexProgressDisplay,
    bar_line,
    describe,
    duration,
)
from groove_core.testing import make_kb, open_kb
from tests.helpers import slow_embedder_site

FILES = 40
#: A log line: the indexing stage (files, no embedder to wait for: short), then embedding.
LINE = re.compile(
    r"^(indexing|embedding) (\d+)% \| (\d+) chunks (indexed|embedded), [\d.]+ chunks/s"
    r"( \| \d+/40 files)?( \| ETA (\d+s|\d+m\d\ds|unknown))? \| elapsed \d+s$"
)


@pytest.fixture
def slow_kb(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    site = slow_embedder_site(tmp_path, "gv_slow", delay=0.03)
    notes = {
        f"n{i:02d}.md": f"# Note {i}\n\nBody of note {i} about topic {i}.\n" for i in range(FILES)
    }
    kb = make_kb(
        tmp_path / "kb", notes, config='[embedder]\nname = "slow-hashing"\nbatch_size = 4\n'
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    for name in ("GROOVE_PROGRESS_INTERVAL", "COLUMNS"):
        env.pop(name, None)
    return kb, env


def _groove(*args: str) -> list[str]:
    return [sys.executable, "-m", "groove_core", *args]


def test_a_log_gets_a_line_every_interval(slow_kb: tuple[Path, dict[str, str]]) -> None:
    kb, env = slow_kb
    env["GROOVE_PROGRESS_INTERVAL"] = "0.2"
    run = subprocess.run(
        _groove("index", str(kb)), env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert "40 added" in run.stdout
    lines = run.stderr.splitlines()
    assert "\r" not in run.stderr and "\x1b" not in run.stderr
    assert len(lines) >= 3, run.stderr  # the embedding alone takes over 1.2 s
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    embedding = [m for m in parsed if m and m.group(1) == "embedding"]
    assert len(embedding) >= 3, lines
    assert all(m.group(4) == "embedded" and m.group(5) is None for m in embedding)
    chunks = [int(m.group(3)) for m in embedding]
    percents = [int(m.group(2)) for m in embedding]
    assert chunks == sorted(chunks) and chunks[-1] > chunks[0]
    assert percents == sorted(percents) and 0 < percents[-1] <= 100
    assert any(m.group(7) not in (None, "unknown") for m in embedding), lines


def test_quiet_and_quick_runs_print_no_progress(slow_kb: tuple[Path, dict[str, str]]) -> None:
    kb, env = slow_kb
    quiet = subprocess.run(
        _groove("index", str(kb), "--quiet"),
        env={**env, "GROOVE_PROGRESS_INTERVAL": "0.05"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    (kb / "n00.md").write_text("# Note 0\n\nedited\n", encoding="utf-8")
    # The default interval (5 s) is longer than this one-file run: nothing but the summary.
    quick = subprocess.run(_groove("index", str(kb)), env=env, capture_output=True, text=True)
    assert quick.stderr == "" and "1 changed" in quick.stdout


def test_a_terminal_gets_a_bar_redrawn_in_place(slow_kb: tuple[Path, dict[str, str]]) -> None:
    kb, env = slow_kb
    master, slave = pty.openpty()
    # A 64-column terminal; stdout is a pipe, so only stderr's own size says so.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 64, 0, 0))
    proc = subprocess.Popen(
        _groove("index", str(kb)), env=env, stdout=subprocess.PIPE, stderr=slave, text=True
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        seen += data
    stdout, _ = proc.communicate(timeout=120)
    os.close(master)
    assert proc.returncode == 0
    assert "40 added" in stdout
    text = seen.decode().replace("\r\n", "\n")  # the terminal's own newline translation
    frames = [f.removesuffix("\n").removesuffix("\x1b[K") for f in text.split("\r") if f]
    assert len(frames) >= 3, text
    # Each frame fits the 64 columns: a wrapped line could not be redrawn in place.
    assert all(f.startswith("[") and len(f) < 64 for f in frames), frames
    # The file count may be cut at the terminal's width (a rate of 1,000 chunks/s or more).
    assert any(re.match(r"^\[#{20}\] indexing 100% \| 40 chunks, [\d.]+/s", f) for f in frames), (
        frames
    )
    assert re.match(r"^\[#{20}\] embedding 100% \| 40 chunks, [\d.]+/s", frames[-1])
    assert any("ETA " in f for f in frames)
    assert text.endswith("\n")  # the bar's line is ended before the summary


def _event(done: int, total: int, chunks: int, files: int = 4) -> IndexProgress:
    return IndexProgress("indexing", "", files, 8, 0, done, total, chunks)


def test_the_bar_puts_the_eta_first_and_fits_the_width() -> None:
    line = bar_line(_event(250, 1000, 30), 10.0, 200)
    assert line == "[#####---------------] indexing 25% ETA 30s | 30 chunks, 3.0/s | 4/8 files"
    embedding = IndexProgress("embedding", "", 0, 0, 30, 30, 120)
    assert (
        bar_line(embedding, 10.0, 200)
        == "[#####---------------] embedding 25% ETA 30s | 30 chunks, 3.0/s"
    )
    assert bar_line(_event(250, 1000, 30), 10.0, 45) == line[:44]


def test_describe_and_eta() -> None:
    assert describe(_event(250, 1000, 30), 10.0) == (
        "indexing 25% | 30 chunks indexed, 3.0 chunks/s | 4/8 files | ETA 30s | elapsed 10s"
    )
    embedding = IndexProgress("embedding", "", 0, 0, 30, 30, 120)
    assert describe(embedding, 10.0) == (
        "embedding 25% | 30 chunks embedded, 3.0 chunks/s | ETA 30s | elapsed 10s"
    )
    assert "ETA unknown" in describe(_event(0, 1000, 0), 1.0)
    done = describe(_event(1000, 1000, 120, files=8), 61.0)
    assert done.endswith("8/8 files | elapsed 1m01s") and "ETA" not in done
    nothing_changed = IndexProgress("indexing", "", 3, 6, 0, 0, 0)
    assert describe(nothing_changed, 0.5).startswith("indexing 50% | 0 chunks")
    assert [duration(s) for s in (0.4, 59, 61, 3599, 3600, 7325)] == [
        "0s",
        "59s",
        "1m01s",
        "59m59s",
        "1h00m",
        "2h02m",
    ]


def test_log_lines_are_throttled_and_the_first_waits_one_interval() -> None:
    now = [0.0]
    out = io.StringIO()
    display = IndexProgressDisplay(out, terminal=False, interval=5.0, clock=lambda: now[0])
    for t in (0.0, 1.0, 4.9, 5.0, 6.0, 9.9, 10.1):
        now[0] = t
        display(_event(int(t * 10), 1000, int(t)))
    display.close()
    lines = out.getvalue().splitlines()
    assert [line.split(" | ")[1] for line in lines] == [
        "5 chunks indexed, 1.0 chunks/s",
        "10 chunks indexed, 1.0 chunks/s",
    ]


def test_a_reembed_then_an_index_run_each_get_their_own_bar(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb")
    open_kb(kb).close()
    out = io.StringIO()
    display = IndexProgressDisplay(out, terminal=True)
    open_kb(kb, index=False).index(reembed=True, progress=display)
    display.close()
    text = out.getvalue()
    assert "re-embedding 100%" in text and "indexing" in text
    assert text.count("\n") == 2  # one line per stage, each ended (nothing to embed after)


def test_a_lasting_embedding_stage_says_once_that_searching_works_meanwhile() -> None:
    now = [0.0]
    out = io.StringIO()
    display = IndexProgressDisplay(out, terminal=False, interval=1.0, clock=lambda: now[0])
    display(_event(1000, 1000, 40, files=8))  # the indexing stage, quick
    for t in (0.5, 2.0, 4.0, 6.0, 8.0, 10.0):
        now[0] = t
        display(IndexProgress("embedding", "", 0, 0, int(t * 5), int(t * 5), 400))
    display.close()
    lines = out.getvalue().splitlines()
    assert lines.count(SEARCHABLE_NOTE) == 1, lines
    # Said once five seconds of embedding have passed (never in a quick run), before the
    # line that shows it.
    assert lines.index(SEARCHABLE_NOTE) == 2, lines
    assert lines[1].endswith("elapsed 4s") and lines[3].endswith("elapsed 6s"), lines
    assert "searchable by its words" in SEARCHABLE_NOTE


def test_a_slow_embedder_still_gets_a_line_every_interval(tmp_path: Path) -> None:
    """Batches minutes apart (here: one batch of 1.5 s) still give a line every interval,
    the stage's clock started before its first batch, not at it (issue #44)."""
    site = slow_embedder_site(tmp_path, "gv_slower", delay=0.25)
    notes = {f"n{i}.md": f"# Note {i}\n\nBody {i}.\n" for i in range(6)}
    config = '[embedder]\nname = "slow-hashing"\nbatch_size = 6\n'
    kb = make_kb(tmp_path / "kb", notes, config=config)
    env = {**os.environ, "PYTHONPATH": str(site), "GROOVE_PROGRESS_INTERVAL": "0.2"}
    env.pop("COLUMNS", None)
    run = subprocess.run(
        _groove("index", str(kb)), env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    waiting = [
        line
        for line in run.stderr.splitlines()
        if line.startswith("embedding 0% | 0 chunks embedded")
    ]
    assert len(waiting) >= 3, run.stderr  # heartbeats while the one batch embeds
    assert any(line.endswith("elapsed 1s") for line in waiting), run.stderr
