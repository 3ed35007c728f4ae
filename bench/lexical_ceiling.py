"""How far the lexical side can go: the word leg's bm25 rebuilt outside groove, varied,
and fused again with groove's own legs (issue #27, docs/eval.md "What the default cannot
reach").

Usage (from the repository root, after the collections were copied and indexed into
``--work`` as ``bench/eval_collections.py`` does; the SQLite backend)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/lexical_ceiling.py \
        --work DIR [--golden cranfield-en/golden.jsonl ...]

For each golden file it records every leg groove runs for each query (stage 1, the
default configuration, the legs weighed as for fusion), then rebuilds the word leg's
ranking from the index's chunks: the same tokens (``groove_core.words``) and FTS5's own
bm25 (one length over the row's three columns, column weights on the term frequency,
k1 = 1.2, b = 0.75). The rebuilt leg must rank as groove's does (the first row says so);
each variant then replaces it, alone ("word leg") and fused with the other legs by RRF as
groove fuses them ("pipeline"). Variants:

* ``k1=..,b=..``: bm25's two constants (FTS5 fixes them);
* ``cols=h,c,t``: the heading / context / content weights;
* ``qtf``: a word the question repeats counts as often as it is repeated;
* ``pairs w=N``: the question's neighbouring word pairs added as terms of their own, found
  within N words of each other (0: side by side, as an FTS5 phrase; sequential-dependence
  style), at half a word's weight;
* ``rm3 x..``: pseudo-relevance feedback (as groove-expansion chooses its terms) with the
  added terms weighted by their feedback weight, summing to x times the query's weight,
  in the rebuilt leg's place (a weighted query FTS5 cannot run);

then other fusions of groove's own legs ("fusion", :func:`fusions`: RRF's k and weights,
and a score-based fusion); and, for a Japanese golden file, the peer tool's bigram bm25
(one FTS5 token per CJK character, the question's neighbouring characters as OR'd
phrases, hiragana included, title column x4) paired against groove's lexical legs. Every
row is paired against groove's own figure with ``groove eval``'s test.

docs/eval.md's figures: ``--golden`` cranfield-en/golden.jsonl, and jsquad-ja-para's
golden.jsonl, golden-hard.jsonl and golden-short.jsonl.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import math
import re
import sqlite3
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groove_expansion.terms import choose, document_idf, feedback_weights
from paired import versus

from groove_core import fusion, words
from groove_core.builtins.legs import _common
from groove_core.config import SearchConfig
from groove_core.evaluation.metrics import RankedDoc, bootstrap, query_metrics
from groove_core.evaluation.session import EvalSession
from groove_core.models import LegHit, LegResult
from groove_core.query import parse_query

try:  # the SQLite the index was written with (ENVIRONMENT: pysqlite3 for sqlite-vec)
    from pysqlite3 import dbapi2 as sqlite
except ImportError:  # pragma: no cover - a Python whose sqlite3 has FTS5
    sqlite = sqlite3

#: Each leg's candidates, as groove fuses them (``[search.fusion] candidates``).
DEPTH = 50
K1, B = 1.2, 0.75
COMMON_SHARE = SearchConfig().lexical_common_share

Ranking = list[tuple[str, float]]  # (document path, score), best first
Legs = dict[str, tuple[float, list[tuple[str, int]]]]  # name -> (weight, [(path, chunk)])


@dataclass
class Query:
    text: str
    grades: dict[str, float]
    legs: Legs
    raw: dict[str, dict[int, float]]  # leg -> chunk -> the leg's own score (bm25, distance)


def record(kb: Path, golden: Path) -> list[Query]:
    """Every golden query's weighed legs, as groove's stage 1 runs them."""
    session = EvalSession.open(kb, None, golden)
    searcher = session.searcher().searcher
    out = []
    for resolved in session.queries:
        ctx = searcher.context(resolved.golden.query, limit=10)
        legs = searcher.candidates(ctx)
        rows = ctx.store.chunk_rows([h.chunk_id for leg in legs for h in leg.hits])
        recorded = {
            leg.name: (
                float(leg.meta.get("weight", 1.0)),
                [(rows[h.chunk_id].path, h.chunk_id) for h in leg.hits if h.chunk_id in rows],
            )
            for leg in legs
        }
        raw = {leg.name: {h.chunk_id: h.raw_score for h in leg.hits} for leg in legs}
        out.append(Query(resolved.golden.query, dict(resolved.grades), recorded, raw))
    session.app.close()
    return out


def rrf(legs: Legs, k: float = 60.0) -> Ranking:
    """groove's own fusion (``groove_core.fusion.rrf``) of the legs' first :data:`DEPTH`
    hits, cut to 10 chunks: (path, score)."""
    paths = {chunk: path for _, hits in legs.values() for path, chunk in hits[:DEPTH]}
    results = [
        LegResult(name, tuple(LegHit(c, 0.0) for _, c in hits[:DEPTH]), {"weight": weight})
        for name, (weight, hits) in legs.items()
    ]
    return [(paths[f.chunk_id], f.score) for f in fusion.rrf(results, k, 10)]


def ndcg(query: Query, ranking: Ranking) -> float:
    seen: set[str] = set()
    docs = []
    for path, score in ranking:
        if path not in seen:
            seen.add(path)
            docs.append(RankedDoc(path, score))
    return float(query_metrics(docs, query.grades)["ndcg@10"])


class Chunks:
    """The index's chunks as the word leg tokenizes them, with bm25 over them."""

    def __init__(self, kb: Path) -> None:
        db = sqlite.connect(f"file:{kb / '.groove' / 'index.sqlite'}?mode=ro", uri=True)
        rows = db.execute(
            "SELECT chunks.id, documents.path, heading, context, content "
            "FROM chunks JOIN documents ON documents.id = chunks.doc_id"
        ).fetchall()
        db.close()
        self.path: dict[int, str] = {}
        self.cols: dict[int, list[list[str]]] = {}
        self.tf: dict[int, list[collections.Counter[str]]] = {}
        self.length: dict[int, int] = {}
        self.df: collections.Counter[str] = collections.Counter()
        self.postings: dict[str, set[int]] = collections.defaultdict(set)
        for cid, path, *texts in rows:
            cols = [words.tokens(_anchorless(t)) for t in texts]
            self.path[cid], self.cols[cid] = path, cols
            self.tf[cid] = [collections.Counter(c) for c in cols]
            self.length[cid] = sum(len(c) for c in cols)
            for token in {t for c in cols for t in c}:
                self.df[token] += 1
                self.postings[token].add(cid)
        self.n = len(rows)
        self.avg = sum(self.length.values()) / self.n

    def idf(self, df: int) -> float:
        return max(math.log((self.n - df + 0.5) / (df + 0.5)), 1e-6)  # FTS5's floor

    def saturate(self, cid: int, freq: float, k1: float, b: float) -> float:
        return freq * (k1 + 1) / (freq + k1 * (1 - b + b * self.length[cid] / self.avg))

    def bm25(
        self,
        query: dict[str, float],
        cols: Sequence[float] = (2.0, 1.0, 1.0),
        k1: float = K1,
        b: float = B,
        extra: Callable[[dict[int, float]], None] | None = None,
    ) -> list[tuple[str, int]]:
        """(path, chunk) best first for a weighted bag of tokens; ``extra`` adds to the
        scores before ranking (the pair terms)."""
        scores: dict[int, float] = collections.defaultdict(float)
        for token, weight in query.items():
            idf = self.idf(self.df.get(token, 0))
            for cid in self.postings.get(token, ()):
                freq = sum(w * tf.get(token, 0) for w, tf in zip(cols, self.tf[cid], strict=True))
                scores[cid] += weight * idf * self.saturate(cid, freq, k1, b)
        if extra is not None:
            extra(scores)
        ordered = sorted(scores, key=lambda c: (-scores[c], c))[: DEPTH * 4]
        return [(self.path[c], c) for c in ordered]

    def pairs(self, pairs: Iterable[tuple[str, str]], window: int, weight: float) -> Any:
        """An ``extra`` that scores each pair found within ``window`` words as a term."""

        def add(scores: dict[int, float]) -> None:
            for a, b in pairs:
                found = {}
                for cid in self.postings.get(a, set()) & self.postings.get(b, set()):
                    freq = sum(
                        w * _near(col, a, b, window)
                        for w, col in zip((2.0, 1.0, 1.0), self.cols[cid], strict=True)
                    )
                    if freq:
                        found[cid] = freq
                idf = self.idf(len(found))
                for cid, freq in found.items():
                    scores[cid] += weight * idf * self.saturate(cid, freq, K1, B)

        return add


