"""Helpers for testing groove and groove plugins: a temporary KB, a fast embedder, and
contract checks every stage kind must pass.

Import in a plugin's own tests::

    from groove_core.testing import make_kb, open_kb, check_candidate_leg

``make_kb`` writes Markdown files and a groove.toml that selects the deterministic
``hashing`` embedder, so tests never load a real model unless they ask for one. The
``check_*`` functions run a plugin's hook on a real query context and assert the contract
of its stage (see docs/plugins.md); they raise AssertionError naming what broke.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_args

from groove_core.app import Groove
from groove_core.context import QueryContext
from groove_core.models import LegKind, LegResult, SearchHit
from groove_core.storage import StoreError

if TYPE_CHECKING:
    from groove_core.plugins import PluginInfo
    from groove_core.storage import IndexStore

T = TypeVar("T")

FAST_CONFIG = '[embedder]\nname = "hashing"\n'

#: A small mixed-language KB for contract checks.
SAMPLE_NOTES: dict[str, str] = {
    "guide/install.md": (
        "---\ntitle: Installing\ntags: [setup]\n---\n# Installing\n\n"
        "Create a virtual environment and install the package.\n\n"
        "## Requirements\n\nPython 3.11 or newer is required.\n"
    ),
    "guide/search.md": (
        "# Searching\n\nQuoted phrases match exactly; a leading minus excludes a word.\n\n"
        "## Ranking\n\nResults from the lexical and vector legs are fused with RRF.\n"
    ),
    "notes/rust.md": (
        "# Rust\n\nAsync runtimes schedule futures.\n\n## Ownership\n\n"
        "Ownership rules prevent data races.\n"
    ),
    "notes/ja.md": (
        "# 再ランキング\n\nクロスエンコーダによる再ランキングの評価について。\n\n"
        "## 検索\n\n全文検索とベクトル検索を組み合わせる。\n"
    ),
}
SAMPLE_QUERIES = ("ranking results", "再ランキングの評価", "rust ownership", "install python")


def make_kb(
    root: Path, files: Mapping[str, str | bytes] | None = None, *, config: str | None = FAST_CONFIG
) -> Path:
    """Write ``files`` (KB-relative path -> text or bytes; default ``SAMPLE_NOTES``) under
    ``root``, plus a groove.toml (``config``; None writes none)."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, body in (SAMPLE_NOTES if files is None else files).items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            target.write_bytes(body)
        else:
            target.write_text(body, encoding="utf-8")
    if config is not None:
        (root / "groove.toml").write_text(config, encoding="utf-8")
    return root


def open_kb(
    kb: Path,
    *,
    extra_plugins: Sequence[tuple[str, object]] = (),
    entry_points: bool = True,
    index: bool = True,
) -> Groove:
    """A :class:`Groove` for ``kb`` with a fresh plugin set (indexed unless ``index=False``)."""
    app = Groove.open(kb, extra_plugins=extra_plugins, entry_points=entry_points)
    if index:
        app.index()
    return app


def installed_plugin(name: str) -> PluginInfo:
    """What groove reports of the plugin ``name`` found through its entry point (its
    distribution, status and hooks), under a default configuration: a plugin's test that
    it is installed and discovered as published."""
    from groove_core.config import parse_config
    from groove_core.plugins import make_plugin_manager

    plugins = make_plugin_manager(parse_config({}))
    return next(i for i in plugins.infos if i.name == name)


def query_context(
    app: Groove, query: str, *, limit: int = 5, options: Mapping[str, Any] | None = None
) -> QueryContext:
    """The context a stage would receive for ``query`` (pool sized by the enabled plugins)."""
    return app.searcher().context(query, limit=limit, options=options)


def candidate_pool(app: Groove, ctx: QueryContext) -> list[SearchHit]:
    """The fused stage-1 hits for ``ctx`` — the input the rerank stage receives."""
    return app.searcher().pool(ctx)


