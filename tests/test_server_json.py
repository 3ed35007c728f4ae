"""server.json, groove's entry for the MCP registry: valid against the registry's published
schema (docs/registry/server.schema.json, the project's copy), in step with the package, and
the command it describes starts a server an MCP client can use."""

from __future__ import annotations

import asyncio
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
from mcp import Client, StdioServerParameters

from groove_core import __version__
from groove_core.testing import make_kb, open_kb

ROOT = Path(__file__).resolve().parent.parent
SERVER = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))


def test_server_json_is_valid_against_the_registry_schema() -> None:
    schema = json.loads((ROOT / "docs/registry/server.schema.json").read_text(encoding="utf-8"))
    assert SERVER["$schema"] == schema["$id"]
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    assert not list(validator.iter_errors(SERVER))
    broken = {**SERVER, "packages": [{**SERVER["packages"][0], "version": "latest"}]}
    assert list(validator.iter_errors(broken))  # the copy is a schema that refuses things


def test_server_json_names_the_package_and_version_this_checkout_builds() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    [package] = SERVER["packages"]
    assert (package["registryType"], package["identifier"]) == ("pypi", project["name"])
    assert package["version"] == SERVER["version"] == project["version"] == __version__
    assert f"mcp-name: {SERVER['name']}" in (ROOT / "README.md").read_text(encoding="utf-8")


def _command(package: dict[str, Any], kb: Path) -> list[str]:
    """The package's arguments as a client builds them, the user's values filled in."""
    args: list[str] = []
    for arg in package["packageArguments"]:
        if arg["type"] == "positional":
            args.append(arg["value"])
        else:
            args += [arg["name"], str(kb) if arg.get("format") == "filepath" else arg["value"]]
    return args


def test_the_described_command_serves_the_kb(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "notes", config='[embedder]\nname = "hashing"\n')
    open_kb(kb)
    [package] = SERVER["packages"]
    env = {e["name"]: e["value"] for e in package.get("environmentVariables", [])}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "groove_core", *_command(package, kb)], env=env
    )

    async def scenario() -> Any:
        async with Client(params) as client:
            return await client.call_tool("search", {"query": "fused with RRF"})

    found = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert found.structured_content["results"][0]["path"] == "guide/search.md"
