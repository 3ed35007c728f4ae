"""Text written in capitals is embedded lower-cased, chunks and queries alike (issue #42:
the LISA abstracts, all in capitals, ranked by the vector leg at nDCG@10 0.155 as written
and 0.290 lower-cased); anything else reaches the embedder as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from groove_core.embedding import embedding_input
from groove_core.testing import make_kb, open_kb
from groove_core.vector_pass import _text

CAPS = "THE COMMITTEE APPROVED THE LIBRARY BUDGET FOR NEXT YEAR."


@pytest.mark.parametrize(
    "text",
    [
        "The committee approved the library budget.",
        "HTTP API over TLS",  # acronyms: too few letters to be a text in capitals
        "ISO/TS 16949 では附則Aとして、コントロールプランの書式を規定している。ISO 9001の章立て",
        "Read MAX_VALUE and DEFAULT_TIMEOUT from the config before the server starts.",
        "",
    ],
)
def test_ordinary_text_is_given_as_it_is(text: str) -> None:
    assert embedding_input(text) == text


def test_text_in_capitals_is_lower_cased() -> None:
    assert embedding_input(CAPS) == CAPS.lower()
    assert embedding_input("HOW DO I RESET MY PASSWORD") == "how do i reset my password"
    # a few lower-case letters (a unit, a name) do not make it ordinary text
    assert embedding_input(CAPS + " 12 kg") == (CAPS + " 12 kg").lower()


def test_a_query_needs_fewer_capitals_than_a_chunk() -> None:
    # a short request in capitals over notes in capitals (LISA titles: vector leg 0.145 as
    # written, 0.302 lower-cased); an acronym or two stays as written
    assert embedding_input("LIBRARY AUTOMATION", query=True) == "library automation"
    assert embedding_input("LIBRARY AUTOMATION") == "LIBRARY AUTOMATION"
    assert embedding_input("HTTP API", query=True) == "HTTP API"
    assert embedding_input("Configure the HTTP API", query=True) == "Configure the HTTP API"


def test_a_chunk_in_capitals_is_embedded_lower_cased() -> None:
    assert _text("MEETING MINUTES", CAPS) == f"meeting minutes\n{CAPS.lower()}"
    assert _text("Minutes", "We met.") == "Minutes\nWe met."


def test_a_query_in_capitals_is_embedded_lower_cased(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_kb(make_kb(tmp_path / "kb", {"a.md": "# Budget\n\nThe library budget.\n"}))
    seen: list[str] = []
    real = app.embedder.embed_query

    def recording(text: str):  # type: ignore[no-untyped-def]
        seen.append(text)
        return real(text)

    monkeypatch.setattr(app.embedder, "embed_query", recording)
    app.search("WHAT DID THE COMMITTEE APPROVE FOR THE LIBRARY", limit=1)
    app.search("What did the committee approve", limit=1)
    app.search("LIBRARY BUDGET", limit=1)
    assert seen == [
        "what did the committee approve for the library",
        "What did the committee approve",
        "library budget",
    ]
