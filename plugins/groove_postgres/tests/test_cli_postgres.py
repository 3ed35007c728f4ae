"""Every command, run as a real ``groove`` process against a KB on the test server: the
DSN comes from libpq's environment variables (``[store] dsn`` left empty)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from groove_postgres.testing import EmbeddedPostgres
from mcp import Client, StdioServerParameters

from groove_core.testing import BILINGUAL, FAST_CONFIG, make_kb, wait_until_listening

#: [store] with no DSN: libpq reads PGHOST, PGPORT, PGUSER, PGDATABASE.
TOML = FAST_CONFIG + '[store]\nbackend = "postgres"\n'


def _env(dsn: str) -> dict[str, str]:
    params = dict(part.split("=", 1) for part in dsn.split())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        NO_PROXY="127.0.0.1",
        PGHOST=params["host"],
        PGPORT=params["port"],
        PGUSER=params["user"],
        PGDATABASE=params["dbname"],
    )
    return env


def groove(
    env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groove_core", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(env: dict[str, str], *args: str) -> str:
    done = groove(env, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stdout


def test_every_command_on_postgres(tmp_path: Path, postgres_dsn: str) -> None:
    env = _env(postgres_dsn)
    kb = make_kb(tmp_path / "notes", BILINGUAL, config=TOML)
    golden = [
        {"query": "再ランキングの評価", "expected": ["notes/ja.md"]},
        {"query": "rust ownership", "expected": ["notes/rust.md"]},
        {"query": "generators pipelines", "expected": ["notes/python.md"]},
        {"query": "virtual environment", "expected": ["guide/install.md"]},
        {"query": "算出プロパティ", "expected": ["notes/vue.md"]},
        {"query": "reciprocal rank fusion", "expected": ["guide/search.md"]},
    ]
    (kb / "golden.jsonl").write_text(
        "\n".join(json.dumps(g, ensure_ascii=False) for g in golden) + "\n", encoding="utf-8"
    )
    k = ["--kb", str(kb)]
    assert "7 added" in ok(env, "index", str(kb))
    assert "0 added" in ok(env, "index", str(kb))
    hits = json.loads(ok(env, "search", "再ランキングの評価", "--json", *k))
    assert hits["results"][0]["path"] == "notes/ja.md"
    filtered = json.loads(
        ok(env, "search", "検索", "--path", "notes/*", "--tag", "日本語", "--json", *k)
    )
    assert {h["path"] for h in filtered["results"]} == {"notes/ja.md"}
    excluded = json.loads(ok(env, "search", "rust -tokio", "--json", *k))
    assert excluded["results"] and all("tokio" not in h["content"] for h in excluded["results"])
    status = json.loads(ok(env, "status", "--json", *k))
    assert status["backend"] == "postgres" and status["documents"] == 7
    assert status["index_file"] == f"postgres db {env['PGDATABASE']}, KB notes"
    got = json.loads(ok(env, "get", "notes/ja.md", "--json", *k))
    assert got["indexed"] is True and got["tags"] == ["日本語"]
    links = ok(env, "links", "guide/install.md", *k)
    assert "guide/search.md" in links
    assert "is healthy" in ok(env, "doctor", *k)
    assert "is healthy" in ok(env, "doctor", "--repair", *k)
    metrics = json.loads(ok(env, "eval", "--json", "--no-history", *k))
    assert metrics["queries"] == len(golden)
    tuned = groove(env, "tune", "--json", *k, timeout=300)
    assert tuned.returncode == 0, tuned.stderr
    assert "Traceback" not in tuned.stderr
    assert "7 added" in ok(env, "index", "--rebuild", *k)
    assert ok(env, "index", "--reembed", *k)
    hits = json.loads(ok(env, "search", "rust ownership", "--json", *k))
    assert hits["results"][0]["path"] == "notes/rust.md"
    # The copy a re-embed makes holds its own word postings, under the copied chunk ids.
    assert "is healthy" in ok(env, "doctor", *k)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_watch_reindexes_a_change(tmp_path: Path, postgres_dsn: str) -> None:
    env = {**_env(postgres_dsn), "PYTHONFAULTHANDLER": "1"}
    kb = make_kb(tmp_path / "notes", BILINGUAL, config=TOML)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groove_core",
            "watch",
            str(kb),
            "--interval",
            "0.2",
            "--debounce",
            "0.2",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # A test run started in the background (a CI job, `cmd &`) has SIGINT ignored,
        # and a child inherits that: its Python would never raise KeyboardInterrupt.
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while json.loads(ok(env, "status", "--json", "--kb", str(kb)))["documents"] < 7:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        (kb / "notes" / "fresh.md").write_text("# 新しい\n\nzebra crossing quartz\n")
        while True:
            found = json.loads(ok(env, "search", "zebra quartz", "--json", "--kb", str(kb)))
            if found["results"] and found["results"][0]["path"] == "notes/fresh.md":
                break
            assert proc.poll() is None and time.monotonic() < deadline, "not re-indexed"
            time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # Where every thread stands (PYTHONFAULTHANDLER dumps them on SIGABRT).
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"groove watch did not stop within 30 s of SIGINT:\n{err[-6000:]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _mcp(target: Any) -> tuple[Any, Any, Any]:
    async def scenario() -> tuple[Any, Any, Any]:
        async with Client(target) as client:
            search = await client.call_tool("search", {"query": "再ランキングの評価", "limit": 2})
            status = await client.call_tool("index_status", {})
            doc = await client.call_tool("get_document", {"path": "notes/rust.md"})
            return search, status, doc

    return asyncio.run(scenario())


def test_serve_over_stdio_and_http(tmp_path: Path, postgres_dsn: str) -> None:
    env = _env(postgres_dsn)
    kb = make_kb(tmp_path / "notes", BILINGUAL, config=TOML)
    ok(env, "index", str(kb))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "groove_core", "serve", "--kb", str(kb)], env=env
    )
    search, status, doc = _mcp(params)
    assert search.structured_content["results"][0]["path"] == "notes/ja.md"
    assert status.structured_content["documents"] == 7
    assert doc.structured_content["indexed"] is True
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groove_core",
            "serve",
            "--kb",
            str(kb),
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--readers",
            "4",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until_listening(proc, port)
        search, status, doc = _mcp(f"http://127.0.0.1:{port}/mcp")
        assert search.structured_content["results"][0]["path"] == "notes/ja.md"
        assert status.structured_content["chunks"] >= 7  # one-line sections merged
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_c_locale_database_is_one_clear_line(
    tmp_path: Path, postgres_server: EmbeddedPostgres
) -> None:
    name = "c_locale_cli"
    dsn = postgres_server.create_database(
        name, "TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER libc LC_COLLATE 'C' LC_CTYPE 'C'"
    )
    try:
        kb = make_kb(tmp_path / "notes", BILINGUAL, config=TOML)
        done = groove(_env(dsn), "index", str(kb))
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert "pg_trgm extracts no trigrams" in lines[0] and "C.UTF-8" in lines[0]
    finally:
        postgres_server.drop_database(name)


def test_server_down_is_an_environment_error_without_the_password(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    secret = "s3cr3t-Pa55"
    dsn = f"host=127.0.0.1 port={port} user=alice dbname=groove"
    toml = TOML + f'dsn = "{dsn}"\npassword_env = "GROOVE_PW"\n'
    kb = make_kb(tmp_path / "notes", BILINGUAL, config=toml)
    env = {**_env("host=x port=1 user=x dbname=x"), "GROOVE_PW": secret}
    for args in (
        ["index", str(kb)],
        ["search", "rust", "--kb", str(kb)],
        ["status", "--kb", str(kb)],
    ):
        done = groove(env, *args)
        assert done.returncode == 1, args
        assert "cannot be reached" in done.stderr and "environment" in done.stderr, done.stderr
        assert f"port={port} user=alice dbname=groove" in done.stderr
        assert secret not in done.stderr + done.stdout
        assert "Traceback" not in done.stderr
