"""A hook some plugin wraps (a ``wrapper`` implementation) is called through pluggy: its
failure used to be blamed on all its implementations at once ("the plugin 'a, b'", a name
no plugin has, "registered in process" even for an installed one, and a fix,
``disabled = ['a, b']``, that is itself a configuration error). Now on the one it came
from."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from groove_core.cli import build_cli
from groove_core.config import GrooveConfig
from groove_core.errors import GrooveError
from groove_core.hookspecs import hookimpl
from groove_core.plugins import PluginError, blame, make_plugin_manager
from groove_core.testing import open_kb


class Wraps:
    @hookimpl(wrapper=True)
    def groove_cli_commands(self, cli: click.Group) -> Generator[None, Any, Any]:
        return (yield)

    @hookimpl(wrapper=True)
    def groove_pool_size(self, ctx: Any) -> Generator[None, Any, Any]:
        return (yield)

    @hookimpl(wrapper=True)
    def groove_mcp_tools(self, server: Any, app: Any) -> Generator[None, Any, Any]:
        return (yield)


class Breaks:
    @hookimpl
    def groove_cli_commands(self, cli: click.Group) -> None:
        raise AttributeError("module 'click' has no attribute 'Grop'")

    @hookimpl
    def groove_pool_size(self, ctx: Any) -> int:
        raise KeyError("limit")

    @hookimpl
    def groove_mcp_tools(self, server: Any, app: Any) -> None:
        raise TypeError("use @server.tool() with parentheses")


class BrokenWrapper:
    @hookimpl(wrapper=True)
    def groove_pool_size(self, ctx: Any) -> Generator[None, Any, Any]:
        yield
        raise ValueError("the wrapper's own bug")


class Fine:
    @hookimpl
    def groove_pool_size(self, ctx: Any) -> int:
        return 3


PLUGINS = [("wraps", Wraps()), ("breaks", Breaks())]


def test_a_command_line_failure_through_a_wrapper_blames_the_plugin_that_failed() -> None:
    built = make_plugin_manager(GrooveConfig(), extra=PLUGINS, entry_points=False, validate=False)
    helped = CliRunner().invoke(build_cli(built), ["--help"])
    assert helped.exit_code == 0, helped.output
    [warning] = [line for line in helped.output.splitlines() if "warning" in line]
    assert "the plugin 'breaks' (registered in process) failed in groove_cli_commands" in warning
    assert "disabled = ['breaks']" in warning
    assert "wraps, breaks" not in warning and "'wraps, " not in warning


def _pool_error(*plugins: tuple[str, object]) -> PluginError:
    built = make_plugin_manager(
        GrooveConfig(), extra=list(plugins), entry_points=False, validate=False
    )
    with pytest.raises(PluginError) as caught:
        built.pool_size(type("Ctx", (), {"limit": 10})())
    return caught.value


def test_a_hook_failure_through_a_wrapper_blames_the_plugin_that_failed() -> None:
    message = str(_pool_error(*PLUGINS))
    assert message.startswith("the plugin 'breaks' (registered in process) failed in ")
    assert "disabled = ['breaks']" in message


def test_a_wrappers_own_failure_blames_the_wrapper() -> None:
    message = str(_pool_error(("fine", Fine()), ("broken", BrokenWrapper())))
    assert message.startswith("the plugin 'broken' (registered in process) failed in ")
    assert "ValueError: the wrapper's own bug" in message


def test_blame_without_a_matching_frame_names_one_plugin() -> None:
    built = make_plugin_manager(GrooveConfig(), extra=PLUGINS, entry_points=False, validate=False)
    impls = list(reversed(built.pm.hook.groove_pool_size.get_hookimpls()))
    assert blame(impls, RuntimeError("from pluggy")) == "wraps"


def test_mcp_tools_failing_through_a_wrapper_log_the_plugin_that_failed(notes_kb: Path) -> None:
    from structlog.testing import capture_logs

    from groove_core.mcp.server import build_mcp_server

    app = open_kb(notes_kb, extra_plugins=PLUGINS, entry_points=False)
    with capture_logs() as logs:
        build_mcp_server(app)
    [logged] = [e for e in logs if e["event"] == "plugin tools left out"]
    assert logged["plugin"] == "breaks"
    assert logged["error"].startswith("the plugin 'breaks' (registered in process) failed")


def test_a_groove_error_through_a_wrapper_passes_as_it_is() -> None:
    class Says:
        @hookimpl
        def groove_pool_size(self, ctx: Any) -> int:
            raise GrooveError("the index is missing")

    with pytest.raises(GrooveError, match="the index is missing") as caught:
        built = make_plugin_manager(
            GrooveConfig(), extra=[("wraps", Wraps()), ("says", Says())],
            entry_points=False, validate=False,
        )  # fmt: skip
        built.pool_size(type("Ctx", (), {"limit": 10})())
    assert not isinstance(caught.value, PluginError)