_ANCHOR = words._ANCHOR  # what the word table leaves out of a heading ({#id})


def _anchorless(text: str) -> str:
    return str(_ANCHOR.sub(" ", unicodedata.normalize("NFKC", text)))


def _near(col: Sequence[str], a: str, b: str, window: int) -> int:
    """Occurrences of ``a`` with ``b`` at most ``window`` words between them, either order."""
    at_b = [i for i, t in enumerate(col) if t == b]
    return sum(
        1 for i, t in enumerate(col) if t == a and any(abs(j - i) <= window + 1 for j in at_b)
    )


def question_tokens(chunks: Chunks, text: str) -> tuple[list[str], list[str]]:
    """(the word leg's terms, every content token in order) of a question: its distinct
    terms without those in a large share of the chunks, the rarest always kept, as the word
    leg leaves them out (``lexical_common_share``, ``COMMON_PHRASE_MIN_ROWS``)."""
    parts = parse_query(text).positive_parts
    terms, _ = words.query_terms(parts)
    terms = [t for t in terms if " " not in t]
    common = _common(terms, {t: chunks.df.get(t, 0) for t in terms}, COMMON_SHARE, chunks.n)
    ordered = [t for part, _quoted in parts for t in words.tokens(part, drop_stop_words=True)]
    return [t for t in terms if t not in common], ordered


