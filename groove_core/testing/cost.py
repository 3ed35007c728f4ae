"""What a command imports (the heavy modules a stage must not pay for) and what one call
costs against another, as a ratio (tests guard ratios, never absolute times)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


# A meta-path finder records every *attempt* to import a watched module, so a check means
# the same whether or not the module happens to be installed where the test runs.
_IMPORT_PROBE = """
import json, sys
attempted = set()
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {watched!r}:
            attempted.add(name.split(".")[0])
        return None
sys.meta_path.insert(0, Spy())
from groove_core.cli import main
code = 0
try:
    main({argv!r})
except SystemExit as exit:
    code = exit.code or 0
found = sorted(attempted | {{m for m in {watched!r} if m in sys.modules}})
print("\\n" + json.dumps({{"imported": found, "code": code}}), file=sys.stderr)
"""

HEAVY_MODULES = ("torch", "transformers", "sentence_transformers", "FlagEmbedding")


def heavy_imports(
    argv: Sequence[str], cwd: Path, watched: Sequence[str] = HEAVY_MODULES
) -> tuple[list[str], int, str]:
    """Run ``groove ARGV`` in a fresh process and report which ``watched`` top-level
    modules it imported or tried to, its exit status, and its stderr — to prove a plugin
    keeps its heavy dependencies out of start-up and out of searches that do not use it."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    probe = _IMPORT_PROBE.format(argv=list(argv), watched=tuple(watched))
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return list(report["imported"]), int(report["code"]), proc.stderr


def cost_ratio(
    numerator: Callable[[], object],
    denominator: Callable[[], object],
    *,
    rounds: int = 7,
    repeat: int = 3,
    clock: Callable[[], float] = time.thread_time,
) -> float:
    """How many times ``numerator`` costs ``denominator``, robustly on a busy machine.

    Cost is this thread's CPU time, not wall time: on a loaded machine a call that takes
    longer than a scheduler time slice is preempted almost every time while a short one
    rarely is, so wall-clock ratios grow with the load (a 20x ratio read 36x beside other
    work). CPU time does not, so measure work done in this thread (SQLite, numpy and the
    like run in the calling thread). The sides run interleaved, each round takes the best of
    ``repeat`` runs of each side, and the answer is the median of the rounds' ratios: a
    burst on one side moves one round, a real regression moves every round. Guard
    performance with this, never with absolute times. Pass ``clock=time.process_time``
    when the work spreads over threads of its own (BLAS threads): their CPU time counts.

    The garbage collector is paused while measuring: a full collection costs in proportion
    to every object the process holds (a whole test session's), so it would charge the side
    that allocates more for objects that are not its own.
    """
    import gc

    ratios = []
    gc.collect()
    paused = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            numer = _best_time(numerator, repeat, clock)
            ratios.append(numer / _best_time(denominator, repeat, clock))
    finally:
        if paused:
            gc.enable()
    return statistics.median(ratios)


def _best_time(fn: Callable[[], object], repeat: int, clock: Callable[[], float]) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = clock()
        fn()
        best = min(best, clock() - started)
    return max(best, 1e-9)
