"""The README's tool install, run as a user would: ``pipx install`` from a checkout puts a
working ``groove`` command in its own environment, with no torch and no dev tools."""

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


def test_pipx_install_from_the_checkout_indexes_and_searches(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    } | {
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }

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