def check_candidate_leg(plugin: Any, app: Groove, queries: Sequence[str] = SAMPLE_QUERIES) -> None:
    """Each leg the plugin declares has a kind the core knows, and returns a LegResult (or
    None) of unique, existing chunk ids, at most leg_size."""
    specs = plugin.groove_legs()
    assert specs, "the plugin declares no leg"
    for spec in specs:
        assert spec.kind in get_args(LegKind), f"{spec.name}: unknown kind {spec.kind!r}"
        _check_leg(spec.search, app, queries)


def check_leg_index(app: Groove, name: str) -> None:
    """The leg index contract (docs/plugins.md, "A leg with its own index") for the index
    ``name`` on ``app``'s storage backend: after an index run, after a note is added, one
    edited and one deleted, and after a rebuild, the index holds exactly the KB's chunk
    ids; ``groove doctor`` finds it healthy. ``app``: a test's own KB (notes are written
    in it) with the leg's plugin registered."""
    kb = app.kb

    def agrees(when: str) -> None:
        store = app.store
        index = store.leg_index(name)
        assert index is not None, f"{when}: the store keeps no index {name!r}"
        every = store.chunk_ids_for_docs(d.doc_id for d in store.documents())
        held = index.chunk_ids()
        assert held == every, (
            f"{when}: the index {name!r} holds {sorted(held - every)[:5]} without a chunk and "
            f"misses {sorted(every - held)[:5]}"
        )
        assert index.check() == [], f"{when}: the index's own check failed"

    app.index()
    agrees("after an index run")
    added = kb / "leg-index-contract.md"
    added.write_text("# Contract\n\nA note the leg index check adds.\n\n## More\n\nText.\n")
    notes = sorted(p for p in kb.rglob("*.md") if p != added)
    assert len(notes) >= 2, "check_leg_index needs a KB of two notes at least"
    notes[0].write_text(notes[0].read_text(encoding="utf-8") + "\n\n## Edited\n\nMore.\n")
    app.index()
    agrees("after a note was added and one edited")
    notes[1].unlink()
    added.unlink()
    app.index()
    agrees("after two notes were deleted")
    doctor = app.doctor()
    assert doctor.healthy, doctor.problems
    app.index(rebuild=True)
    agrees("after a rebuild")


def _check_leg(search: Any, app: Groove, queries: Sequence[str]) -> None:
    for query in queries:
        ctx = query_context(app, query)
        result = search(ctx)
        if result is None:
            continue
        assert isinstance(result, LegResult), f"{query!r}: returned {type(result).__name__}"
        ids = [h.chunk_id for h in result.hits]
        assert len(ids) == len(set(ids)), f"{query!r}: duplicate chunk ids {ids}"
        assert len(ids) <= ctx.leg_size, f"{query!r}: {len(ids)} hits > leg_size {ctx.leg_size}"
        known = ctx.store.chunk_rows(ids)
        assert set(ids) <= set(known), f"{query!r}: unknown chunk ids {set(ids) - set(known)}"
        again = search(query_context(app, query))
        assert again == result, f"{query!r}: not deterministic"


def _stage_output(hook: Any, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit] | None:
    before = list(hits)
    out = hook(ctx=ctx, hits=hits)
    assert hits == before, "the stage mutated its input list"
    return None if out is None else list(out)


def check_rerank_stage(plugin: Any, app: Groove, queries: Sequence[str] = SAMPLE_QUERIES) -> None:
    """A rerank stage returns a reordering of its input (same chunk ids), ranks 1..n,
    deterministic, and handles an empty pool."""
    for query in queries:
        ctx = query_context(app, query)
        pool = candidate_pool(app, ctx)
        out = _stage_output(plugin.groove_rerank, ctx, pool)
        if out is None:
            continue
        assert sorted(h.chunk_id for h in out) == sorted(h.chunk_id for h in pool), (
            f"{query!r}: not a reordering of the input"
        )
        assert [h.rank for h in out] == list(range(1, len(out) + 1)), f"{query!r}: ranks"
        assert _stage_output(plugin.groove_rerank, ctx, pool) == out, (
            f"{query!r}: not deterministic"
        )
    empty = _stage_output(plugin.groove_rerank, query_context(app, queries[0]), [])
    assert not empty, "an empty pool must give an empty result (or None)"


