"""Never a corrupt index: kills at random points, doctor, repair."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaldata import EVALDATA
from groove_core import indexer as indexer_mod
from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.registry import CONFIG_HOME_ENV, load_registry
from groove_core.sqlite.store import Store, check_consistency
from groove_core.storage import StoreError
from groove_core.testing import KillRounds, make_kb, open_kb
from tests.helpers import index_content

KILL_CONFIG = '[embedder]\nname = "hashing"\nbatch_size = 8\n'


def _corpus(tmp_path: Path, files: int) -> Path:
    kb = make_kb(tmp_path / "kb", {}, config=KILL_CONFIG)
    source = sorted((EVALDATA / "jsquad-ja-para" / "docs").glob("*.md"))[:files]
    assert len(source) == files, "the shared jsquad collection is missing"
    for path in source:
        shutil.copy(path, kb / path.name)
    return kb


def _start_index(kb: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "groove_core", "index", str(kb)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def _python(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_kill_rounds_end_once_enough_runs_were_killed_while_going() -> None:
    killer = KillRounds(0.5, seed=1, share=(0.1, 0.2))
    seen = []
    for round_ in killer.rounds(5, enough=2):
        seen.append(round_)
        assert killer.kill(_python("import time; time.sleep(60)"))
    assert seen == [0, 1] and killer.kills == 2
    # A run that ends before its kill point is not counted, and aims the next ones sooner.
    finishing = KillRounds(2.0, seed=1, share=(0.9, 0.9))
    assert not finishing.kill(_python("pass"))
    assert finishing.kills == 0 and finishing.full_run < 2.0


def test_kill_rounds_are_aimed_by_a_whole_run_that_must_succeed() -> None:
    killer = KillRounds.timed(lambda: _python("pass"), timeout=60, seed=1, share=(0.5, 0.5))
    assert 0 < killer.full_run < 60
    with pytest.raises(AssertionError, match="exit status 3"):
        KillRounds.timed(lambda: _python("raise SystemExit(3)"), timeout=60, seed=1, share=(0, 1))


def test_sigkill_at_random_points_never_corrupts_the_index(tmp_path: Path) -> None:
    files = 1145
    kb = _corpus(tmp_path, files)
    expected = index_content(open_kb(_corpus(tmp_path / "clean", files)).index_file)
    index = Groove.open(kb).index_file
    # Kill points spread over a whole run as long as this machine takes for one.
    killer = KillRounds.timed(
        lambda: _start_index(kb), timeout=120, seed=20261129, share=(0.25, 0.95)
    )
    for round_ in killer.rounds(16, enough=6):
        if index.parent.exists():
            shutil.rmtree(index.parent)
        killer.kill(_start_index(kb))
        if index.exists():
            try:
                store = Store.open(index)
            except StoreError as err:
                # killed after the file was created, before its schema was written: an
                # empty index, which Store.open names and the next run fills (below)
                assert "is empty" in str(err), f"after kill {round_}: {err}"
            else:
                assert check_consistency(store).ok, f"inconsistent after kill {round_}"
                store.close()
        # The next normal run completes and equals a clean build.
        report = Groove.open(kb).index()
        assert report.documents_total == files
        assert index_content(index) == expected, f"differs from a clean build after kill {round_}"
    assert killer.kills >= 4, f"only {killer.kills} runs were still going when killed"


def test_doctor_finds_and_repairs_disagreeing_rows(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    expected = index_content(app.index_file)
    assert app.doctor().healthy
    conn = app.store.conn
    victim = conn.execute("SELECT id FROM chunks ORDER BY id LIMIT 1").fetchone()[0]
    conn.execute("DELETE FROM vec_chunks WHERE chunk_id = ?", (victim,))
    conn.execute(
        "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (9999, 'x', 'y', 'z')"
    )
    app.close()
    runner = CliRunner()
    result = runner.invoke(build_cli(None), ["doctor", str(notes_kb)])
    assert result.exit_code == 1
    assert "1 rows of the fts leg's index without a chunk" in result.output
    assert "1 chunks without a vector" in result.output
    result = runner.invoke(build_cli(None), ["doctor", str(notes_kb), "--repair"])
    assert result.exit_code == 0, result.output
    assert "re-indexed 1 documents" in result.output
    assert Groove.open(notes_kb).doctor().healthy
    assert index_content(app.index_file) == expected


def test_doctor_rebuilds_a_damaged_file(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    expected = index_content(app.index_file)
    app.close()
    data = bytearray(app.index_file.read_bytes())
    data[:100] = b"\x00" * 100  # destroy the header
    app.index_file.write_bytes(bytes(data))
    result = app.doctor()
    assert not result.healthy
    repaired = app.doctor(repair=True)
    assert repaired.rebuilt
    assert index_content(app.index_file) == expected


def test_read_only_index_folder_is_a_clear_error(notes_kb: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permission bits: make the index path a file to block the folder.
        config = '[embedder]\nname = "hashing"\n[index]\npath = "blocker/index.sqlite"\n'
        (notes_kb / "groove.toml").write_text(config, encoding="utf-8")
        (notes_kb / "blocker").write_text("a file where the folder should be")
    else:
        (notes_kb / ".groove").mkdir()
        (notes_kb / ".groove").chmod(0o500)
    result = CliRunner().invoke(build_cli(None), ["index", str(notes_kb)])
    assert result.exit_code == 1
    assert "cannot create the index folder" in result.output or "cannot open" in result.output
    assert "Traceback" not in result.output


#: Runs in a mount namespace of its own (a user namespace maps the caller to root there, so
#: it needs no privileges): the KB folder is bind-mounted over itself read-only, then each
#: line of COMMANDS ("NAME ARG...") runs groove, its output and status going to OUT.
READ_ONLY_SCRIPT = """
set -u
mount --bind "$KB" "$KB" && mount -o remount,bind,ro "$KB" || exit 99
echo "$COMMANDS" | while read -r name args; do
    eval "set -- $args"
    "$PY" -m groove_core "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
    echo $? >"$OUT/$name.rc"
