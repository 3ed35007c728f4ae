"""Entry-point discovery with real (temporary) installed distributions."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from groove_core.config import parse_config
from groove_core.plugins import make_plugin_manager


def _fake_dist(site: Path, dist: str, module: str, source: str) -> None:
    (site / f"{module}.py").write_text(source, encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[groove]\n{module} = {module}\n")


GOOD = """
from groove_core.context import LegSpec
from groove_core.hookspecs import hookimpl
from groove_core.models import LegResult

@hookimpl
def groove_legs():
    return [LegSpec("extra", "other", lambda ctx: LegResult("extra", ()))]
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    for name in ("gv_good", "gv_broken", "gv_blocked"):
        sys.modules.pop(name, None)


def test_installed_plugins_load_fail_or_stay_blocked(site: Path) -> None:
    _fake_dist(site, "gv-good", "gv_good", GOOD)
    _fake_dist(site, "gv-broken", "gv_broken", "raise RuntimeError('needs a GPU')\n")
    _fake_dist(site, "gv-blocked", "gv_blocked", "import sys\nsys.exit('imported!')\n")
    config = parse_config({"plugins": {"disabled": ["gv_blocked"]}})
    plugins = make_plugin_manager(config)
    infos = {i.name: i for i in plugins.infos}
    good = infos["gv_good"]
    assert (good.distribution, good.version, good.status) == ("gv-good", "1.2.3", "enabled")
    assert good.hooks == ("groove_legs",)
    broken = infos["gv_broken"]
    assert broken.status == "failed" and "needs a GPU" in broken.reason
    assert infos["gv_blocked"].status == "disabled"
    assert "gv_blocked" not in sys.modules, "a disabled plugin must never be imported"
    assert "gv_good" in plugins.implements("groove_legs")