def check_diversify_stage(
    plugin: Any, app: Groove, queries: Sequence[str] = SAMPLE_QUERIES
) -> None:
    """A diversifier returns a subset of its input of size min(limit, len(pool)), ranks 1..n."""
    for query in queries:
        base = query_context(app, query, limit=2)
        # A diversifier chooses from a wider pool than it returns (wide_pool: limit x 5).
        ctx = replace(base, pool_size=max(base.pool_size, base.limit * 5))
        pool = candidate_pool(app, ctx)
        out = _stage_output(plugin.groove_diversify, ctx, pool)
        if out is None:
            continue
        ids = [h.chunk_id for h in out]
        assert set(ids) <= {h.chunk_id for h in pool}, f"{query!r}: hits not from the pool"
        assert len(ids) == len(set(ids)) == min(ctx.limit, len(pool)), f"{query!r}: size"
        assert [h.rank for h in out] == list(range(1, len(out) + 1)), f"{query!r}: ranks"


def check_expand_stage(plugin: Any, app: Groove, queries: Sequence[str] = SAMPLE_QUERIES) -> None:
    """An expander keeps order, score, rank, path and chunk id; it may only change content
    (and must then say where it came from in ``expanded_from``)."""
    for query in queries:
        ctx = query_context(app, query)
        hits = candidate_pool(app, ctx)[: ctx.limit]
        out = _stage_output(plugin.groove_expand, ctx, hits)
        if out is None:
            continue
        keys = [(h.chunk_id, h.score, h.rank, h.path) for h in hits]
        assert [(h.chunk_id, h.score, h.rank, h.path) for h in out] == keys, (
            f"{query!r}: order, score, rank or path changed"
        )
        for before, after in zip(hits, out, strict=True):
            if after.content != before.content:
                assert after.expanded_from, f"{query!r}: content changed without expanded_from"


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


def drive_mcp(server: Any, scenario: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``scenario(client)`` against an in-process MCP server (``build_mcp_server``)
    with the SDK's real client, and return what it returns."""
    import asyncio

    from mcp import Client

    async def main() -> T:
        async with Client(server) as client:
            return await scenario(client)

    return asyncio.run(main())


def call_tools(server: Any, *requests: tuple[str, dict[str, Any]]) -> list[Any]:
    """Call each ``(tool name, arguments)`` in order on an in-process MCP server; the
    ``CallToolResult`` of each."""

    async def scenario(client: Any) -> list[Any]:
        return [await client.call_tool(name, args) for name, args in requests]

    return drive_mcp(server, scenario)


def kill_midway(
    proc: Any, full_run: float, share: float, clock: Callable[[], float] = time.monotonic
) -> tuple[bool, float]:
    """SIGKILL the started process ``proc`` (a ``subprocess.Popen``) ``share`` of the way
    into a run that took ``full_run`` seconds: whether it was still going (killed), and the
    run length to aim by next (shorter when this one finished first: the machine got
    faster). The process is reaped either way."""
    import signal

    began = clock()
    time.sleep(share * full_run)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    else:
        full_run = min(full_run, clock() - began)
    proc.wait(timeout=60)
    return killed, full_run


class KillRounds:
    """Rounds of a crash-safety test: in each, one started run is SIGKILLed part of the way
    through (:func:`kill_midway`), at a random share (within ``share``, from ``seed``) of
    ``full_run``, the seconds a whole run takes here (shortened as runs finish sooner).

    Iterate :meth:`rounds`; in each round, prepare, :meth:`kill` a run, then check what it
    left. :attr:`kills` counts the runs that were still going when killed."""

    def __init__(self, full_run: float, *, seed: int, share: tuple[float, float]) -> None:
        import random

        self.full_run = full_run
        self.kills = 0
        self._rng = random.Random(seed)
        self._share = share

    @classmethod
    def timed(
        cls, start: Callable[[], Any], *, timeout: float, seed: int, share: tuple[float, float]
    ) -> KillRounds:
        """Rounds aimed by one whole run of ``start()`` (a ``subprocess.Popen``), timed now;
        it must succeed."""
        began = time.monotonic()
        status = start().wait(timeout=timeout)
        assert status == 0, f"the whole run to time failed (exit status {status})"
        return cls(time.monotonic() - began, seed=seed, share=share)

    def rounds(self, most: int, *, enough: int) -> Iterator[int]:
        """Round numbers from 0: ``most`` rounds, or fewer once ``enough`` runs were killed."""
        for round_ in range(most):
            if self.kills >= enough:
                return
            yield round_

    def kill(self, proc: Any) -> bool:
        """Kill the started run ``proc`` part of the way through; whether it was still going."""
        killed, self.full_run = kill_midway(proc, self.full_run, self._rng.uniform(*self._share))
        self.kills += killed
        return killed


def wait_until_listening(proc: Any, port: int, timeout: float = 30.0) -> None:
    """Wait for a server process started by a test to accept connections on loopback
    ``port``; fail with its stderr if it exits first, or after ``timeout`` seconds."""
    import socket

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            stderr = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"the server exited ({proc.returncode}): {stderr}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listened on port {port} in {timeout} s") from None
            time.sleep(0.1)