done
"""


def _on_a_read_only_mount(kb: Path, out: Path, commands: str) -> dict[str, tuple[int, str, str]]:
    """Run groove ``commands`` on ``kb`` mounted read-only: {name: (status, stdout, stderr)}.
    A real read-only mount, because root ignores permission bits, and SQLite meets EROFS
    (no -shm can be made beside the index) where a chmod'ed folder stops only other users."""
    out.mkdir()
    env = {
        **os.environ,
        **{"KB": str(kb), "OUT": str(out), "PY": sys.executable, "COMMANDS": commands},
    }
    unshare = ["unshare", "--map-root-user", "--mount", "--propagation", "private"]
    done = subprocess.run(
        [*unshare, "sh", "-c", READ_ONLY_SCRIPT], env=env, capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stderr.decode()
    results = {}
    for rc in out.glob("*.rc"):
        text = [rc.with_suffix(f".{part}").read_text() for part in ("rc", "out", "err")]
        results[rc.stem] = (int(text[0]), text[1], text[2])
    return results


def test_a_read_only_index_is_searched_and_checked_and_not_written(
    notes_kb: Path, tmp_path: Path
) -> None:
    open_kb(notes_kb).close()
    index = notes_kb / ".groove" / "index.sqlite"
    before = index.read_bytes()
    results = _on_a_read_only_mount(
        notes_kb,
        tmp_path / "out",
        'search search "ownership data races" --kb "$KB" --json\n'
        'status status "$KB"\ndoctor doctor "$KB"\nindex index "$KB"',
    )
    rc, output, err = results["search"]
    assert rc == 0, err
    assert json.loads(output)["results"][0]["path"] == "notes/rust.md"
    rc, output, err = results["status"]
    assert rc == 0, err
    assert re.search(r"^documents: +4$", output, re.MULTILINE), output
    rc, output, err = results["doctor"]
    assert rc == 0, output + err
    assert "skipped: the fts leg index's own check" in output
    assert "is healthy as far as checked" in output
    rc, output, err = results["index"]
    assert rc == 1
    assert err.startswith("groove: cannot write the index .groove/index.sqlite: it is on a ")
    assert "read-only file system" in err and len(err.strip().splitlines()) == 1
    assert index.read_bytes() == before
    assert sorted(p.name for p in index.parent.iterdir()) == ["index.sqlite"]


def test_an_older_read_only_index_says_it_needs_an_upgrade(notes_kb: Path, tmp_path: Path) -> None:
    store = Store.create(open_kb(notes_kb).index_file)
    store.set_meta("schema_version", "3")  # the upgrade to 4 writes the file
    store.close()
    results = _on_a_read_only_mount(
        notes_kb, tmp_path / "out", 'search search "ownership" --kb "$KB"'
    )
    rc, output, err = results["search"]
    assert rc == 1 and not output
    assert err.startswith("groove: the index .groove/index.sqlite has schema version 3 and ")
    assert "the upgrade writes the file, and it is on a read-only file system" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("unclosed-fence.md", "# Code\n\n```python\nprint('never closed')\n" * 50),
        ("nested.md", "".join("  " * i + "- item\n" for i in range(200)) + "> " * 100 + "deep"),
        ("table.md", "| a | b |\n|---|---|\n" + "| cell | cell |\n" * 20000),
        ("bad-yaml.md", "---\ntitle: [unclosed\n---\n# Body\n\ntext\n"),
        ("cr-only.md", "# Old Mac\r\rline one\rline two\r"),
    ],
)
def test_messy_markdown_is_indexed(tmp_path: Path, name: str, body: str) -> None:
    kb = make_kb(tmp_path / "kb", {name: body})
    report = Groove.open(kb).index()
    assert report.added == 1 and not report.skipped
    store = Store.open(Groove.open(kb).index_file)
    assert check_consistency(store).ok
    if name == "bad-yaml.md":
        assert report.warnings and "YAML" in report.warnings[0][1]


