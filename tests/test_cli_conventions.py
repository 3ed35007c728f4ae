"""What every ``groove`` command has in common: ``--kb``, ``-h``, ``NO_COLOR``, one clear
line for a configuration error, install hints that work from a checkout, and shell
completion (docs/getting-started.md, docs/cli.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from pydantic import BaseModel, ConfigDict, field_validator

from groove_core.cli import build_cli
from groove_core.config import ConfigError, ConfigSection, GrooveConfig, parse_config
from groove_core.hookspecs import hookimpl
from groove_core.plugins import make_plugin_manager
from groove_core.registry import CONFIG_HOME_ENV
from groove_core.testing import make_kb, open_kb

ROOT = Path(__file__).resolve().parents[1]

#: Commands that work on one KB or several, and so take --kb.
KB_COMMANDS = [
    ("index",),
    ("doctor",),
    ("watch",),
    ("status",),
    ("search",),
    ("get",),
    ("links",),
    ("serve",),
    ("eval",),
    ("tune",),
    ("plugins", "list"),
]


def _invoke(cli: click.Group, *args: str, **kwargs: Any) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, prog_name="groove", **kwargs)


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, cmd in sorted(group.commands.items()):
        yield (*path, name)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))


def _command(cli: click.Group, path: tuple[str, ...]) -> click.Command:
    cmd: click.Command = cli
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.commands[name]
    return cmd


# -- --kb ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", KB_COMMANDS, ids=" ".join)
def test_every_command_on_a_kb_takes_kb(path: tuple[str, ...]) -> None:
    cmd = _command(build_cli(None), path)
    assert any("--kb" in p.opts for p in cmd.params if isinstance(p, click.Option))


def test_index_doctor_watch_and_status_take_kb_as_argument_or_option(notes_kb: Path) -> None:
    cli = build_cli(None)
    result = _invoke(cli, "index", "--kb", str(notes_kb), "--quiet")
    assert result.exit_code == 0, result.output
    assert "4 added" in result.output
    for args in (("doctor", str(notes_kb)), ("doctor", "--kb", str(notes_kb))):
        result = _invoke(cli, *args)
        assert result.exit_code == 0 and "is healthy" in result.output, result.output
    for args in (("status", str(notes_kb)), ("status", "--kb", str(notes_kb))):
        result = _invoke(cli, *args, "--json")
        assert json.loads(result.output)["documents"] == 4
    # The same KB both ways is fine; two different ones is a usage error.
    assert _invoke(cli, "doctor", str(notes_kb), "--kb", str(notes_kb)).exit_code == 0
    other = make_kb(notes_kb.parent / "other", {"a.md": "# A\n"})
    for command in ("index", "doctor", "watch"):
        result = _invoke(cli, command, str(notes_kb), "--kb", str(other))
        assert result.exit_code == 2, (command, result.output)
        assert "give the knowledge base once" in result.output


def test_status_kb_argument_with_all_is_an_error(
    notes_kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_HOME_ENV, str(tmp_path / "home"))
    cli = build_cli(None)
    assert _invoke(cli, "kb", "add", "notes", str(notes_kb)).exit_code == 0
    result = _invoke(cli, "status", str(notes_kb), "--all")
    assert result.exit_code == 1
    assert "give either --kb or --all" in result.output


# -- -h ------------------------------------------------------------------------------------


class Hello:
    @hookimpl
    def groove_cli_commands(self, cli: click.Group) -> None:
        @cli.group("hello")
        def hello() -> None:
            """A plugin's group."""

        @hello.command("world")
        def world() -> None:
            """A plugin's command."""
            click.echo(click.style("hello", fg="green"))


def test_h_is_help_on_every_command_and_group_plugins_ones_too() -> None:
    cli = build_cli(make_plugin_manager(GrooveConfig(), extra=[("hello", Hello())]))
    paths = list(_commands(cli))
    assert ("hello", "world") in paths and ("kb", "add") in paths
    for path in [(), *paths]:
        result = _invoke(cli, *path, "-h")
        assert result.exit_code == 0, (path, result.output)
        assert result.output.startswith(f"Usage: {' '.join(('groove', *path))} "), path


