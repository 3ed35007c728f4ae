"""scripts/setup.sh rebuilds a .venv that no longer works (scripts/venv-check.sh decides).

The scripts run from a temporary copy, so the project's own .venv is never touched; the
copy has no pyproject.toml, so setup.sh stops at its first real install (seconds, not the
minutes a full install takes) after it has rebuilt the venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_PYTHON = sys.executable  # a venv's python makes venvs of its base Python


def copy_scripts(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    for name in ("setup.sh", "venv-check.sh"):
        shutil.copy(ROOT / "scripts" / name, project / "scripts" / name)
    return project


def check(venv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "venv-check.sh"), BASE_PYTHON, str(venv)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def fake_python(venv: Path, body: str) -> None:
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\n{body}\n")
    python.chmod(0o755)


def test_setup_rebuilds_a_venv_whose_python_does_not_run(tmp_path: Path) -> None:
    project = copy_scripts(tmp_path)
    venv = project / ".venv"
    fake_python(venv, "exit 1")
    (venv / "stale-marker").write_text("from the broken venv")

    run = subprocess.run(
        ["bash", "scripts/setup.sh"],
        cwd=project,
        env={**os.environ, "PYTHON": BASE_PYTHON},
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert "setup: .venv/bin/python does not run: making .venv again" in run.stdout
    assert not (venv / "stale-marker").exists()
    # The new venv works and is this folder's...
    assert check(venv).returncode == 0, check(venv).stdout
    # ...and the install that followed failed (no pyproject.toml here): pip's output was
    # kept in the log and its end shown, the summary was not printed.
    assert run.returncode == 1
    assert "setup: pip install failed; the end of .venv/setup.log:" in run.stderr
    assert "pyproject.toml" in run.stderr
    assert "pyproject.toml" in (venv / "setup.log").read_text()
    assert "installed (editable)" not in run.stdout

    # A copy of that venv (a moved project folder) still names the old interpreter.
    moved = tmp_path / "moved" / ".venv"
    shutil.copytree(venv, moved, symlinks=True)
    result = check(moved)
    assert result.returncode == 1
    assert "the folder was moved" in result.stdout
    assert f"{venv}/bin/python" in result.stdout


def test_check_rejects_a_missing_venv_and_one_of_another_python(tmp_path: Path) -> None:
    missing = check(tmp_path / "nothing")
    assert (missing.returncode, missing.stdout.strip()) == (1, f"{tmp_path}/nothing does not exist")

    other = tmp_path / "other"
    fake_python(other, f'echo 2.7; echo "{other}"')
    result = check(other)
    assert result.returncode == 1
    want = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert result.stdout.strip() == f"{other} runs Python 2.7, {BASE_PYTHON} is {want}"


def test_check_reads_the_long_form_of_a_script_header(tmp_path: Path) -> None:
    """pip writes `#!/bin/sh` + `'''exec' PATH` when the interpreter path is too long for #!."""
    venv = tmp_path / ("v" * 100) / ".venv"
    subprocess.run([BASE_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    script = venv / "bin" / "groove"

    def header(interpreter: str) -> None:
        script.write_text(f"#!/bin/sh\n'''exec' {interpreter} \"$0\" \"$@\"\n' '''\nimport sys\n")

    header(f"{venv}/bin/python")
    assert check(venv).returncode == 0, check(venv).stdout
    header(f'"{tmp_path}/elsewhere/.venv/bin/python"')
    result = check(venv)
    assert result.returncode == 1
    assert f"starts {tmp_path}/elsewhere/.venv/bin/python, not this venv's" in result.stdout
