"""The plugin is installed and enabled, yet torch is imported only when a rerank runs.

groove_core.testing.heavy_imports records every *attempt* to import a heavy module, in a
fresh process per command.
"""

from __future__ import annotations

from pathlib import Path

from groove_core.testing import heavy_imports


def _run(argv: list[str], cwd: Path) -> tuple[list[str], int, str]:
    """Heavy modules the command tried to import, its exit status, and its stderr."""
    return heavy_imports(argv, cwd)


def _kb(tmp_path: Path, model: str) -> Path:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# Ranking\n\nResults are fused with RRF.\n", encoding="utf-8")
    # The reranker configured, but not by default: searches must stay light.
    (kb / "groove.toml").write_text(
        f'reranker = "{model}"\nrerank_by_default = false\n[embedder]\nname = "hashing"\n',
        encoding="utf-8",
    )
    return kb


def test_help_list_and_plain_searches_do_not_import_torch(tmp_path: Path, tiny_model: Path) -> None:
    kb = _kb(tmp_path, str(tiny_model))
    assert _run(["--help"], kb)[:2] == ([], 0)
    assert _run(["plugins", "list"], kb)[:2] == ([], 0)
    assert _run(["index", str(kb)], tmp_path)[:2] == ([], 0)
    assert _run(["search", "fused results", "--kb", str(kb)], tmp_path)[:2] == ([], 0)


def test_an_offline_hub_model_fails_before_torch_is_imported(tmp_path: Path) -> None:
    kb = _kb(tmp_path, "BAAI/bge-reranker-v2-m3")
    _run(["index", str(kb)], tmp_path)
    heavy, code, stderr = _run(["search", "fused", "--kb", str(kb), "--rerank"], tmp_path)
    assert (heavy, code) == ([], 1)
    assert "groove: reranker model 'BAAI/bge-reranker-v2-m3' is not a local directory" in stderr
    assert "Traceback" not in stderr


def test_the_probe_notices_a_rerank(tmp_path: Path, tiny_model: Path) -> None:
    kb = _kb(tmp_path, str(tiny_model))
    _run(["index", str(kb)], tmp_path)
    heavy, code, _ = _run(["search", "fused results", "--kb", str(kb), "--rerank"], tmp_path)
    assert code == 0 and {"torch", "sentence_transformers"} <= set(heavy)
    assert "FlagEmbedding" not in heavy  # auto never loads the optional backend
