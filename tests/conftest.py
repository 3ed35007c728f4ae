from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
if "GROOVE_CACHE_DIR" not in os.environ:
    # the derived model cache of this run (built by the first test that embeds with the
    # default model); never the user's own cache folder, and removed afterwards
    os.environ["GROOVE_CACHE_DIR"] = tempfile.mkdtemp(prefix="groove-test-cache-")
    atexit.register(shutil.rmtree, os.environ["GROOVE_CACHE_DIR"], ignore_errors=True)

# The sockets through which a running `groove serve` answers `groove search` (docs/cli.md):
# this run's own folder, so that no test talks to a developer's servers, nor they to it.
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="groove-test-run-")
atexit.register(shutil.rmtree, os.environ["XDG_RUNTIME_DIR"], ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _bilingual_dictionary_converted() -> None:
    """groove-bilingual, where installed, converts JMdict once at the first cross-language
    search and says so on stderr, which click's test runner mixes into the output a test
    parses: converted here, quietly, before any test (into this run's cache folder)."""
    try:
        from groove_bilingual.dictionary import open_dictionary
    except ImportError:
        return
    open_dictionary(progress=lambda message: None)


NOTES = {
    "guide/install.md": (
        "---\ntitle: Installing groove\ntags: [setup, guide]\n---\n"
        "# Installing groove\n\nRun the setup script to create a virtual environment.\n\n"
        "## Requirements\n\nPython 3.11 and a C compiler are needed for sqlite extensions.\n"
    ),
    "guide/search.md": (
        "# Searching\n\nUse quoted phrases for exact matches and a leading minus to exclude.\n\n"
        "## Ranking\n\nResults are fused with reciprocal rank fusion across the lexical "
        "and vector legs.\n"
    ),
    "notes/rust.md": (
        "---\ntags: [lang]\n---\n# Rust notes\n\nRust async runtimes such as tokio schedule "
        "futures.\n\n## Ownership\n\nRust ownership rules prevent data races at compile time.\n"
    ),
    "notes/ja.md": (
        "# 再ランキングの評価\n\nクロスエンコーダによる再ランキングの評価について説明する。\n\n"
        "## 検索システム\n\n全文検索とベクトル検索を組み合わせたシステムである。\n"
    ),
}


@pytest.fixture
def notes_kb(tmp_path: Path) -> Path:
    from groove_core.testing import make_kb

    return make_kb(tmp_path / "kb", NOTES)
