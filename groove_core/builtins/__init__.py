"""groove's own features, registered as plugins like any third-party one."""

from __future__ import annotations


def default_plugins() -> list[tuple[str, object]]:
    """(name, plugin) pairs registered on every plugin manager unless disabled by name."""
    from groove_core.builtins import embedders, highlight, legs
    from groove_core.sqlite import backend as sqlite

    return [
        ("fts", legs.FTSLeg()),
        ("vector", legs.VectorLeg()),
        ("word", legs.WordLeg()),
        ("match_spans", highlight.MatchSpans()),
        ("embedders", embedders),
        ("sqlite", sqlite),
    ]