def test_search_h_is_help_but_stays_query_text_after_double_dash(notes_kb: Path) -> None:
    cli = build_cli(None)
    for args in (("search", "-h"), ("search", "rust", "-h", "--limit", "2")):
        result = _invoke(cli, *args)
        assert result.exit_code == 0 and result.output.startswith("Usage: groove search")
    open_kb(notes_kb)
    result = _invoke(cli, "search", "--kb", str(notes_kb), "--json", "--", "rust", "-h")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["results"]


# -- NO_COLOR ------------------------------------------------------------------------------


@pytest.mark.parametrize("no_color", ["", "1"])
def test_no_color_turns_styling_off(
    notes_kb: Path, monkeypatch: pytest.MonkeyPatch, no_color: str
) -> None:
    monkeypatch.setenv("NO_COLOR", no_color)
    open_kb(notes_kb)
    cli = build_cli(make_plugin_manager(GrooveConfig(), extra=[("hello", Hello())]))
    outputs = [
        _invoke(cli, *args, color=True).output
        for args in (
            ("search", "rust ownership", "--kb", str(notes_kb)),
            ("get", "notes/rust.md:1-3", "--kb", str(notes_kb)),
            ("hello", "world"),  # a plugin's own click.style
        )
    ]
    for output in outputs:
        # An empty NO_COLOR does not count: colour stays (so this test can see it go).
        assert ("\x1b[" in output) is (not no_color), output


# -- plugins list --------------------------------------------------------------------------


def test_plugins_list_aligns_its_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from groove_core import plugins

    infos = [
        plugins.PluginInfo("fts", "groove-core", "0.1.0", ("groove_legs",), "enabled"),
        plugins.PluginInfo(
            "a_much_longer_name",
            "a-long-distribution-name",
            "10.20.30",
            ("groove_rerank", "groove_pool_size"),
            "disabled",
        ),
        # The status column is as wide as its widest text, whatever the statuses are.
        plugins.PluginInfo("x", "d", "1", (), "installed, off by default"),  # type: ignore[arg-type]
        plugins.PluginInfo("broken", "groove-broken", "0.2", (), "failed", "ImportError: no"),
    ]
    monkeypatch.setattr(plugins, "list_plugins", lambda config: (infos, None))
    result = _invoke(build_cli(None), "plugins", "list")
    lines = result.output.splitlines()
    assert len(lines) == 4
    columns = r"(\S+)\s+(\S+)\s+(\S+)\s+(\[[^]]*\])\s+(hooks: )"
    found = [re.match(columns, line) for line in lines]
    for column in range(1, 6):
        starts = {m.start(column) for m in found if m is not None}
        assert len(starts) == 1 and None not in found, result.output
    assert lines[3].endswith("hooks: -  (ImportError: no)")
    # --json is unchanged by the layout.
    payload = json.loads(_invoke(build_cli(None), "plugins", "list", "--json").output)
    assert payload["plugins"][2]["status"] == "installed, off by default"


# -- a filter that matches nothing -----------------------------------------------------------


def test_a_filter_matching_no_document_says_so_not_low_confidence(notes_kb: Path) -> None:
    app = open_kb(notes_kb)
    cli = build_cli(None)
    result = _invoke(cli, "search", "rust", "--kb", str(notes_kb), "--path", "nowhere/**")
    assert result.exit_code == 0
    assert "no indexed document matches the filter path 'nowhere/**'" in result.output
    assert "low confidence" not in result.output
    result = _invoke(cli, "search", "rust", "--kb", str(notes_kb), "--tag", "nope", "--json")
    payload = json.loads(result.output)
    assert payload["low_confidence"] is True  # nothing came back: the flag keeps its meaning
    assert payload["warnings"] == ["no indexed document matches the filter tag 'nope'"]
    both = app.search("rust", path="notes/*", tags=["nope"])
    assert both.warnings == (
        "no indexed document matches the filter path 'notes/*' and tag 'nope'",
    )
    # A filter that matches documents keeps its usual response.
    assert not app.search("rust", path="notes/*").warnings
    # --files keeps stdout for paths: the note goes to stderr.
    result = CliRunner().invoke(
        cli, ["search", "rust", "--kb", str(notes_kb), "--files", "--tag", "nope"]
    )
    assert "no indexed document matches" in result.stderr and not result.stdout


