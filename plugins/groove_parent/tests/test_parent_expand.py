"""Expansion windows on hand-made chunk lists: siblings, the cap, joining, NULL counts."""

from __future__ import annotations

from groove_parent.expand import Piece, expand, grow, join, pieces, sibling_bounds, token_count

from groove_core.models import ExpandedRange
from groove_core.rows import DocumentChunkRow


def _piece(
    i: int, level: int = 2, parent: tuple[str, ...] = ("Top",), tokens: int = 10, gap: int = 1
) -> Piece:
    """Chunk ``i`` spanning 3 lines; ``gap`` blank lines before it."""
    line = 1 + i * (3 + gap)
    return Piece(
        i, level, parent, f"## S{i}\n\nbody {i}", tokens, line, line + 2, i * 100, i * 100 + 20
    )


def test_a_null_token_count_falls_back_to_the_indexer_estimate() -> None:
    assert token_count(None, "x" * 41) == 11  # ceil(41 / 4), as the indexer counts
    assert token_count(0, "x" * 41) == 0  # a stored count is trusted as is
    rows = [
        DocumentChunkRow(
            chunk_id=5,
            ordinal=0,
            heading="Section",
            heading_path=("Doc", "Section"),
            level=2,
            content="y" * 400,
            token_count=None,
            line_start=1,
            line_end=1,
            byte_start=0,
            byte_end=400,
        )
    ]
    (piece,) = pieces(rows)
    assert (piece.tokens, piece.parent) == (100, ("Doc",))


def test_siblings_stop_at_another_level_and_at_another_parent() -> None:
    doc = [
        _piece(0, level=1, parent=()),
        _piece(1),
        _piece(2),
        _piece(3, level=3, parent=("Top", "S2")),
        _piece(4),
        _piece(5),
        _piece(6, parent=("Other",)),  # same level, but its parent heading had no chunk
    ]
    assert sibling_bounds(doc, 2) == (1, 2)
    assert sibling_bounds(doc, 4) == (4, 5)
    assert sibling_bounds(doc, 6) == (6, 6)
    assert sibling_bounds(doc, 0) == (0, 0)


def test_growth_alternates_stays_contiguous_and_respects_the_cap() -> None:
    doc = [_piece(i, tokens=10) for i in range(7)]
    assert grow(doc, 3, (0, 6), 30) == (2, 4)  # following first, then preceding
    assert grow(doc, 3, (0, 6), 40) == (2, 5)
    assert grow(doc, 0, (0, 6), 35) == (0, 2)  # one side blocked: the other keeps growing
    assert grow(doc, 3, (2, 4), 1000) == (2, 4)  # never leaves its bounds
    doc[4] = _piece(4, tokens=50)
    # The big follower does not fit; the window never skips it to reach chunk 5.
    assert grow(doc, 3, (0, 6), 45) == (0, 3)


def test_a_hit_over_the_cap_on_its_own_is_left_alone() -> None:
    doc = [_piece(0, tokens=500), _piece(1, tokens=1)]
    assert grow(doc, 0, (0, 1), 100) == (0, 0)
    assert expand(doc, 0, whole_doc_threshold=1000, cap=100) is None


def test_joining_keeps_adjacent_lines_together_and_marks_gaps_with_a_blank_line() -> None:
    near = [_piece(0, gap=0), _piece(1, gap=0)]
    far = [_piece(0), _piece(1)]
    assert join(near) == "## S0\n\nbody 0\n## S1\n\nbody 1"
    assert join(far) == "## S0\n\nbody 0\n\n## S1\n\nbody 1"


def test_small_hits_grow_toward_the_whole_document_large_ones_toward_siblings() -> None:
    doc = [_piece(0, level=1, parent=(), tokens=5), _piece(1, tokens=5), _piece(2, tokens=50)]
    small = expand(doc, 1, whole_doc_threshold=10, cap=2000)
    assert small is not None
    assert small[1] == tuple(
        ExpandedRange(p.line_start, p.line_end, p.byte_start, p.byte_end) for p in doc
    )
    assert small[0] == join(doc)
    large = expand(doc, 2, whole_doc_threshold=10, cap=2000)
    assert large is not None and [r.byte_start for r in large[1]] == [100, 200]
    alone = [_piece(0, level=1, parent=(), tokens=50)]
    assert expand(alone, 0, whole_doc_threshold=10, cap=2000) is None
