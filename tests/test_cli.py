"""The groove command as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import click
import pytest
from click.testing import CliRunner

from groove_core.cli import build_cli
from groove_core.plugins import Plugins


def _run(*args: str) -> CliRunner.invoke:
    runner = CliRunner()
    return runner.invoke(build_cli(None), list(args), catch_exceptions=False)


def test_index_then_search_json(notes_kb: Path) -> None:
    result = _run("index", str(notes_kb))
    assert result.exit_code == 0, result.output
    assert "4 added, 0 changed, 0 removed, 0 unchanged" in result.output
    assert "chunks/s" in result.output
    result = _run(
        "search", "reciprocal rank fusion", "--kb", str(notes_kb), "--json", "--limit", "2"
    )
    payload = json.loads(result.output)
    assert set(payload) == {"results", "low_confidence", "filter_applied"}
    assert payload["results"][0]["path"] == "guide/search.md"


def test_human_output_and_filters(notes_kb: Path) -> None:
    _run("index", str(notes_kb))
    result = _run("search", "python", "--kb", str(notes_kb), "--tag", "setup")
    assert result.exit_code == 0
    assert "guide/install.md" in result.output
    assert 'filter: {"tags": ["setup"]}' in result.output


def test_explain_shows_the_compiled_query_and_legs(notes_kb: Path) -> None:
    _run("index", str(notes_kb))
    result = _run("search", "rust -async", "--kb", str(notes_kb), "--explain")
    assert 'match_expr: ("rust") NOT ("async")' in result.output
    assert "leg fts (lexical):" in result.output and "leg vector (vector):" in result.output


def test_exclusion_only_query_exits_2(notes_kb: Path) -> None:
    _run("index", str(notes_kb))
    result = CliRunner().invoke(build_cli(None), ["search", "-rust", "--kb", str(notes_kb)])
    assert result.exit_code == 2
    assert "invalid query" in result.output


def test_errors_are_one_line_not_tracebacks(tmp_path: Path) -> None:
    result = CliRunner().invoke(build_cli(None), ["search", "x", "--kb", str(tmp_path)])
    assert result.exit_code == 1
    assert "groove index" in result.output
    assert "Traceback" not in result.output
    (tmp_path / "groove.toml").write_text("[search]\nlimitt = 3\n")
    result = CliRunner().invoke(build_cli(None), ["index", str(tmp_path)])
    assert result.exit_code == 1
    assert "unknown key 'search.limitt'" in result.output


def test_plugins_list_json() -> None:
    result = _run("plugins", "list", "--json")
    payload = json.loads(result.output)
    names = {p["name"] for p in payload["plugins"]}
    assert {"fts", "vector", "match_spans", "embedders"} <= names
    assert payload["config_problem"] is None


def test_python_dash_m_works(notes_kb: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "groove_core", "--version"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "groove" in out.stdout


def test_unquoted_exclusions_and_dash_words_are_query_text(notes_kb: Path) -> None:
    _run("index", str(notes_kb))
    result = _run("search", "rust", "-async", "--kb", str(notes_kb), "--explain", "--limit", "2")
    assert result.exit_code == 0, result.output
    assert "negatives:  ['async']" in result.output
    result = _run("search", "-hash", "ownership", "--kb", str(notes_kb), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["results"]


def test_logs_never_reach_stdout(notes_kb: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    code = (
        "import structlog; from groove_core.cli.common import configure_logging; "
        "configure_logging(); structlog.get_logger().warning('to stderr')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout == ""
    assert "to stderr" in out.stderr


# -- untrusted text on the terminal (issue #13) ------------------------------------------

# What a hostile note can carry: an OSC that sets the window title, a screen clear, an
# 8-bit CSI, and a right-to-left override that makes "exe.txt" read as "txt.exe".
HOSTILE = "\x1b]0;pwned\x07 \x1b[2J \x9b31m \u202eexe.txt"
RAW = ("\x1b]", "\x1b[2J", "\x07", "\x9b", "\u202e")


def _hostile_kb(root: Path) -> Path:
    from groove_core.testing import make_kb

    note = (
        f"---\ntitle: Title {HOSTILE}\n---\n# Tokio {HOSTILE}\n\n"
        f"Tokio schedules futures {HOSTILE} on a runtime.\n"
    )
    return make_kb(root, {f"notes/tokio{HOSTILE[:9]}.md": note, "notes/plain.md": "# Plain\n"})


def _assert_neutralised(text: str) -> None:
    leaked = [seq for seq in RAW if seq in text]
    assert not leaked, f"raw control sequences reached the output: {leaked!r}"
    assert "\\x1b]0;pwned\\x07" in text and "\\u202eexe.txt" in text


def test_printable_shows_controls_and_bidi_as_escapes() -> None:
    from groove_core.cli.terminal import printable

    assert printable("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert printable("\x00\t\n\x7f\x85\x9b") == "\\x00\\x09\\x0a\\x7f\\x85\\x9b"
    assert printable("\u202a\u202e\u2066\u2069") == "\\u202a\\u202e\\u2066\\u2069"
    assert printable("再ランキング — café ␛") == "再ランキング — café ␛"


def test_json_holds_no_raw_terminal_controls_and_decodes_to_the_same() -> None:
    from groove_core.cli.terminal import dumps

    value = {"content": "x\x1b[2J\x7f\x9b\u202e\u2067 再"}
    text = dumps(value)
    assert not any(ch in text for ch in "\x1b\x7f\x9b\u202e\u2067")
    assert "再" in text
    assert json.loads(text) == value


def test_search_on_a_terminal_shows_escapes_not_control_sequences(tmp_path: Path) -> None:
    """A real pseudo-terminal: click only leaves escape sequences in when stdout is a tty."""
    import pty

    kb = _hostile_kb(tmp_path / "kb")
    assert _run("index", str(kb)).exit_code == 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TERM": "xterm"}
    argv = [sys.executable, "-m", "groove_core", "search", "tokio", "--kb", str(kb)]
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(argv, stdin=terminal, stdout=terminal, stderr=terminal, env=env)
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the child closed its side of the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    assert proc.wait(timeout=60) == 0
    output = b"".join(chunks).decode("utf-8")
    assert "\x1b[1m" in output, "not a terminal: click would have stripped styling"
    _assert_neutralised(output)


def test_human_search_explain_and_index_warnings_are_neutralised(tmp_path: Path) -> None:
    kb = _hostile_kb(tmp_path / "kb")
    (kb / "notes" / f"bad{HOSTILE[:9]}.md").write_text("---\ntitle: [unclosed\n---\n# B\n")
    # color=True: keep what a terminal would get (click strips some sequences otherwise).
    runner = CliRunner()
    index = runner.invoke(build_cli(None), ["index", str(kb)], color=True)
    assert index.exit_code == 0, index.output
    assert "warning notes/bad\\x1b]0;pwned.md: front matter" in index.output
    assert not any(seq in index.output for seq in RAW)
    result = runner.invoke(
        build_cli(None), ["search", "tokio", "--kb", str(kb), "--explain"], color=True
    )
    assert result.exit_code == 0, result.output
    _assert_neutralised(result.output)


def test_search_json_escapes_controls_and_keeps_the_content(tmp_path: Path) -> None:
    kb = _hostile_kb(tmp_path / "kb")
    _run("index", str(kb))
    result = _run("search", "tokio", "--kb", str(kb), "--json")
    assert not any(seq in result.output for seq in RAW)
    hits = json.loads(result.output)["results"]
    assert any(HOSTILE in hit["content"] for hit in hits)


def test_doctor_lists_reindexed_paths_neutralised(tmp_path: Path) -> None:
    from groove_core.testing import open_kb

    kb = _hostile_kb(tmp_path / "kb")
    app = open_kb(kb)
    conn = app.store.conn
    victim = conn.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path LIKE '%tokio%'"
    ).fetchone()[0]
    conn.execute("DELETE FROM vec_chunks WHERE chunk_id = ?", (victim,))
    app.close()
    result = CliRunner().invoke(build_cli(None), ["doctor", str(kb), "--repair"], color=True)
    assert result.exit_code == 0, result.output
    assert "re-indexed 1 documents: notes/tokio\\x1b]0;pwned.md" in result.output
    assert not any(seq in result.output for seq in RAW)


def test_plugins_list_neutralises_plugin_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    from groove_core import plugins

    info = plugins.PluginInfo("evil", f"dist{HOSTILE}", "1.0", (), "failed", f"boom {HOSTILE}")
    monkeypatch.setattr(plugins, "list_plugins", lambda config: ([info], None))
    result = CliRunner().invoke(build_cli(None), ["plugins", "list"], color=True)
    assert result.exit_code == 0, result.output
    _assert_neutralised(result.output)


def test_eval_output_neutralises_golden_ids_and_paths(tmp_path: Path) -> None:
    kb = _hostile_kb(tmp_path / "kb")
    _run("index", str(kb))
    golden = tmp_path / "golden.jsonl"
    records = [
        {"query": "tokio runtime", "expected": ["notes/plain.md"], "id": f"q{HOSTILE}"},
        {"query": "gone", "expected": [f"notes/gone{HOSTILE}.md"], "id": f"g{HOSTILE}"},
        {"query": "-tokio", "expected": ["notes/plain.md"], "id": f"x{HOSTILE}"},
    ]
    golden.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    args = ["eval", "--kb", str(kb), "--golden", str(golden), "--no-history"]
    result = CliRunner().invoke(build_cli(None), args, color=True)
    assert result.exit_code == 0, result.output
    assert "not in the index" in result.output and "rejected" in result.output
    _assert_neutralised(result.output)
    result = CliRunner().invoke(build_cli(None), [*args, "--json"])
    assert not any(seq in result.output for seq in RAW)
    assert json.loads(result.output)["missing_expected"][0]["id"] == f"g{HOSTILE}"


# -- unknown options are errors, -word is a query (issue #13) -----------------------------


def test_a_mistyped_long_option_is_an_error_not_query_text(notes_kb: Path) -> None:
    _run("index", str(notes_kb))
    for typo in (["--limt", "2"], ["--limt=2"]):
        result = CliRunner().invoke(
            build_cli(None), ["search", "service", "mesh", "--kb", str(notes_kb), *typo]
        )
        assert result.exit_code == 2, result.output
        # click's own wording, with its own "did you mean" suggestion.
        expected = click.NoSuchOption("--limt", possibilities=["--limit"]).format_message()
        assert expected in result.output


def test_options_values_and_text_after_double_dash_are_not_options(notes_kb: Path) -> None:
    _run("index", str(notes_kb))
    # A glob may start with "--": it is --path's value, not an unknown option.
    result = _run("search", "rust", "--kb", str(notes_kb), "--path", "--x*", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["filter_applied"] == {"path": "--x*"}
    # After a lone "--" everything is query text, for the query language to read: "-x"
    # excludes, "--x" is a word (a pasted command line's option).
    result = _run("search", "--kb", str(notes_kb), "--explain", "--", "ownership", "-limt")
    assert result.exit_code == 0, result.output
    assert "negatives:  ['limt']" in result.output
    result = _run("search", "--kb", str(notes_kb), "--explain", "--", "ownership", "--limt")
    assert result.exit_code == 0, result.output
    assert "positives:  ['ownership', 'limt']" in result.output
    # A quoted phrase is never an option: the literal text is searched.
    result = _run("search", '"--limt"', "ownership", "--kb", str(notes_kb), "--explain")
    assert result.exit_code == 0, result.output
    assert "positives:  ['--limt', 'ownership']" in result.output


def test_plugin_search_switches_are_known_options(notes_kb: Path) -> None:
    from groove_core.cli.main import build_search_command
    from groove_core.context import SearchOption

    class FakePlugins:
        """Only what build_search_command reads: the switches plugins add."""

        def search_options(self) -> list[SearchOption]:
            return [SearchOption("shout", "bool", "Say it louder.")]

    command = build_search_command(cast(Plugins, FakePlugins()))
    _run("index", str(notes_kb))
    # a known flag, but the KB's own plugins do not provide it: refused with the reason,
    # not run without the stage (exit 1, not a usage error)
    known = CliRunner().invoke(command, ["rust", "--kb", str(notes_kb), "--no-shout", "--json"])
    assert known.exit_code == 1, known.output
    assert "--shout: no enabled plugin provides this option" in known.output
    bad = CliRunner().invoke(command, ["rust", "--kb", str(notes_kb), "--shuot"])
    assert bad.exit_code == 2, bad.output
    assert "No such option" in bad.output and "--shuot" in bad.output and "--shout" in bad.output


# -- --json --explain is one JSON document (issue #13) ------------------------------------


def test_json_explain_is_one_valid_json_object(notes_kb: Path) -> None:
    _run("index", str(notes_kb))
    result = _run("search", "rust", "-async", "--kb", str(notes_kb), "--json", "--explain")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["results"]
    explain = payload["explain"]
    assert explain["match_expr"] == '("rust") NOT ("async")'
    assert explain["negatives"] == ["async"]
    assert {leg["name"] for leg in explain["legs"]} == {"fts", "vector", "word"}
    assert all("weight" in leg for leg in explain["legs"])
    first = explain["ranks"][0]
    assert first["path"] == payload["results"][0]["path"]
    assert set(first["legs"]) <= {"fts", "vector", "word"} and first["legs"]


def test_a_slow_embedders_rate_is_not_printed_as_zero() -> None:
    from groove_core.cli.main import _summary
    from groove_core.index_report import IndexReport

    report = IndexReport(added=1, chunks_embedded=3, seconds=10.0, embed_seconds=6.0)
    assert "(0.3 chunks/s; the embedder alone 0.5 chunks/s)" in _summary(report)
    fast = IndexReport(added=1, chunks_embedded=300, seconds=2.0, embed_seconds=1.0)
    assert "(150 chunks/s; the embedder alone 300 chunks/s)" in _summary(fast)
