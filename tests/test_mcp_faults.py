"""What a careless or hostile MCP client gets back (issue #30): a prompt asked for wrongly
is an invalid request in groove's words, and a name a client sends is never echoed back
(nor logged) at whatever length it was sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from groove_core.mcp.server import build_mcp_server
from groove_core.testing import drive_mcp, open_kb


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("explore_topic", {}, "explore_topic needs the argument 'topic'"),
        ("explore_topic", {"topic": "x", "tone": "y"}, "explore_topic takes no argument 'tone'"),
        ("nope", {}, "no prompt 'nope'; the prompts: answer_from_notes, explore_topic"),
    ],
)
def test_a_prompt_asked_for_wrongly_is_an_invalid_request(
    notes_kb: Path, name: str, arguments: dict[str, str], message: str
) -> None:
    async def scenario(client: Client) -> MCPError:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt(name, arguments)
        return caught.value

    error = drive_mcp(build_mcp_server(open_kb(notes_kb)), scenario)
    assert error.error.code == INVALID_PARAMS
    assert message in str(error)


def test_a_huge_name_is_not_echoed_back(notes_kb: Path) -> None:
    huge = "n" * 200_000

    async def scenario(client: Client) -> list[Any]:
        return [
            await client.call_tool("search", {"query": "rust", huge: 1}),
            await client.call_tool(huge, {}),
        ]

    unknown_argument, unknown_tool = drive_mcp(build_mcp_server(open_kb(notes_kb)), scenario)
    for got in (unknown_argument, unknown_tool):
        text = got.content[0].text
        assert got.is_error and len(text) < 500, len(text)
        assert "'" + "n" * 100 + "'... (200000 characters)" in text
    assert "search takes no argument" in unknown_argument.content[0].text
    assert unknown_tool.content[0].text.startswith("no tool ")
