"""Memory of concurrent readers: each reader thread's connection with its own vector
matrix (before) against one matrix shared by the process's Stores (after).

    .venv/bin/python bench/reader_memory.py KB [--readers 1 4]

KB must be indexed and hold at least ``MATRIX_MIN_ROWS`` chunks (bench/corpus.py 10000 and
bench/scale.py will do). Each configuration runs in a process of its own, in the order
before/after for each reader count: the query vectors are embedded first, then N threads,
each with its own connection (``Groove.store`` is per thread, as in ``groove serve``),
search together, a first search (vec0) and then the matrix's. Reported: the process's peak
RSS (VmHWM) and its resident memory before and after the searches, the threads still
holding their connections.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import queries

from groove_core.app import Groove
from groove_core.sqlite import store as store_module

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(kb: Path, readers: int, shared: bool) -> None:
    app = Groove.open(kb)
    vectors = [app.embedder.embed_query(q) for q in queries(5)]
    if not shared:  # before: every Store loads its own copy
        store_module._MATRICES.get = lambda key, token, load: load()  # type: ignore[method-assign]
    hwm, rss = status_mib("VmHWM"), status_mib("VmRSS")
    met = threading.Barrier(readers + 1)
    matrices: list[object] = []

    def reader() -> None:
        store = app.store
        store.vector_search(vectors[0], 10)  # a first search goes to vec0
        met.wait()
        for vector in vectors:
            store.vector_search(vector, 50)
        matrices.append(store._matrix)  # type: ignore[attr-defined]
        met.wait()  # hold the connection until measured
        met.wait()

    threads = [threading.Thread(target=reader) for _ in range(readers)]
    for t in threads:
        t.start()
    met.wait()
    met.wait()
    out = {
        "readers": readers,
        "shared": shared,
        "distinct_matrices": len({id(m) for m in matrices}),
        "peak_before_mib": hwm,
        "peak_mib": status_mib("VmHWM"),
        "rss_before_mib": rss,
        "rss_after_mib": status_mib("VmRSS"),
    }
    met.wait()
    for t in threads:
        t.join()
    print(json.dumps(out))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "shared")
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kb", type=Path)
    parser.add_argument("--readers", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    chunks = Groove.open(args.kb).store.counts()["chunks"]
    print(f"{chunks:,} chunks")
    print("| readers | matrices | peak RSS MiB | RSS before -> after searches MiB |")
    print("|---|---|---|---|")
    for readers in args.readers:
        for mode in ("own", "shared"):
            proc = subprocess.run(
                [sys.executable, __file__, "--child", str(args.kb), str(readers), mode],
                capture_output=True,
                text=True,
                env=ENV,
                check=True,
            )
            r = json.loads(proc.stdout)
            print(
                f"| {readers} | {mode}: {r['distinct_matrices']} | {r['peak_mib']:.0f} "
                f"| {r['rss_before_mib']:.0f} -> {r['rss_after_mib']:.0f} |"
            )


if __name__ == "__main__":
    main()