def rm3(chunks: Chunks, terms: list[str], mass: float) -> dict[str, float]:
    """The query's terms at 1 each, plus the terms groove-expansion chooses
    (``groove_expansion.terms``: 10 feedback passages, at most as many terms as the query
    has) weighted by their feedback weight x IDF, summing to ``mass`` x the query's terms."""
    feedback = chunks.bm25(dict.fromkeys(terms, 1.0))[:10]
    passages = [
        [t for col in chunks.cols[cid] for t in col if t not in words.STOP_WORDS]
        for _, cid in feedback
    ]
    candidates = feedback_weights(passages, set(terms))
    best = choose(candidates, document_idf(chunks.df, chunks.n), min(10, len(terms)))
    query = dict.fromkeys(terms, 1.0)
    added = sum(v for _, v in best) or 1.0
    for token, value in best:
        query[token] = query.get(token, 0.0) + mass * len(terms) * value / added
    return query


def variants(chunks: Chunks) -> dict[str, Callable[[str], list[tuple[str, int]]]]:
    def plain(**kw: Any) -> Callable[[str], list[tuple[str, int]]]:
        return lambda q: chunks.bm25(dict.fromkeys(question_tokens(chunks, q)[0], 1.0), **kw)

    def qtf(q: str) -> list[tuple[str, int]]:
        terms, ordered = question_tokens(chunks, q)
        counts = collections.Counter(t for t in ordered if t in terms)
        return chunks.bm25({t: float(counts.get(t, 1)) for t in terms})

    def pairs(window: int) -> Callable[[str], list[tuple[str, int]]]:
        def run(q: str) -> list[tuple[str, int]]:
            terms, ordered = question_tokens(chunks, q)
            near = [(a, b) for a, b in itertools.pairwise(ordered) if a != b]
            return chunks.bm25(dict.fromkeys(terms, 1.0), extra=chunks.pairs(near, window, 0.5))

        return run

    found: dict[str, Callable[[str], list[tuple[str, int]]]] = {"rebuilt": plain()}
    for k1 in (0.9, 1.5, 2.0):
        for b in (0.3, 0.5, 0.9):
            found[f"k1={k1},b={b}"] = plain(k1=k1, b=b)
    for cols in ((1.0, 1.0, 1.0), (4.0, 1.0, 1.0), (0.0, 0.0, 1.0)):
        found["cols=" + ",".join(f"{c:g}" for c in cols)] = plain(cols=cols)
    found["qtf"] = qtf
    for window in (0, 5):
        found[f"pairs w={window}"] = pairs(window)

    def expanded(mass: float) -> Callable[[str], list[tuple[str, int]]]:
        return lambda q: chunks.bm25(rm3(chunks, question_tokens(chunks, q)[0], mass))

    for mass in (0.5, 1.0):
        found[f"rm3 x{mass:g}"] = expanded(mass)
    return found


