"""The docs cannot drift from the code."""

from __future__ import annotations

import inspect
from pathlib import Path

from groove_core import hookspecs
from groove_core.docgen import generated_docs

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_generated_references_are_current() -> None:
    for name, text in generated_docs().items():
        on_disk = (DOCS / name).read_text(encoding="utf-8")
        assert on_disk == text, f"docs/{name} is stale: run python -m groove_core.docgen"


def _hook_names() -> list[str]:
    return [
        name
        for name, obj in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("groove_")
    ]


def test_every_hook_is_documented_in_the_plugin_guide() -> None:
    guide = (DOCS / "plugins.md").read_text(encoding="utf-8")
    missing = [name for name in _hook_names() if f"### `{name}(" not in guide]
    assert not missing, f"hooks missing from docs/plugins.md: {missing}"


def test_every_config_key_has_a_description() -> None:
    text = generated_docs()["configuration.md"]
    assert "|  |" not in text, "a config key has no description in groove_core/config.py"


def test_every_hook_has_a_test_of_its_own() -> None:
    tests = Path(__file__).resolve().parent
    sources = [
        p.read_text(encoding="utf-8")
        for p in [*tests.rglob("test_*.py"), *tests.parent.glob("plugins/*/tests/test_*.py")]
        if p.name != "test_docs.py"
    ]
    untested = [name for name in _hook_names() if not any(f"def {name}(" in s for s in sources)]
    assert not untested, f"hooks no test implements: {untested}"
