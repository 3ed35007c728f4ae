"""What a new user tripped over on a real vault: errors that name the KB and the option,
stage flags of a disabled plugin refused, a misspelt configuration key answered with the
key that was meant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from groove_core.cli import build_cli
from groove_core.registry import CONFIG_HOME_ENV
from groove_core.testing import FAST_CONFIG, make_kb


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "config"
    monkeypatch.setenv(CONFIG_HOME_ENV, str(home))
    return home


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_cli(None), list(args))
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def _installed(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed command, whose flags come from every installed plugin (the in-process
    CLI offers only those of the KB it finds)."""
    command = [sys.executable, "-m", "groove_core", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd)


def _kb(tmp_path: Path, extra: str = "") -> Path:
    kb = make_kb(
        tmp_path / "kb", {"a.md": "# Alpha\n\nRank fusion notes.\n"}, config=FAST_CONFIG + extra
    )
    assert _run("index", str(kb))[0] == 0
    return kb


def test_a_stage_flag_of_a_disabled_plugin_is_refused_with_the_reason(tmp_path: Path) -> None:
    kb = _kb(tmp_path, '[plugins]\ndisabled = ["mmr"]\n')
    done = _installed(tmp_path, "search", "rank fusion", "--kb", str(kb), "--mmr")
    assert done.returncode == 1, done.stderr
    assert "--mmr: no enabled plugin provides this option" in done.stderr
    assert "[plugins] disabled" in done.stderr and "mmr" in done.stderr
    assert _installed(tmp_path, "search", "rank fusion", "--kb", str(kb)).returncode == 0


@pytest.mark.parametrize(
    ("toml", "meant"),
    [
        ("[search.mmrr]\nenabled = true\n", "'search.mmr'"),
        ("[serch]\ndefault_limit = 5\n", "'search'"),
        ("[search.fusion]\ncoverage_treshold = 0.5\n", "'search.fusion.coverage_threshold'"),
    ],
)
def test_a_misspelt_configuration_key_gets_a_did_you_mean(
    tmp_path: Path, toml: str, meant: str
) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n"}, config=FAST_CONFIG + toml)
    code, out = _run("search", "alpha", "--kb", str(kb))
    assert code != 0
    assert f"did you mean {meant}?" in out


def test_an_unknown_kb_name_lists_the_registered_ones(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    _run("kb", "add", "notes", str(kb))
    code, out = _run("search", "alpha", "--kb", "ntoes")
    assert code == 1
    assert "no knowledge base named 'ntoes' (registered: notes)" in out


def test_a_kb_without_an_index_is_named(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "drafts", {"a.md": "# A\n"})
    code, out = _run("search", "alpha", "--kb", str(kb))
    assert code == 1
    assert "no index at .groove/index.sqlite for the knowledge base 'drafts'" in out


def test_an_option_problem_is_not_called_an_invalid_query(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    done = _installed(tmp_path, "search", "alpha", "--kb", str(kb), "--rerank")
    assert done.returncode != 0
    assert "needs a model" in done.stderr and "invalid query" not in done.stderr
    code, out = _run("search", "alpha", "--kb", str(kb), "--limit", "0")
    assert code != 0
    assert "limit must be" in out and "invalid query" not in out