def test_symlink_loops_and_late_nul_bytes(tmp_path: Path) -> None:
    kb = make_kb(
        tmp_path / "kb",
        {
            "a.md": "# A\n\nalpha\n",
            "late-nul.md": "# Late\n\n" + "text " * 3000 + "\x00 after the sniffed prefix\n",
        },
    )
    (kb / "loop").symlink_to(kb, target_is_directory=True)
    (kb / "sub").mkdir()
    (kb / "sub" / "back").symlink_to(kb / "sub", target_is_directory=True)
    report = Groove.open(kb).index()
    assert report.documents_total == 2
    assert not report.skipped


def test_disk_full_mid_run_is_a_clear_error_and_keeps_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pysqlite3.dbapi2 as sqlite3

    files = {f"n{i}.md": f"# Note {i}\n\nbody {i}\n" for i in range(6)}
    kb = make_kb(
        tmp_path / "kb", files, config=KILL_CONFIG.replace("batch_size = 8", "batch_size = 2")
    )
    monkeypatch.setattr(indexer_mod, "LEXICAL_BATCH_CHUNKS", 2)  # two one-chunk files a write
    original = Store.write_documents
    calls = {"n": 0}

    def fill_up(self: Store, docs: object, vectors: object) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise sqlite3.OperationalError("database or disk is full")
        original(self, docs, vectors)  # type: ignore[arg-type]

    monkeypatch.setattr(Store, "write_documents", fill_up)
    result = CliRunner().invoke(build_cli(None), ["index", str(kb)])
    assert result.exit_code == 1
    assert "disk is full" in result.output and "intact" in result.output
    assert "Traceback" not in result.output
    monkeypatch.setattr(Store, "write_documents", original)
    store = Store.open(Groove.open(kb).index_file)
    assert check_consistency(store).ok
    assert store.counts()["documents"] == 2
    store.close()
    assert Groove.open(kb).index().documents_total == 6


def test_an_unreadable_file_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n", "locked.md": "# L\n\nsecret\n"})
    if os.geteuid() == 0:
        # root reads whatever the permission bits say: refuse the open itself.
        original = os.open

        def refuse(path: object, flags: int, *args: object, **kwargs: object) -> int:
            if Path(str(path)).name == "locked.md":
                raise PermissionError(13, "Permission denied")
            return original(path, flags, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "open", refuse)
    else:
        (kb / "locked.md").chmod(0)
    report = Groove.open(kb).index()
    assert dict(report.skipped)["locked.md"] == "cannot read: Permission denied"
    assert report.documents_total == 1


def test_concurrent_kb_adds_keep_every_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "config"
    folders = [tmp_path / f"kb{i}" for i in range(16)]
    for folder in folders:
        folder.mkdir()
    env = {**os.environ, CONFIG_HOME_ENV: str(home)}
    # Started together, the reads and rewrites of the registry overlap: without a lock
    # around them, 7 of 20 runs like this one lost a name while every command exited 0.
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "groove_core", "kb", "add", folder.name, str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
        for folder in folders
    ]
    outputs = [proc.communicate(timeout=120)[0].decode() for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * len(folders), outputs
    monkeypatch.setenv(CONFIG_HOME_ENV, str(home))
    assert {name: entry.path for name, entry in load_registry().items()} == {
        folder.name: folder.resolve() for folder in folders
    }
