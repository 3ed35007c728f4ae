"""The README's tool installs, run as a user would: ``pipx install`` or ``uv tool install``
from a checkout puts a working ``groove`` command in its own environment, with no torch and
no dev tools, that an agent's MCP configuration can name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from groove_core.testing import make_kb

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _outside_env(**folders: Path) -> dict[str, str]:
    """The environment of a user's shell: nothing pointing into this checkout's venv, no
    model downloads, the tool's folders in the test's own."""
    outside = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    }
    return (
        outside
        | {k: str(v) for k, v in folders.items()}
        | {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )


def test_pipx_install_from_the_checkout_indexes_and_searches(tmp_path: Path) -> None:
    env = _outside_env(
        PIPX_HOME=tmp_path / "pipx", PIPX_BIN_DIR=tmp_path / "bin", PIPX_MAN_DIR=tmp_path / "man"
    )

    def run(*args: str | Path, timeout: float = 600) -> str:
        done = subprocess.run(
            [str(a) for a in args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    run(sys.executable, "-m", "pipx", "install", ROOT)
    groove = tmp_path / "bin" / "groove"
    kb = make_kb(tmp_path / "notes", config=None)  # the default embedder, as shipped
    run(groove, "index", kb)
    found = json.loads(run(groove, "search", "fused with RRF", "--kb", kb, "--json"))
    assert found["results"][0]["path"] == "guide/search.md"
    python = tmp_path / "pipx" / "venvs" / "groove-core" / "bin" / "python"
    where = run(python, "-c", "import groove_core; print(groove_core.__file__)")
    assert Path(where.strip()).is_relative_to(tmp_path / "pipx"), where
    light = subprocess.run([python, "-c", "import torch"], capture_output=True, env=env)
    assert light.returncode != 0, "the tool install pulled in torch"


def test_uv_tool_install_gives_a_command_an_mcp_client_can_start(tmp_path: Path) -> None:
    """``uv tool install .``, then the installed ``groove serve`` as an agent's config
    starts it: an MCP client over stdio lists the tools and searches."""
    import asyncio

    from mcp import Client, StdioServerParameters

    env = _outside_env(
        UV_TOOL_DIR=tmp_path / "tools",
        UV_TOOL_BIN_DIR=tmp_path / "bin",
        UV_CACHE_DIR=tmp_path / "uv-cache",
    )
    uv = Path(sys.executable).parent / "uv"
    done = subprocess.run(
        [str(uv), "tool", "install", "--python", sys.executable, str(ROOT)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    groove = tmp_path / "bin" / "groove"
    kb = make_kb(tmp_path / "notes", config='[embedder]\nname = "hashing"\n')
    subprocess.run([groove, "index", kb], env=env, check=True, capture_output=True, timeout=300)
    params = StdioServerParameters(command=str(groove), args=["serve", "--kb", str(kb)], env=env)

    async def scenario() -> tuple[set[str], object]:
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            return names, await client.call_tool("search", {"query": "fused with RRF"})

    names, found = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    assert {"search", "get_document", "index_status"} <= names
    assert found.structured_content["results"][0]["path"] == "guide/search.md"  # type: ignore[attr-defined]
    python = tmp_path / "tools" / "groove-core" / "bin" / "python"
    light = subprocess.run([python, "-c", "import torch"], capture_output=True, env=env)
    assert light.returncode != 0, "the tool install pulled in torch"
    # The README's other line, `uvx --from CHECKOUT groove ...` (uvx is `uv tool run`).
    ran = subprocess.run(
        [str(uv), "tool", "run", "--python", sys.executable, "--from", str(ROOT), "groove",
         "status", str(kb), "--json"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["documents"] > 0
