"""The built-in lexical legs' indexes as groove-postgres gives them to the core (no server)."""

from __future__ import annotations

import subprocess
import sys

import groove_postgres.plugin
from groove_postgres.legs import builtin_versions, default_indexes

from groove_core.config import GrooveConfig
from groove_core.plugins import make_plugin_manager


def test_it_implements_the_built_in_legs_indexes_under_their_versions() -> None:
    plugins = make_plugin_manager(
        GrooveConfig(), extra=[("postgres", groove_postgres.plugin)], entry_points=False
    )
    bound = {b.name: b for b in plugins.leg_indexes("postgres")}
    assert set(bound) == {"fts", "word"}
    assert {b.plugin for b in bound.values()} == {"postgres"}
    # The versions a store opened without a plugin set records are the legs' own: the
    # plugin computes them itself (it builds on the storage contract alone).
    assert builtin_versions() == {n: b.version for n, b in bound.items()}
    assert {b.name: b.version for b in default_indexes()} == builtin_versions()
    # Without the plugin the backend has no implementation of them.
    bare = make_plugin_manager(GrooveConfig(), entry_points=False)
    assert bare.leg_indexes("postgres") == ()


def test_listing_its_implementations_imports_no_driver() -> None:
    # SQLite users load the plugin too: its hooks must not import psycopg.
    code = (
        "import sys, groove_postgres.plugin as p; assert p.groove_leg_indexes(); "
        "assert 'psycopg' not in sys.modules, 'psycopg imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
