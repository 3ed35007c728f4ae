"""How ``groove search`` prints what it found: the snippet list with highlighted matches,
and ``--explain`` (the compiled query, every leg with its weight and its own details, and
each hit's rank in each leg), as text and as the JSON ``--json --explain`` gives."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import click

from groove_core.cli.terminal import dumps, printable, style

_WHITESPACE = re.compile(r"\s+")


def _plain(data: bytes) -> str:
    """Decoded snippet text, whitespace folded to spaces, control characters made visible.

    Escaped piece by piece, before the highlight's own styling is added around them."""
    return printable(_WHITESPACE.sub(" ", data.decode("utf-8", "ignore")))


def _snippet(content: str, spans: list[list[int]], width: int = 320) -> str:
    """A one-paragraph window around the first match, with matches in bold."""
    data = content.encode("utf-8")
    first = spans[0][0] if spans else 0
    start = max(0, first - width // 3)
    end = min(len(data), start + width)
    pieces: list[str] = []
    cursor = start
    for s, e in spans:
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        pieces.append(_plain(data[cursor:s]))
        pieces.append(style(_plain(data[s:e]), bold=True, fg="yellow"))
        cursor = e
    pieces.append(_plain(data[cursor:end]))
    text = " ".join("".join(pieces).split())
    return ("… " if start > 0 else "") + text + (" …" if end < len(data) else "")


def print_human(payload: dict[str, Any], *, full: bool = False) -> None:
    from groove_core.cli import search_views as views

    results = payload["results"]
    if not results:
        click.echo("no results")
    for hit in results:
        where = printable(" > ".join(hit["heading_path"]) or hit["title"])
        path = printable(hit["path"])
        if "kb" in hit:  # several KBs searched: which one the hit is from
            path = f"[{printable(hit['kb'])}] {path}"
        stale = style("  (changed since indexed)", fg="yellow") if hit.get("stale") else ""
        click.echo(
            style(f"{hit['rank']:>2}. {path}:{hit['line_start']}-{hit['line_end']}", bold=True)
            + f"  {where}  "
            + style(f"score {hit['score']:.4f}", dim=True)
            + stale
        )
        if full:
            click.echo(views.full_text(hit["content"]))
        else:
            click.echo("    " + _snippet(hit["content"], hit["match_spans"]))
    notes = []
    if payload["low_confidence"] and not views.filter_matched_nothing(payload):
        notes.append("low confidence: no strong lexical or semantic match")
    if payload["filter_applied"]:
        notes.append(f"filter: {dumps(payload['filter_applied'], indent=None)}")
    notes.extend(payload.get("warnings", []))
    for note in notes:
        click.echo(style(f"({printable(note)})", dim=True))


def explain(response: Any, legs: Sequence[Any], ctx: Any) -> dict[str, Any]:
    """What --explain shows: the compiled query, the pool, and each hit's rank in each leg.

    One structure for both outputs, so --json --explain says exactly what the text says."""
    q = ctx.query
    return {
        "positives": list(q.positives),
        "negatives": list(q.negatives),
        "match_expr": q.match_expr,
        "embed_text": q.embed_text,
        "pool_size": ctx.pool_size,
        "leg_size": ctx.leg_size,
        "fusion": ctx.config.search.fusion.method,
        "rrf_k": ctx.config.search.fusion.rrf_k,
        "legs": [leg_explain(leg) for leg in legs],
        "ranks": [
            {
                "rank": hit.rank,
                "path": hit.path,
                "chunk_id": hit.chunk_id,
                "score": hit.score,
                "legs": {
                    name: {"rank": rank, "score": raw}
                    for name, (rank, raw) in sorted(hit.legs.items())
                },
            }
            for hit in response.results
        ],
    }


#: The meta keys --explain shows in their own words; the leg's other keys follow as they are.
_LISTED = ("weight_reasons", "common_dropped", "stop_words_dropped", "left_to_word", "added_terms")
_KNOWN = ("weight", "skipped", "reason", "expr", *_LISTED)
#: Keys left out: the query's terms are the positives again, in the leg's own tokens.
_NOT_SHOWN = frozenset({"terms"})


def leg_explain(leg: Any) -> dict[str, Any]:
    """A leg's kind and candidates, its fusion weight (with the rules that changed it), its
    own expression, and whatever else it reports in its meta (a plugin's leg's own keys
    under ``meta``): the same for every leg, a plugin's included."""
    out: dict[str, Any] = {"name": leg.name, "kind": leg.kind, "candidates": len(leg.hits)}
    for key in _KNOWN:
        if key in leg.meta:
            value = leg.meta[key]
            out[key] = list(value) if key in _LISTED else value
    own = {
        str(k): _plain_value(v)
        for k, v in leg.meta.items()
        if k not in _KNOWN and k not in _NOT_SHOWN
    }
    if own:
        out["meta"] = own
    return out


def _plain_value(value: Any) -> Any:
    """``value`` as JSON can hold it: numbers, strings, booleans and None as they are,
    sequences as lists, mappings as objects, anything else as its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_plain_value(v) for v in items]
    if isinstance(value, dict):
        return {str(k): _plain_value(v) for k, v in value.items()}
    return repr(value)


def _leg_details(leg: dict[str, Any]) -> str:
    out = ""
    if "weight" in leg:
        out += f"  weight {leg['weight']:g}"
        if leg.get("weight_reasons"):
            out += f" ({'; '.join(leg['weight_reasons'])})"
    if leg.get("skipped"):
        out += f"  (skipped: {leg['reason']})" if leg.get("reason") else "  (skipped)"
    return out


def print_explain(explain: dict[str, Any]) -> None:
    match_expr = explain["match_expr"]
    lines = [
        f"positives:  {explain['positives']}",
        f"negatives:  {explain['negatives']}",
        f"match_expr: {match_expr if match_expr is not None else '(FTS skipped)'}",
        f"embed_text: {explain['embed_text']!r}",
        f"pool: {explain['pool_size']}  leg size: {explain['leg_size']}  "
        f"fusion: {explain['fusion']}  rrf_k: {explain['rrf_k']}",
    ]
    for leg in explain["legs"]:
        head = f"leg {leg['name']} ({leg['kind']}): {leg['candidates']} candidates"
        lines.append(head + _leg_details(leg))
        if "expr" in leg:
            lines.append(f"  expr: {leg['expr']}")
        if leg.get("common_dropped"):
            lines.append(f"  too common, left out: {', '.join(leg['common_dropped'])}")
        if leg.get("stop_words_dropped"):
            lines.append(f"  stop words left out: {', '.join(leg['stop_words_dropped'])}")
        if leg.get("left_to_word"):
            lines.append(f"  left to the word leg: {', '.join(leg['left_to_word'])}")
        if leg.get("added_terms"):
            lines.append(f"  added terms: {', '.join(leg['added_terms'])}")
        for key, value in leg.get("meta", {}).items():
            shown = value if isinstance(value, str) else dumps(value, indent=None)
            lines.append(f"  {key}: {shown}")
    for hit in explain["ranks"]:
        parts = [f"{name} #{leg['rank']} ({leg['score']:.4f})" for name, leg in hit["legs"].items()]
        lines.append(
            f"  {hit['rank']:>2}. score {hit['score']:.5f}  {' + '.join(parts)}  {hit['path']}"
        )
    for line in lines:
        click.echo(printable(line))
    click.echo("")
