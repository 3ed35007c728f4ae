"""Helpers for testing groove and groove plugins: a temporary KB, a fast embedder, and
contract checks every stage kind must pass.

Import in a plugin's own tests::

    from groove_core.testing import make_kb, open_kb, check_candidate_leg

``make_kb`` writes Markdown files and a groove.toml that selects the deterministic
``hashing`` embedder, so tests never load a real model unless they ask for one. The
``check_*`` functions run a plugin's hook on a real query context and assert the contract
of its stage (see docs/plugins.md); they raise AssertionError naming what broke.

Five kits, one module each, all importable from here: :mod:`~groove_core.testing.kb` (the
KB and a query context on it), :mod:`~groove_core.testing.stages` (the stage and leg-index
contracts), :mod:`~groove_core.testing.backend` (the storage-backend contract),
:mod:`~groove_core.testing.cost` (imports and cost ratios) and
:mod:`~groove_core.testing.processes` (MCP clients, killed processes, servers).
"""

from groove_core.testing.backend import BILINGUAL, BackendContract
from groove_core.testing.cost import HEAVY_MODULES, cost_ratio, heavy_imports
from groove_core.testing.kb import (
    EVERY_SECTION,
    FAST_CONFIG,
    SAMPLE_NOTES,
    SAMPLE_QUERIES,
    SECTION_CHUNKS,
    candidate_pool,
    installed_plugin,
    make_kb,
    open_kb,
    query_context,
)
from groove_core.testing.processes import (
    KillRounds,
    WatchedEmbedder,
    call_tools,
    drive_mcp,
    kill_midway,
    wait_until_listening,
)
from groove_core.testing.stages import (
    check_candidate_leg,
    check_diversify_stage,
    check_expand_stage,
    check_leg_index,
    check_rerank_stage,
)

__all__ = [
    "BILINGUAL",
    "EVERY_SECTION",
    "FAST_CONFIG",
    "HEAVY_MODULES",
    "SAMPLE_NOTES",
    "SAMPLE_QUERIES",
    "SECTION_CHUNKS",
    "BackendContract",
    "KillRounds",
    "WatchedEmbedder",
    "call_tools",
    "candidate_pool",
    "check_candidate_leg",
    "check_diversify_stage",
    "check_expand_stage",
    "check_leg_index",
    "check_rerank_stage",
    "cost_ratio",
    "drive_mcp",
    "heavy_imports",
    "installed_plugin",
    "kill_midway",
    "make_kb",
    "open_kb",
    "query_context",
    "wait_until_listening",
]