_CJK = "\u3005-\u3007\u3041-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"


def peer_bigrams(kb: Path) -> Callable[[str], Ranking]:
    """The peer's Japanese baseline over the collection's files, ranked by FTS5 bm25."""
    cjk = re.compile(f"[{_CJK}]")
    token = re.compile(f"[{_CJK}]|[A-Za-z0-9]+")
    db = sqlite.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(title, body, tokenize = 'unicode61')")
    paths = sorted((kb / "docs").rglob("*.md"))
    for rowid, path in enumerate(paths, start=1):
        head, _, body = unicodedata.normalize("NFKC", path.read_text(encoding="utf-8")).partition(
            "\n"
        )
        spaced = [cjk.sub(lambda m: f" {m.group(0)} ", s) for s in (head.lstrip("# "), body)]
        db.execute("INSERT INTO t(rowid, title, body) VALUES (?, ?, ?)", (rowid, *spaced))
    names = {i: p.relative_to(kb).as_posix() for i, p in enumerate(paths, start=1)}

    def search(question: str) -> Ranking:
        toks = token.findall(unicodedata.normalize("NFKC", question))
        phrases = [
            f'"{a} {b}"'
            for a, b in itertools.pairwise(toks)
            if cjk.fullmatch(a) and cjk.fullmatch(b)
        ]
        phrases += [f'"{t}"' for t in toks if not cjk.fullmatch(t)]  # Latin words, digits
        phrases = phrases or [f'"{t}"' for t in toks]  # a one-character question
        rows = db.execute(
            "SELECT rowid, bm25(t, 4.0, 1.0) AS s FROM t WHERE t MATCH ? ORDER BY s LIMIT 10",
            (" OR ".join(dict.fromkeys(phrases)),),
        ).fetchall()
        return [(names[r], -s) for r, s in rows]

    return search


def row(label: str, values: list[float], base: list[float] | None) -> str:
    est = bootstrap(values)
    return f"| {label} | {est.mean:.3f} | {versus(values, base)} |"


