"""A plugin failing where the command line, the MCP server or an index run calls it: one
line naming it, never a traceback (tests/test_plugins.py has the hooks a command runs).

What a plugin only adds, and whose absence is plain to see (its commands, its search
flags, its MCP tools), is left out with one warning line: the rest of groove stays usable,
``groove plugins list`` included. An embedder failing in an index run stops the run with
one line naming the embedder; the files stay searchable by their words."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np
import pytest
from click.testing import CliRunner

from groove_core.cli import build_cli
from groove_core.config import GrooveConfig
from groove_core.context import SearchOption, StageSwitch
from groove_core.embedding import EmbedderError, EmbedderSpec
from groove_core.hookspecs import hookimpl
from groove_core.plugins import make_plugin_manager
from groove_core.testing import FAST_CONFIG, make_kb, open_kb
from tests.helpers import HelloCommand, raised_in_one_line

DOCS = Path(__file__).resolve().parents[1] / "docs"

# -- the command line --------------------------------------------------------------------


class HalfCommands:
    """Adds a command, then fails: neither it nor anything after it may stay."""

    @hookimpl
    def groove_cli_commands(self, cli: click.Group) -> None:
        @cli.command("half")
        def half() -> None:
            """Half made."""

        cli.commands["index"] = half  # what it replaced comes back too
        raise AttributeError("module 'click' has no attribute 'Grop'")


class Hello(HelloCommand):
    """The command ``groove hello`` and a search option: a working plugin beside the
    broken one."""

    @hookimpl
    def groove_search_options(self) -> list[SearchOption]:
        return [SearchOption("shout", "bool", "Say it louder.")]


class BrokenOptions:
    @hookimpl
    def groove_search_options(self) -> list[SearchOption]:
        raise KeyError("level")


class BrokenSwitches:
    @hookimpl
    def groove_stage_switches(self) -> list[StageSwitch]:
        return StageSwitch("loud", "search.loud.enabled", "Loud.")  # type: ignore[return-value]


class OddOptionType:
    @hookimpl
    def groove_search_options(self) -> list[SearchOption]:
        return [SearchOption("levels", "list", "Levels.")]  # type: ignore[arg-type]


def _cli(*plugins: tuple[str, object]) -> click.Group:
    config = GrooveConfig()
    # validate=False as the command line builds it: a broken config must not break --help
    built = make_plugin_manager(config, extra=list(plugins), entry_points=False, validate=False)
    return build_cli(built)


def _warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("groove: warning: ")]


def test_a_plugin_whose_commands_fail_is_left_out_with_one_warning() -> None:
    """It used to be a traceback for every command, `groove --help` and `groove plugins
    list` included: no way to see what was wrong but to uninstall plugins one by one."""
    cli = _cli(("half", HalfCommands()), ("hello", Hello()))
    helped = CliRunner().invoke(cli, ["--help"])
    assert helped.exit_code == 0, helped.output
    [warning] = _warnings(helped.output)
    assert warning.startswith(
        "groove: warning: the plugin 'half' (registered in process) failed in "
        "groove_cli_commands: AttributeError: module 'click' has no attribute 'Grop' "
    )
    assert warning.endswith(
        "disable it with [plugins] disabled = ['half']); its commands are left out"
    )
    assert "half" not in cli.commands and cli.commands["index"].name == "index"
    assert "Traceback" not in helped.output
    # The other plugins' commands and every built-in one work, each run warned once.
    hello = CliRunner().invoke(cli, ["hello"])
    assert hello.exit_code == 0 and hello.output.endswith("hello from a plugin\n")
    assert _warnings(hello.output) == [warning]
    listed = CliRunner().invoke(cli, ["plugins", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert '"plugins": [' in listed.output and _warnings(listed.output) == [warning]


@pytest.mark.parametrize(
    ("plugin", "hook", "detail"),
    [
        (BrokenOptions(), "groove_search_options", "KeyError: 'level'"),
        (BrokenSwitches(), "groove_stage_switches", "TypeError: returned StageSwitch, not"),
    ],
)
def test_a_plugin_whose_search_options_fail_is_left_out_with_one_warning(
    plugin: object, hook: str, detail: str
) -> None:
    cli = _cli(("hello", Hello()), ("broken", plugin))
    result = CliRunner().invoke(cli, ["search", "--help"])
    assert result.exit_code == 0, result.output
    [warning] = _warnings(result.output)
    assert warning.startswith(
        f"groove: warning: the plugin 'broken' (registered in process) failed in {hook}: {detail}"
    )
    assert warning.endswith("; its search options are left out")
    assert "--shout / --no-shout" in result.output  # the other plugin's flag stays


def test_a_search_option_of_an_unknown_type_is_left_out_with_one_warning() -> None:
    result = CliRunner().invoke(_cli(("odd", OddOptionType())), ["search", "--help"])
    assert result.exit_code == 0, result.output
    assert _warnings(result.output) == [
        "groove: warning: the plugin 'odd' declares the search option 'levels' of unknown "
        "type 'list': left out"
    ]


BROKEN_COMMANDS_PLUGIN = """
from groove_core.hookspecs import hookimpl