def test_the_mcp_search_tool_says_a_filter_matches_nothing(notes_kb: Path) -> None:
    from groove_core.mcp.server import build_mcp_server
    from groove_core.testing import call_tools

    [result] = call_tools(
        build_mcp_server(open_kb(notes_kb)), ("search", {"query": "rust", "path": "zz/**"})
    )
    payload = result.structured_content
    assert payload["results"] == []
    assert payload["warnings"] == ["no indexed document matches the filter path 'zz/**'"]


# -- configuration errors ----------------------------------------------------------------------


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    boost: float = 1.0
    name: str = "x"

    @field_validator("name")
    @classmethod
    def _short(cls, value: str) -> str:
        if len(value) > 3:
            raise ValueError("at most 3 characters")
        return value


class Configured:
    @hookimpl
    def groove_config_sections(self) -> list[ConfigSection]:
        return [ConfigSection("plugin.conf", Strict)]


@pytest.mark.parametrize(
    "data",
    [
        {"search": {"default_limit": "x"}},
        {"search": {"limitt": 3}},
        {"index": {"ignore": ["[]"]}},
        {"kb": {"name": "a b"}},
        {"reranker": 3},
    ],
)
def test_config_errors_never_send_users_to_pydantic(data: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        # The core's keys are checked as the file is read, plugins' as they load.
        make_plugin_manager(parse_config(data, "kb/groove.toml"))
    _assert_groove_words(str(caught.value))


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"boost": "high"}, "boost: Input should be a valid number"),
        ({"boots": 1}, "unknown key 'plugin.conf.boots'"),
        ({"name": "long"}, "name: at most 3 characters (got 'long')"),
    ],
)
def test_plugin_section_errors_never_send_users_to_pydantic(
    section: dict[str, Any], expected: str
) -> None:
    config = parse_config({"plugin": {"conf": section}}, "kb/groove.toml")
    with pytest.raises(ConfigError) as caught:
        make_plugin_manager(config, extra=[("conf", Configured())])
    message = str(caught.value)
    _assert_groove_words(message)
    assert message.startswith("invalid [plugin.conf] in kb/groove.toml: ")
    assert expected in message


def test_a_config_error_on_the_command_line_has_no_pydantic_url(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n"}, config="[search]\ndefault_limit = 'x'\n")
    result = _invoke(build_cli(None), "status", str(kb))
    assert result.exit_code == 1
    _assert_groove_words(result.output)


def _assert_groove_words(message: str) -> None:
    assert "pydantic" not in message and "For further information" not in message, message
    assert "Value error," not in message, message


# -- install hints ---------------------------------------------------------------------------


def test_install_hints_work_from_a_checkout() -> None:
    """groove's packages are not published: a hint names a folder of the checkout, never
    a distribution name pip would look up (and not find) on the package index."""
    sources = [*ROOT.glob("groove_core/**/*.py"), *ROOT.glob("plugins/*/groove_*/**/*.py")]
    hints = []
    for source in sources:
        for line in source.read_text(encoding="utf-8").splitlines():
            hints += re.findall(r"pip install ([^\"]+)", line)
    assert hints
    for hint in hints:
        for word in hint.split():
            if word in ("it", "first)"):  # prose ("pip install it first")
                break
            assert not re.match(r"'?groove[-_]", word), hint


# -- shell completion ----------------------------------------------------------------------


def test_bash_completion_script_is_generated() -> None:
    env = {**os.environ, "_GROOVE_COMPLETE": "bash_source"}
    out = subprocess.run(
        [sys.executable, "-m", "groove_core"], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "_groove_completion()" in out.stdout
    assert "complete -o nosort -F _groove_completion groove" in out.stdout


def test_completion_offers_commands_and_registered_kb_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_HOME_ENV, str(tmp_path / "home"))
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n"})
    cli = build_cli(None)
    assert _invoke(cli, "kb", "add", "notes", str(kb)).exit_code == 0

    def complete(words: str) -> list[str]:
        env = {
            "_GROOVE_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
        }
        result = CliRunner().invoke(cli, [], env=env, prog_name="groove")
        return result.output.splitlines()

    assert {"plain,search", "plain,serve"} <= set(complete("groove se"))
    assert "plain,notes" in complete("groove status --kb no")
    assert "plain,notes" in complete("groove doctor n")
