"""The groove command as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import click
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
    assert "leg fts:" in result.output and "leg vector:" in result.output


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
        "import structlog; from groove_core.cli import configure_logging; "
        "configure_logging(); structlog.get_logger().warning('to stderr')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout == ""
    assert "to stderr" in out.stderr


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
    # After a lone "--" everything is query text, for the query language to read.
    result = _run("search", "--kb", str(notes_kb), "--explain", "--", "ownership", "--limt")
    assert result.exit_code == 0, result.output
    assert "negatives:  ['limt']" in result.output
    # A quoted phrase is never an option: the literal text is searched.
    result = _run("search", '"--limt"', "ownership", "--kb", str(notes_kb), "--explain")
    assert result.exit_code == 0, result.output
    assert "positives:  ['--limt', 'ownership']" in result.output


def test_plugin_search_switches_are_known_options(notes_kb: Path) -> None:
    from groove_core.cli import build_search_command
    from groove_core.context import SearchOption

    class FakePlugins:
        """Only what build_search_command reads: the switches plugins add."""

        def search_options(self) -> list[SearchOption]:
            return [SearchOption("shout", "bool", "Say it louder.")]

    command = build_search_command(cast(Plugins, FakePlugins()))
    _run("index", str(notes_kb))
    ok = CliRunner().invoke(command, ["rust", "--kb", str(notes_kb), "--no-shout", "--json"])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(command, ["rust", "--kb", str(notes_kb), "--shuot"])
    assert bad.exit_code == 2, bad.output
    assert "No such option" in bad.output and "--shuot" in bad.output and "--shout" in bad.output
