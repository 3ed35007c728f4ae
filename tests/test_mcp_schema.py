"""The tool list a model reads on every turn (issue #30): small, in an agent's words, and
still exact: every response validates against the compact output schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from mcp import Client

from groove_core.mcp.protocol import compact_schema
from groove_core.mcp.server import build_mcp_server
from groove_core.testing import call_tools, drive_mcp, open_kb

#: ``tools/list`` for one KB with the installed plugins, before issue #30 (bytes of the
#: compact JSON): 19,153. The issue asks for at least a third less.
BEFORE = 19_153


def _listed(server: Any) -> list[dict[str, Any]]:
    async def scenario(client: Client) -> list[dict[str, Any]]:
        tools = (await client.list_tools()).tools
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]

    return drive_mcp(server, scenario)


def _size(tools: list[dict[str, Any]]) -> int:
    text = json.dumps({"tools": tools}, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode())


def test_the_tool_list_is_a_third_smaller_and_says_what_each_tool_returns(
    notes_kb: Path,
) -> None:
    tools = _listed(build_mcp_server(open_kb(notes_kb)))
    assert _size(tools) <= BEFORE * 2 // 3, _size(tools)
    for tool in tools:
        assert "Returns {" in tool["description"], tool["name"]
        text = json.dumps(tool, ensure_ascii=False)
        # No generated titles, no groove.toml jargon, no pydantic leftovers.
        assert '"title": "' not in json.dumps(tool["inputSchema"]), tool["name"]
        for jargon in ("groove.toml", "[search.", "overrides", "(plugin "):
            assert jargon not in text, (tool["name"], jargon)


def test_plugin_switches_say_their_default_in_plain_words(notes_kb: Path) -> None:
    [search] = [t for t in _listed(build_mcp_server(open_kb(notes_kb))) if t["name"] == "search"]
    props = search["inputSchema"]["properties"]
    assert props["mmr"] == {
        "type": "boolean",
        "description": "Diversify results with MMR for this query (default: off)",
    }
    assert "reranker" not in props  # no models configured: nothing a client could choose


def test_an_optional_argument_still_takes_an_explicit_null(notes_kb: Path) -> None:
    server = build_mcp_server(open_kb(notes_kb))
    [hit] = call_tools(server, ("search", {"query": "rust", "path": None, "tags": None}))
    assert not hit.is_error and hit.structured_content["results"]


def test_responses_validate_against_the_compact_output_schemas(notes_kb: Path) -> None:
    server = build_mcp_server(open_kb(notes_kb))
    schemas = {t["name"]: t["outputSchema"] for t in _listed(server)}
    (notes_kb / "notes" / "new.md").write_text("# Not indexed\n\ntext\n", encoding="utf-8")
    calls = [
        ("search", {"query": "rust", "limit": 3}),
        ("get_document", {"path": "notes/rust.md"}),
        ("get_document", {"path": "notes/new.md"}),  # title null: a nullable field
        ("list_documents", {}),
        ("related", {"path": "notes/rust.md"}),
        ("index_status", {}),
    ]
    for (name, _), result in zip(calls, call_tools(server, *calls), strict=True):
        assert not result.is_error, result.content
        jsonschema.validate(result.structured_content, schemas[name])


def test_compact_schema_keeps_a_property_named_title() -> None:
    schema = {
        "title": "DocOut",
        "properties": {
            "title": {"title": "Title", "anyOf": [{"type": "string"}, {"type": "null"}]},
            "n": {"title": "N", "type": "integer", "default": None, "description": "count"},
        },
    }
    assert compact_schema(schema) == {
        "properties": {
            "title": {"type": "string"},
            "n": {"type": "integer", "description": "count"},
        }
    }
    assert compact_schema(schema, output=True) == {
        "properties": {"title": {"type": ["string", "null"]}, "n": {"type": "integer"}}
    }
