"""Start-up stays light: no torch / transformers / sentence-transformers unless needed."""

from __future__ import annotations

from pathlib import Path

from groove_core.testing import HEAVY_MODULES, heavy_imports

HEAVY = (*HEAVY_MODULES, "model2vec")


def _heavy_modules(argv: list[str], cwd: Path) -> list[str]:
    return heavy_imports(argv, cwd, HEAVY)[0]


def test_help_and_plugins_list_do_not_import_torch(tmp_path: Path) -> None:
    assert _heavy_modules(["--help"], tmp_path) == []
    assert _heavy_modules(["plugins", "list"], tmp_path) == []


def test_a_search_with_the_default_embedder_does_not_import_torch(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# 検索\n\n全文検索とベクトル検索の融合。\n", encoding="utf-8")
    assert _heavy_modules(["index", str(kb)], tmp_path) == []
    assert _heavy_modules(["search", "ベクトル検索", "--kb", str(kb)], tmp_path) == []


def test_the_probe_notices_a_heavy_import(tmp_path: Path) -> None:
    (tmp_path / "groove.toml").write_text('[embedder]\nname = "model2vec"\n', encoding="utf-8")
    (tmp_path / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    assert _heavy_modules(["index", str(tmp_path)], tmp_path) == ["model2vec"]
