"""The distributions as users get them: wheels and sdists built by scripts/build-dists.sh
(real `python -m build`, `twine check --strict`), installed as wheels — not editable — into a
fresh virtualenv, then run from a folder outside the repository.

The reranker wheel goes in with ``--no-deps``: its dependencies (torch, sentence-transformers)
are 1.3 GB and over a minute to install, and the plugin imports them only when a rerank runs,
so listing it still proves its wheel, entry point and import. Everything else is installed
with its dependencies, from PyPI.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import pytest
from groove_reranker_bge.backends import INSTALL_HINT
from mcp import Client, StdioServerParameters

from groove_core.testing import make_kb

ROOT = Path(__file__).resolve().parent.parent
#: distribution (file-name form) -> the folder it is built from
PROJECTS = {
    "groove_core": ROOT,
    "groove_mmr": ROOT / "plugins" / "groove_mmr",
    "groove_parent": ROOT / "plugins" / "groove_parent",
    "groove_expansion": ROOT / "plugins" / "groove_expansion",
    "groove_reranker_bge": ROOT / "plugins" / "groove_reranker_bge",
    "groove_http_models": ROOT / "plugins" / "groove_http_models",
    "groove_postgres": ROOT / "plugins" / "groove_postgres",
    "groove_documents": ROOT / "plugins" / "groove_documents",
    "groove_title_leg": ROOT / "examples" / "groove_title_leg",
}
#: Never shipped: the evaluation collections (CC BY-SA, CC BY, research-use data) and tests.
FORBIDDEN_PARTS = {"evaldata", "tests", "bench"}

ENV = {
    key: value
    for key, value in os.environ.items()
    if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
} | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def run(args: Sequence[str | Path], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    printed = run(["bash", ROOT / "scripts" / "build-dists.sh", out], cwd=ROOT, timeout=600)
    assert "twine check --strict" in printed
    return out


def only(paths: list[Path]) -> Path:
    assert len(paths) == 1, paths
    return paths[0]


def wheel(dists: Path, name: str) -> Path:
    return only(sorted(dists.glob(f"{name}-*.whl")))


@pytest.fixture(scope="module")
def venv(dists: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("fresh")
    run([sys.executable, "-m", "venv", home / "venv"], cwd=home)
    python = home / "venv" / "bin" / "python"
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    light = [wheel(dists, n) for n in PROJECTS if n != "groove_reranker_bge"]
    run([*pip, *light], cwd=home)
    run([*pip, "--no-deps", wheel(dists, "groove_reranker_bge")], cwd=home)
    return home / "venv"


@pytest.mark.slow
def test_each_project_has_a_wheel_and_an_sdist_with_readme_and_licence(dists: Path) -> None:
    for name, folder in PROJECTS.items():
        with zipfile.ZipFile(wheel(dists, name)) as whl:
            members = [PurePosixPath(m) for m in whl.namelist()]
        tops = {m.parts[0] for m in members}
        assert tops == {name, f"{name}-0.1.0.dist-info"}, tops
        assert PurePosixPath(f"{name}-0.1.0.dist-info/licenses/LICENSE") in members
        assert not FORBIDDEN_PARTS & {p for m in members for p in m.parts}

        sdist = only(sorted(dists.glob(f"{name}-*.tar.gz")))
        with tarfile.open(sdist) as tar:
            members = [PurePosixPath(m) for m in tar.getnames()]
        base = f"{name}-0.1.0"
        for needed in ("README.md", "LICENSE", "PKG-INFO", "pyproject.toml"):
            assert PurePosixPath(base, needed) in members, (sdist.name, needed)
        assert PurePosixPath(base, name, "__init__.py") in members
        assert not FORBIDDEN_PARTS & {p for m in members for p in m.parts[1:]}, sdist.name
        assert (folder / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()


@pytest.mark.slow
def test_installed_wheels_index_search_and_list_plugins(venv: Path, tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "notes", config=None)  # the default embedder, as shipped
    where = run(
        [venv / "bin" / "python", "-c", "import groove_core; print(groove_core.__file__)"],
        cwd=tmp_path,
    )
    assert Path(where.strip()).is_relative_to(venv), where  # the wheel, not this checkout

    groove = venv / "bin" / "groove"
    run([groove, "index", kb], cwd=tmp_path)
    found = json.loads(run([groove, "search", "fused with RRF", "--kb", kb, "--json"], tmp_path))
    assert found["results"][0]["path"] == "guide/search.md"

    listed = json.loads(run([groove, "plugins", "list", "--kb", kb, "--json"], cwd=tmp_path))
    status = {p["distribution"]: p["status"] for p in listed["plugins"]}
    stages = ("groove-mmr", "groove-parent", "groove-expansion", "groove-reranker-bge")
    for distribution in (*stages, "groove-title-leg"):
        assert status.get(distribution) == "enabled", listed
    for distribution in ("groove-http-models", "groove-postgres", "groove-documents"):
        assert status.get(distribution) == "enabled", listed

    # Only the reranker's deliberately skipped dependencies are missing.
    check = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "check"], capture_output=True, text=True, env=ENV
    )
    problems = [line for line in check.stdout.splitlines() if line.strip()]
    assert problems and all(p.startswith("groove-reranker-bge ") for p in problems), problems


@pytest.mark.slow
def test_installed_server_answers_an_mcp_client(venv: Path, tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "notes")
    run([venv / "bin" / "groove", "index", kb], cwd=tmp_path)
    params = StdioServerParameters(
        command=str(venv / "bin" / "groove"),
        args=["serve", "--kb", str(kb)],
        env=ENV,
        cwd=tmp_path,
    )

    async def call() -> object:
        async with Client(params) as client:
            return await client.call_tool("search", {"query": "leading minus excludes"})

    result = asyncio.run(call())
    assert result.structured_content["results"][0]["path"] == "guide/search.md"  # type: ignore[attr-defined]


def _pyproject(folder: Path) -> dict[str, str]:
    project: dict[str, str] = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    return project


def _installed_by(command: str) -> set[str]:
    """The distributions a `pip install ...` line from a checkout's root installs, each
    argument checked to exist: `.` or `./FOLDER[extras]`, or a wheel as build-dists.sh
    names it, plus pinned requirements such as torch==2.13.0 (from PyPI)."""
    assert command.startswith("pip install "), command
    names = set()
    for arg in command.split()[2:]:
        arg = arg.strip("'").split("[")[0]
        if "==" in arg:
            continue
        if arg.startswith("dist/"):
            by_file = {
                f"dist/{n}-{_pyproject(f)['version']}-py3-none-any.whl": n
                for n, f in PROJECTS.items()
            }
            assert arg in by_file, command
            names.add(_pyproject(PROJECTS[by_file[arg]])["name"])
        else:
            assert arg == "." or arg.startswith("./"), command  # not on PyPI
            names.add(_pyproject(ROOT / arg)["name"])
    return names


def test_install_commands_in_error_messages_name_the_right_folders() -> None:
    # A key no enabled plugin claims says "pip install ./plugins/NAME": NAME is the folder.
    for folder in sorted((ROOT / "plugins").glob("*/pyproject.toml")):
        install = f"pip install ./plugins/{folder.parent.name}"
        assert _installed_by(install) == {_pyproject(folder.parent)["name"]}
    for backend, install in INSTALL_HINT.items():
        if backend == "http":  # the HTTP backend lives in the HTTP models plugin, no torch
            assert _installed_by(install) == {"groove-http-models"}
            continue
        assert _installed_by(install) == {"groove-reranker-bge"}
        assert install.endswith(" torch==2.13.0")  # the pin, or pip picks a CUDA build


@pytest.mark.parametrize("name", [n for n in PROJECTS if n != "groove_core"])
def test_plugin_readmes_install_from_the_checkout(name: str) -> None:
    readme = (PROJECTS[name] / "README.md").read_text()
    commands = [
        line.split(" #")[0].strip() for line in readme.splitlines() if line.startswith("pip ")
    ]
    assert len(commands) >= 2, name  # from the folder, and from the built wheels
    for command in commands:
        # groove-core is not on PyPI either: each command installs it too.
        assert {"groove-core", _pyproject(PROJECTS[name])["name"]} <= _installed_by(command)