@hookimpl
def groove_cli_commands(cli):
    cli.add_command(None)
"""


def _installed(tmp_path: Path, name: str, source: str) -> dict[str, str]:
    """An environment in which ``source`` is the module of plugin ``name``, installed as
    the distribution ``broken-<name> 1.0``."""
    site = tmp_path / "site"
    record = site / f"broken_{name}-1.0.dist-info"
    record.mkdir(parents=True)
    (site / f"broken_{name}.py").write_text(source, encoding="utf-8")
    (record / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: broken-{name}\nVersion: 1.0\n", encoding="utf-8"
    )
    (record / "entry_points.txt").write_text(f"[groove]\n{name} = broken_{name}\n", "utf-8")
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "GROOVE_NO_SERVER": "1"}


def test_an_installed_plugins_broken_commands_leave_groove_usable(tmp_path: Path) -> None:
    env = _installed(tmp_path, "commands", BROKEN_COMMANDS_PLUGIN)
    done = subprocess.run(
        [sys.executable, "-m", "groove_core", "plugins", "list"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "groove: warning: the plugin 'commands' (distribution broken-commands 1.0) failed in "
        "groove_cli_commands: AttributeError: "
    )
    assert line.endswith("its commands are left out")
    assert re.search(r"^commands\s+broken-commands\s+1\.0\s+\[enabled\]", done.stdout, re.M)


# -- the MCP server ----------------------------------------------------------------------


class HalfTools:
    @hookimpl
    def groove_mcp_tools(self, server: Any, app: Any) -> None:
        @server.tool(description="Made before the failure.")
        def half_made() -> str:
            return "half"

        server.tool(lambda: None)  # the mistake: @server.tool without parentheses


class GoodTools:
    @hookimpl
    def groove_mcp_tools(self, server: Any, app: Any) -> None:
        @server.tool(description="Say hello.")
        def hello() -> str:
            return "hello"


def test_a_plugin_whose_mcp_tools_fail_is_left_out_and_logged(notes_kb: Path) -> None:
    """The server starts with the built-in tools and the other plugins' (a server that
    does not start takes every tool from the agent, whose client seldom says why); the
    broken plugin's tools are absent, those it made before failing too, and one warning
    is logged naming it, its distribution and the hook."""
    from structlog.testing import capture_logs

    from groove_core.mcp.server import build_mcp_server
    from groove_core.testing import drive_mcp

    plugins = [("half", HalfTools()), ("good", GoodTools())]
    app = open_kb(notes_kb, extra_plugins=plugins, entry_points=False)
    with capture_logs() as logs:
        server = build_mcp_server(app)

    async def scenario(client: Any) -> list[str]:
        return [tool.name for tool in (await client.list_tools()).tools]

    names = drive_mcp(server, scenario)
    assert "hello" in names and "search" in names
    assert "half_made" not in names
    [logged] = [e for e in logs if e["event"] == "plugin tools left out"]
    assert logged["log_level"] == "warning" and logged["plugin"] == "half"
    assert logged["error"].startswith(
        "the plugin 'half' (registered in process) failed in groove_mcp_tools: TypeError: "
        "use @server.tool() with parentheses"
    )
    assert "\n" not in logged["error"]


# -- an embedder failing in an index run -------------------------------------------------


class Flaky:
    """Embeds until ``fail`` is set, then raises what a buggy plugin raises."""

    identity = "flaky:1"
    dim = 8

    def __init__(self) -> None:
        self.fail: BaseException | None = TypeError("expected str, got list")

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail is not None:
            raise self.fail
        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)

    def embed_query(self, text: str) -> np.ndarray:
        return np.ones(8, dtype=np.float32) / np.sqrt(8)


class FlakyEmbedder:
    def __init__(self) -> None:
        self.embedder = Flaky()

    @hookimpl
    def groove_embedders(self) -> list[EmbedderSpec]:
        return [EmbedderSpec("flaky", lambda config, settings: self.embedder)]


NOTES = {"a.md": "# Alpha\n\nThe lighthouse keeper.\n", "b.md": "# Beta\n\nThe harbour.\n"}


def test_an_embedder_failing_in_an_index_run_is_one_line_naming_it(tmp_path: Path) -> None:
    """It was the embedder's own traceback (a TypeError from deep in the plugin)."""
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "flaky"\n')
    plugin = FlakyEmbedder()
    app = open_kb(kb, index=False, extra_plugins=[("flaky", plugin)], entry_points=False)
    error = raised_in_one_line(EmbedderError, app.index)
    message = str(error)
    assert message.startswith(
        "the embedder 'flaky' (flaky:1) failed embedding 2 texts (the first: a.md, chunk 1): "
        "TypeError: expected str, got list (an unexpected error of the embedder: "
    )
    assert "[embedder] name" in message
    assert isinstance(error.__cause__, TypeError)
    # As after an embedder's own error: every file is in, searchable by its words, and
    # the next run embeds what was left.
    plugin.embedder.fail = None
    found = open_kb(kb, index=False, extra_plugins=[("flaky", plugin)], entry_points=False)
    assert [hit.path for hit in found.search("lighthouse").results][:1] == ["a.md"]
    again = found.index()
    assert (again.added, again.unchanged, again.chunks_embedded) == (0, 2, 2)


