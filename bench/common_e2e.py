"""End-to-end search with the common-term rule off and on, interleaved query by query.

    .venv/bin/python bench/common_e2e.py KB [--share 0.2]

KB must be indexed (the hashing embedder will do: the rule does not depend on it). Two
Groove apps on the same index, one with ``[search] lexical_common_share = 0``, one with
SHARE; the golden queries of bench/scale.py. The first pass is reported apart: it fills the
per-connection cache of vocabulary counts (what a fresh process pays).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import queries
from timing import pct

from groove_core.app import Groove
from groove_core.config import SearchConfig, load_config
from groove_core.plugins import make_plugin_manager


def app_with(kb: Path, share: float) -> Groove:
    # The stages read the configuration the plugin manager was built with.
    config = load_config(kb, None)
    search = SearchConfig(**{**config.search.model_dump(), "lexical_common_share": share})
    config = config.model_copy(update={"search": search})
    return Groove(kb, config, make_plugin_manager(config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kb", type=Path)
    parser.add_argument("--share", type=float, default=0.2)
    args = parser.parse_args()
    apps = {"off": app_with(args.kb, 0.0), f"share {args.share:g}": app_with(args.kb, args.share)}
    texts = queries()
    for passes in ("first pass", "warm"):
        wall: dict[str, list[float]] = {n: [] for n in apps}
        cpu: dict[str, list[float]] = {n: [] for n in apps}
        for text in texts:
            for name, app in apps.items():
                w, c = time.perf_counter(), time.thread_time()
                app.search(text, limit=10)
                wall[name].append(time.perf_counter() - w)
                cpu[name].append(time.thread_time() - c)
        for name in apps:
            print(f"| {passes} | {name} | {pct(wall[name])} | {pct(cpu[name])} |")


if __name__ == "__main__":
    main()