class WatchedEmbedder:
    """Wraps an embedder for tests of the indexer's embedding thread: counts its calls and
    how many run at once, notes their threads, signals the start of each (``started[n]``
    for call ``n``), and pauses ``pause`` seconds in each so that calls can overlap."""

    def __init__(self, inner: Any, pause: float = 0.02) -> None:
        self.inner = inner
        self.identity = inner.identity
        self.pause = pause
        self.running = 0
        self.most_at_once = 0
        self.threads: set[str] = set()
        self.calls = 0
        self.started = [threading.Event() for _ in range(64)]
        self.lock = threading.Lock()

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed_documents(self, texts: Any) -> Any:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            call, self.calls = self.calls, self.calls + 1
        self.threads.add(threading.current_thread().name)
        self.started[call].set()
        try:
            time.sleep(self.pause)
            return self.inner.embed_documents(texts)
        finally:
            with self.lock:
                self.running -= 1

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


# -- the storage-backend contract ------------------------------------------------------------

#: A small Japanese and English KB: headings, tags, links, short Japanese words.
BILINGUAL: dict[str, str] = {
    "guide/install.md": (
        "---\ntitle: Installing groove\ntags: [setup, guide]\n---\n# Installing groove\n\n"
        "Run the setup script to create a virtual environment. See [searching](search.md).\n\n"
        "## Requirements\n\nPython 3.11 and a C compiler are needed for the extensions.\n"
    ),
    "guide/search.md": (
        "---\ntags: [guide]\n---\n# Searching\n\nUse quoted phrases for exact matches and a "
        "leading minus to exclude words.\n\n## Ranking\n\nResults are fused with reciprocal "
        "rank fusion across the lexical and vector legs. [[install]]\n"
    ),
    "notes/rust.md": (
        "---\ntags: [lang]\n---\n# Rust notes\n\nRust async runtimes such as tokio schedule "
        "futures.\n\n## Ownership\n\nRust ownership rules prevent data races at compile time.\n"
    ),
    "notes/python.md": (
        "# Python notes\n\nPython generators yield values lazily, one at a time.\n\n"
        "## Pipelines\n\nData pipelines chain generators; each stage pulls from the last.\n"
    ),
    "notes/ja.md": (
        "---\ntags: [日本語]\n---\n# 再ランキングの評価\n\nクロスエンコーダによる再ランキングの"
        "評価について説明する。\n\n## 検索システム\n\n全文検索とベクトル検索を組み合わせた"
        "システムである。状態管理の型も扱う。\n"
    ),
    "notes/vue.md": (
        "# 算出プロパティ\n\n算出プロパティはリアクティブな状態から値を計算する。"
        "キャッシュされる。\n\n## ウォッチャー\n\nウォッチャーは状態の変化に応じて副作用を"
        "実行する。部屋の型。\n"
    ),
    "journal/2024.md": (
        "# Journal\n\nToday I read about bm25 and trigram matching. 東京で日本語の文章を"
        "検索した。\n\nCafé naïve résumé — Ｆｕｌｌ－ｗｉｄｔｈ text.\n"
    ),
}