def fusions() -> dict[str, Callable[[Query], Ranking]]:
    """Other fusions of groove's own legs: RRF's k and leg weights (settings ``groove eval
    --config`` can set too: ``rrf_k``, ``[search.fusion.weights]``, ``coverage_vector``), and
    a score-based fusion, which is not RRF: each leg's scores (bm25 negated, the vector
    leg's cosine) divided by its best, or min-max scaled, times the leg's weight, added."""

    def weighted(k: float = 60.0, **change: tuple[str, float]) -> Callable[[Query], Ranking]:
        def run(q: Query) -> Ranking:
            legs = dict(q.legs)
            for name, (how, value) in change.items():
                if name in legs:
                    weight, hits = legs[name]
                    legs[name] = (weight * value if how == "x" else value, hits)
            return rrf(legs, k)

        return run

    def scores(scale: str) -> Callable[[Query], Ranking]:
        def run(q: Query) -> Ranking:
            fused: dict[int, list[Any]] = {}
            for name, (weight, hits) in q.legs.items():
                if weight <= 0 or not hits:
                    continue
                top = hits[:DEPTH]
                raw = q.raw[name]
                if name == "vector":  # unit vectors: cosine from L2, its least is -1
                    values = [1 - raw[c] ** 2 / 2 for _, c in top]
                    least = -1.0
                else:  # bm25 is negative, smaller better; its least is 0
                    values = [-raw[c] for _, c in top]
                    least = 0.0
                high, low = max(values), (min(values) if scale == "range" else least)
                for (path, chunk), value in zip(top, values, strict=True):
                    share = (value - low) / (high - low) if high > low else 1.0
                    item = fused.setdefault(chunk, [0.0, path])
                    item[0] += weight * share
            ordered = sorted(fused.items(), key=lambda kv: (-kv[1][0], kv[0]))[:10]
            return [(item[1], item[0]) for _, item in ordered]

        return run

    return {
        "rrf k=20": weighted(20.0),
        "rrf k=100": weighted(100.0),
        "vector x0.5": weighted(vector=("x", 0.5)),
        "vector x2": weighted(vector=("x", 2.0)),
        "vector at 0.5": weighted(vector=("=", 0.5)),
        "vector at 1": weighted(vector=("=", 1.0)),
        # As [search.fusion.weights] sets them: the rules (cross-script) still apply.
        "trigram leg 0.5": weighted(fts=("x", 0.5)),
        "word leg 3": weighted(word=("x", 1.5)),
        "scores / best": scores("best"),
        "scores min-max": scores("range"),
    }


def with_word_leg(q: Query, word: list[tuple[str, int]] | None, alone: bool) -> Legs:
    """The query's legs with the word leg's list replaced (when given); ``alone``: every
    other leg weighted 0."""
    legs = dict(q.legs)
    if word is not None:
        legs["word"] = (legs["word"][0] if "word" in legs else 2.0, word)
    if alone:
        legs = {name: (w if name == "word" else 0.0, hits) for name, (w, hits) in legs.items()}
    return legs


def report(work: Path, golden: str) -> None:
    collection, _ = golden.split("/")
    kb = work / collection
    queries = record(kb, work / golden)
    chunks = Chunks(kb)
    print(f"\n### {golden} ({len(queries)} queries, {chunks.n} chunks)\n")
    print("| variant | nDCG@10 | Δ vs groove (95% interval, p) |\n|---|---|---|")
    for scope, alone in (("word leg", True), ("pipeline", False)):
        base = [ndcg(q, rrf(with_word_leg(q, None, alone))) for q in queries]
        print(row(f"{scope}: groove", base, None))
        for name, leg in variants(chunks).items():
            values = [ndcg(q, rrf(with_word_leg(q, leg(q.text), alone))) for q in queries]
            print(row(f"{scope}: {name}", values, base), flush=True)
    base = [ndcg(q, rrf(q.legs)) for q in queries]
    for name, fuse in fusions().items():
        print(row(f"fusion: {name}", [ndcg(q, fuse(q)) for q in queries], base), flush=True)
    if collection.startswith("jsquad"):
        peer = peer_bigrams(kb)
        lexical = [
            ndcg(q, rrf({n: (0.0 if n == "vector" else w, h) for n, (w, h) in q.legs.items()}))
            for q in queries
        ]
        base = [ndcg(q, peer(q.text)) for q in queries]
        print(row("peer bigram bm25", base, None))
        print(row("groove lexical legs alone, paired with it", lexical, base))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--golden", action="append", default=None)
    args = parser.parse_args()
    for golden in args.golden or ("cranfield-en/golden.jsonl", "jsquad-ja-para/golden.jsonl"):
        report(args.work, golden)


if __name__ == "__main__":
    main()
