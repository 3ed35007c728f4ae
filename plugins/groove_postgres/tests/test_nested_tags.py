"""Tag filters agree on both backends: case-insensitive, a tag matching the tags nested under
it (Obsidian's ``status`` finds ``status/active``), never a mere prefix of a name."""

from __future__ import annotations

from pathlib import Path

from groove_postgres.testing import store_toml

from groove_core.testing import make_kb, open_kb

NOTES = {
    "a.md": "---\ntags: [status/active]\n---\n# Alpha\n\nThe release train is on time.\n",
    "b.md": "---\ntags: [Status]\n---\n# Beta\n\nThe release train is late.\n",
    "c.md": "---\ntags: [statusx, 状態/進行中]\n---\n# Gamma\n\nThe release train left.\n",
    "d.md": "---\ntags: [other]\n---\n# Delta\n\nThe release train is gone.\n",
}


def test_nested_tags_match_alike_on_both_backends(tmp_path: Path, postgres_dsn: str) -> None:
    lite = open_kb(make_kb(tmp_path / "lite", NOTES, config=store_toml("sqlite")))
    pg = open_kb(make_kb(tmp_path / "pg", NOTES, config=store_toml("postgres", postgres_dsn)))
    expected = {
        ("status",): {"a.md", "b.md"},
        ("STATUS/active",): {"a.md"},
        ("#status",): {"a.md", "b.md"},
        ("stat",): set(),
        ("状態",): {"c.md"},
        ("status", "status/active"): {"a.md"},
    }
    for tags, paths in expected.items():
        for app in (lite, pg):
            found = {h.path for h in app.search("release train", limit=10, tags=tags).results}
            assert found == paths, (app.backend.name, tags)
