"""A model server that answers NaN, through the command line as a user meets it: the run
fails with one line and stores none of it, search keeps working, and once the server is
healthy again the next run indexes the rest (the core checks every embedder's vectors)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from groove_http_models.testing import ModelServer, http_config

from groove_core.cli import build_cli
from groove_core.embedding import HashingEmbedder
from groove_core.testing import EVERY_SECTION, make_kb


class _Sometimes:
    """The hashing embedder, answering NaN for texts holding ``word`` while it is set."""

    def __init__(self) -> None:
        self.word: str | None = "Ownership"
        self.inner = HashingEmbedder(64)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.inner.embed_documents(list(texts))
        for i, text in enumerate(texts):
            if self.word is not None and self.word in text:
                vectors[i] = np.nan
        return vectors


def _groove(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_cli(None), list(args))
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def test_a_server_answering_nan_fails_the_run_in_one_line_and_search_keeps_working(
    tmp_path: Path,
) -> None:
    model = _Sometimes()
    with ModelServer({"hash-64": model}) as server:
        kb = make_kb(
            tmp_path / "kb",
            # a chunk per section: the spoiled text is notes/rust.md's second chunk
            config=http_config(server.url + "/v1", batch=2, dimensions=64) + EVERY_SECTION,
        )
        code, output = _groove("index", str(kb), "--quiet")
        assert code != 0
        lines = [line for line in output.splitlines() if line.strip()]
        assert len(lines) == 1 and "NaN or infinite values" in lines[0], output
        assert "notes/rust.md, chunk 2" in lines[0]

        code, output = _groove("search", "install python", "--kb", str(kb), "--files")
        assert code == 0 and "guide/install.md" in output, output

        model.word = None  # the server is healthy again
        code, output = _groove("index", str(kb), "--quiet")
        assert code == 0, output
        code, output = _groove("doctor", str(kb))
        assert code == 0, output
        code, output = _groove("search", "ownership data races", "--kb", str(kb), "--files")
        assert code == 0 and output.splitlines()[0] == "notes/rust.md", output

        model.word = "data races"  # now the query itself comes back as NaN
        code, output = _groove("search", "ownership data races", "--kb", str(kb))
        assert code != 0 and "NaN or infinite values for 1 of 1 text" in output, output