def _top(app: Groove, query: str, **filters: Any) -> list[tuple[str, int, str]]:
    response = app.search(query, limit=10, **filters)
    return [(h.path, h.line_start, h.content) for h in response.results]


def _content(app: Groove) -> set[tuple[str, int, str]]:
    """Everything a search can return, independent of ids and timestamps."""
    store = app.backend.open()
    try:
        docs = store.documents()
        rows = store.chunk_rows(sorted(store.chunk_ids_for_docs(d.doc_id for d in docs)))
        return {(r.path, r.ordinal, r.content) for r in rows.values()}
    finally:
        store.close()


def _files(kb: Path) -> dict[str, str]:
    return {
        p.relative_to(kb).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(kb.rglob("*.md"))
    }


def _document(app: Groove, path: str) -> dict[str, Any]:
    """What ``groove get`` and MCP ``get_document`` say of the file: whether it is indexed,
    and its title (both read it through ``groove_core.kb_files``, as this does)."""
    from groove_core.kb_files import indexed_document, resolve_markdown

    file = resolve_markdown(app, path)
    indexed = indexed_document(app, file.rel) if app.backend.exists() else None
    return {"indexed": indexed is not None, "title": indexed.title if indexed else None}


def _chunks_holding(store: IndexStore, text: str) -> frozenset[int]:
    """The chunks whose heading, context or content holds ``text`` (case-folded)."""
    docs = store.documents()
    rows = store.chunk_rows(sorted(store.chunk_ids_for_docs(d.doc_id for d in docs)))
    needle = text.casefold()
    return frozenset(
        cid
        for cid, row in rows.items()
        if any(needle in part.casefold() for part in (row.heading, row.context, row.content))
    )


