"""Start-up stays light: no torch / transformers / sentence-transformers unless needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "transformers", "sentence_transformers", "FlagEmbedding", "model2vec")

# A meta-path finder records every *attempt* to import a heavy module, so the test means
# the same whether or not torch happens to be installed in this environment.
PROBE = """
import json, sys
attempted = set()
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {heavy!r}:
            attempted.add(name.split(".")[0])
        return None
sys.meta_path.insert(0, Spy())
from groove_core.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(attempted | {{m for m in {heavy!r} if m in sys.modules}})
print("\\n" + json.dumps(heavy), file=sys.stderr)
"""


def _heavy_modules(argv: list[str], cwd: Path) -> list[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    last = proc.stderr.strip().splitlines()[-1]
    return list(json.loads(last))


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