def test_an_embedders_own_error_passes_as_it_is(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "flaky"\n')
    plugin = FlakyEmbedder()
    plugin.embedder.fail = EmbedderError("the model server at localhost:1 does not answer")
    app = open_kb(kb, index=False, extra_plugins=[("flaky", plugin)], entry_points=False)
    with pytest.raises(EmbedderError) as caught:
        app.index()
    assert str(caught.value) == "the model server at localhost:1 does not answer"


class NoIdentity(Flaky):
    def __getattribute__(self, name: str) -> Any:
        if name == "identity":
            raise AttributeError("'NoIdentity' object has no attribute 'model_name'")
        return super().__getattribute__(name)


def test_an_embedder_that_cannot_tell_its_identity_is_one_line(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "flaky"\n')
    plugin = FlakyEmbedder()
    plugin.embedder = NoIdentity()
    app = open_kb(kb, index=False, extra_plugins=[("flaky", plugin)], entry_points=False)
    with pytest.raises(EmbedderError, match=r"^the embedder 'flaky' failed telling its "
                       r"identity: AttributeError: 'NoIdentity' object"):  # fmt: skip
        app.index()


def test_an_embedder_failing_in_a_reembed_is_one_line_and_the_old_index_stays(
    tmp_path: Path,
) -> None:
    kb = make_kb(tmp_path / "kb", NOTES)
    before = open_kb(kb).store.counts()
    (kb / "groove.toml").write_text('[embedder]\nname = "flaky"\n', encoding="utf-8")
    app = open_kb(kb, index=False, extra_plugins=[("flaky", FlakyEmbedder())])
    with pytest.raises(EmbedderError, match=r"^the embedder 'flaky' \(flaky:1\) failed "
                       r"embedding 2 texts .*TypeError: expected str, got list"):  # fmt: skip
        app.index(reembed=True)
    (kb / "groove.toml").write_text(FAST_CONFIG, encoding="utf-8")
    assert open_kb(kb, index=False).store.counts() == before


BROKEN_EMBEDDER_PLUGIN = """
import numpy as np

from groove_core.embedding import EmbedderSpec
from groove_core.hookspecs import hookimpl


class Broken:
    identity = "broken:1"
    dim = 8

    def embed_documents(self, texts):
        return np.stack([np.frombuffer(t, np.float32) for t in texts])  # str, not bytes

    def embed_query(self, text):
        return np.ones(8, np.float32)


@hookimpl
def groove_embedders():
    return [EmbedderSpec("broken", lambda config, settings: Broken())]
"""


def test_groove_index_with_an_installed_embedder_that_fails_says_one_line(
    tmp_path: Path,
) -> None:
    env = _installed(tmp_path, "embedder", BROKEN_EMBEDDER_PLUGIN)
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "broken"\n')
    done = subprocess.run(
        [sys.executable, "-m", "groove_core", "index", str(kb), "--quiet"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "groove: the embedder 'broken' (broken:1) failed embedding 2 texts (the first: a.md, "
        "chunk 1): TypeError: "
    )


# -- the docs ------------------------------------------------------------------------------


def test_the_getting_started_guide_names_the_background_servers_log_as_it_is(
    tmp_path: Path,
) -> None:
    from groove_core.cli.warm_server import BackgroundLock

    lock = BackgroundLock(tmp_path, [tmp_path / "kb"])
    name = lock.log_path.name
    lock.close()
    assert re.fullmatch(r"background-[0-9a-f]{16}\.log", name)
    guide = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    assert "`background-<hash>.log`" in guide
    assert "background-<time>" not in guide


class QueryFails(Flaky):
    def embed_query(self, text: str) -> np.ndarray:
        raise TypeError("unhashable type: 'list'")


def test_an_embedder_failing_on_a_query_is_one_line_naming_the_plugin(tmp_path: Path) -> None:
    """It was a traceback from inside the vector leg (``groove search``, MCP search)."""
    kb = make_kb(tmp_path / "kb", NOTES, config='[embedder]\nname = "flaky"\n')
    plugin = FlakyEmbedder()
    plugin.embedder.fail = None
    open_kb(kb, extra_plugins=[("flaky", plugin)], entry_points=False).close()
    plugin.embedder = QueryFails()
    plugin.embedder.fail = None
    app = open_kb(kb, index=False, extra_plugins=[("flaky", plugin)], entry_points=False)
    error = raised_in_one_line(EmbedderError, lambda: app.search("lighthouse"))
    assert str(error).startswith(
        "the plugin 'flaky' (registered in process) failed in groove_embedders: the "
        "embed_query of embedder 'flaky': TypeError: unhashable type: 'list'"
    )
    assert isinstance(error.__cause__, TypeError)


def test_an_embedder_failing_in_a_reembed_is_named_by_its_embedder_name(tmp_path: Path) -> None:
    """The re-embed did not pass the [embedder] name: its failure named the identity alone."""
    kb = make_kb(tmp_path / "kb", NOTES)
    open_kb(kb)
    (kb / "groove.toml").write_text('[embedder]\nname = "flaky"\n', encoding="utf-8")
    app = open_kb(kb, index=False, extra_plugins=[("flaky", FlakyEmbedder())])
    with pytest.raises(EmbedderError, match=r"^the embedder 'flaky' \(flaky:1\) failed "):
        app.index(reembed=True)