class BackendContract:
    """The storage-backend contract (docs/storage-backends.md) as tests a backend's own
    suite runs. Subclass it in a test module and say how a KB is put on the backend::

        class TestMyBackend(BackendContract):
            def store_config(self, request):
                return FAST_CONFIG + '[store]\nbackend = "mine"\n'

    pytest collects the ``test_*`` methods of the subclass. The SQLite backend runs it
    (tests/test_backend_contract.py), and so does the PostgreSQL plugin.
    """

    #: The column weights the lexical checks search with.
    WEIGHTS = (2.0, 1.0, 1.0)

    def store_config(self, request: Any) -> str:
        """The groove.toml of a KB on this backend, with an empty index of its own (KBs are
        told apart by their folder's name) and a fast embedder (:data:`FAST_CONFIG`).
        ``request`` is pytest's fixture request, for a fixture the backend needs (a
        database, a server)."""
        raise NotImplementedError("a BackendContract subclass says how to configure a KB")

    def kb(self, request: Any, root: Path, files: Mapping[str, str] | None = None) -> Path:
        """A KB of ``files`` (default :data:`BILINGUAL`) on this backend, not indexed."""
        return make_kb(
            root, BILINGUAL if files is None else files, config=self.store_config(request)
        )

    def test_index_incrementally_change_and_delete(self, request: Any, tmp_path: Path) -> None:
        from groove_core.status import kb_status

        kb = self.kb(request, tmp_path / "kb")
        app = Groove.open(kb)
        first = app.index()
        assert (first.added, first.documents_total) == (len(BILINGUAL), len(BILINGUAL))
        assert app.index().unchanged == len(BILINGUAL)  # nothing to do the second time
        (kb / "notes" / "rust.md").write_text("# Rust notes\n\nBorrow checker lifetimes.\n")
        (kb / "notes" / "python.md").unlink()
        (kb / "notes" / "new.md").write_text("# 新しいノート\n\n部屋の掃除について。\n")
        report = app.index()
        assert (report.added, report.changed, report.removed) == (1, 1, 1)
        assert _top(app, "borrow checker lifetimes")[0][0] == "notes/rust.md"
        assert "notes/python.md" not in {p for p, _, _ in _top(app, "python generators")}
        assert _top(app, "部屋")[0][0] == "notes/new.md"
        clean = open_kb(self.kb(request, tmp_path / "clean", _files(kb)))
        assert _content(app) == _content(clean)
        status = kb_status(app)
        assert status["indexed"] and status["documents"] == len(BILINGUAL)
        assert status["backend"] == app.backend.name and not status["incomplete"]
        assert status["stale"] == 0
        got = _document(app, "notes/new.md")
        assert got["indexed"] is True and got["title"] == "新しいノート"

    def test_exclusions_and_filters(self, request: Any, tmp_path: Path) -> None:
        app = open_kb(self.kb(request, tmp_path / "kb"))
        assert not any("tokio" in c for _, _, c in _top(app, "rust -tokio"))
        assert {p for p, _, _ in _top(app, "検索", path="notes/*")} <= {
            f"notes/{n}.md" for n in ("ja", "vue", "rust", "python")
        }
        assert {p for p, _, _ in _top(app, "検索", path="guide")} <= {
            "guide/install.md",
            "guide/search.md",
        }
        assert {p for p, _, _ in _top(app, "notes", tags=("lang",))} == {"notes/rust.md"}
        assert _top(app, "検索", tags=("missing",)) == []

    def test_lexical_methods_take_phrases_and_terms(self, request: Any, tmp_path: Path) -> None:
        # The built-in lexical legs' indexes, as the backend keeps them (leg_index).
        app = open_kb(self.kb(request, tmp_path / "kb"))
        store = app.store
        fts, word = store.leg_index("fts"), store.leg_index("word")
        assert fts is not None and word is not None, "the built-in legs' indexes are kept"
        assert store.leg_index("no_such_leg") is None
        ranked = fts.search(["rust"], self.WEIGHTS, 50)
        assert {cid for cid, _ in ranked} == _chunks_holding(store, "rust")
        assert ranked == sorted(ranked, key=lambda r: (r[1], r[0]))  # best first, ties by id
        # A phrase is matched whole, case and diacritics folded, NFKC-normalised.
        assert {cid for cid, _ in fts.search(["CAFE"], self.WEIGHTS, 50)} == (
            _chunks_holding(store, "café")
        )
        assert {cid for cid, _ in fts.search(["full-width"], self.WEIGHTS, 50)} == (
            _chunks_holding(store, "ｆｕｌｌ－ｗｉｄｔｈ")
        )
        assert fts.search(["rust ownership rules"], self.WEIGHTS, 50)
        assert fts.search(["ownership rust"], self.WEIGHTS, 50) == []
        tokio = fts.ids(["tokio"])
        assert tokio and tokio == _chunks_holding(store, "tokio")
        assert fts.ids(["tokio", "generators"]) == tokio | _chunks_holding(store, "generators")
        kept = fts.search(["rust"], self.WEIGHTS, 50, excluded=["tokio"])
        assert {cid for cid, _ in kept} == _chunks_holding(store, "rust") - tokio
        only = frozenset(sorted(_chunks_holding(store, "rust"))[:1])
        assert [cid for cid, _ in fts.search(["rust"], self.WEIGHTS, 50, only)] == [*only]
        assert fts.search(["rust"], self.WEIGHTS, 1) == ranked[:1]
        # The word leg's terms: a token, or tokens that stand side by side.
        found = word.search(["状態"], self.WEIGHTS, 50)
        assert {cid for cid, _ in found} == _chunks_holding(store, "状態")
        assert word.search(["状態 態管"], self.WEIGHTS, 50)  # 状態管理, as bigrams
        assert word.search(["態管 状態"], self.WEIGHTS, 50) == []
        counts, total = word.rows(["状態", "状態 態管"])
        assert counts == {"状態": len(_chunks_holding(store, "状態"))}
        assert total == store.counts()["chunks"]
        assert fts.search([], self.WEIGHTS, 50) == [] and word.search([], self.WEIGHTS, 50) == []
        assert fts.ids([]) == frozenset()
        every = store.chunk_ids_for_docs(d.doc_id for d in store.documents())
        assert fts.chunk_ids() == word.chunk_ids() == every

    def test_unknown_ids_and_paths_are_left_out(self, request: Any, tmp_path: Path) -> None:
        app = open_kb(self.kb(request, tmp_path / "kb"))
        store = app.store
        assert store.chunk_rows([10**9]) == {}
        assert store.embeddings([10**9]) == {}
        assert store.document_chunks(10**9) == []
        assert store.links_of("nowhere.md", 10) is None
        assert store.file_states(["nowhere.md"]) == {}
        assert store.incomplete() is None
        assert store.counts()["documents"] == len(BILINGUAL)

    def test_documents_are_listed_a_page_at_a_time(self, request: Any, tmp_path: Path) -> None:
        files = {"b.md": "# B\n\nb\n", "a.md": "# A\n\na\n", "Z.md": "# Z\n\nz\n",
                 "é.md": "# E\n\ne\n", "d/c.md": "# C\n\nc\n"}  # fmt: skip
        store = open_kb(self.kb(request, tmp_path / "kb", files)).store
        every = store.documents()
        paths = [d.path for d in every]
        assert paths == sorted(files)  # code point order: "Z" before "a", "é" last
        assert store.documents(limit=2) == every[:2]
        assert store.documents(after="a.md", limit=2) == every[2:4]
        assert store.documents(after="b", limit=10) == every[2:]  # a path not indexed
        assert store.documents(after="é.md") == []
        assert store.documents(after="", limit=0) == []
        try:
            store.documents(limit=-1)
        except ValueError as err:
            assert "limit must be 0 or more" in str(err)
        else:
            raise AssertionError("a negative limit was taken")

    def test_rebuild_and_reembed_swap_in_a_whole_index(self, request: Any, tmp_path: Path) -> None:
        app = open_kb(self.kb(request, tmp_path / "kb"))
        before = _content(app)
        reader = app.store  # a connection opened before the rebuild
        rebuilt = Groove.open(app.kb).index(rebuild=True)
        assert rebuilt.added == len(BILINGUAL)
        assert not app.backend.current(reader)  # it reads the replaced index: reopened
        assert app.store is not reader
        assert _content(app) == before
        assert _top(app, "再ランキングの評価")[0][0] == "notes/ja.md"
        reembedded = Groove.open(app.kb).index(reembed=True)
        assert reembedded.chunks_embedded >= len(before)
        assert _content(app) == before
        assert _top(app, "rust ownership")[0][0] == "notes/rust.md"
        assert app.doctor().healthy

    def test_doctor_healthy_and_repair(self, request: Any, tmp_path: Path) -> None:
        app = open_kb(self.kb(request, tmp_path / "kb"))
        result = app.doctor()
        assert result.healthy, result.problems
        repaired = app.doctor(repair=True)
        assert repaired.healthy and not repaired.reindexed

    def test_a_missing_index_is_said(self, request: Any, tmp_path: Path) -> None:
        from groove_core.status import kb_status

        app = Groove.open(self.kb(request, tmp_path / "kb"))
        assert not app.backend.exists()
        assert kb_status(app)["indexed"] is False
        try:
            app.search("rust")
        except StoreError as err:
            assert "run 'groove index'" in str(err), err
        else:
            raise AssertionError("a search without an index did not fail")
        assert _document(app, "notes/rust.md")["indexed"] is False
