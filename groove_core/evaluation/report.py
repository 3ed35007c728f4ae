"""A self-contained HTML report: metric table, tune heatmap, rank distribution.

Inline SVG and CSS only (no script, no network), so the file can be attached to an issue
or opened offline years later and still show the same thing.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from groove_core.evaluation.metrics import DEPTH, METRIC_NAMES, Estimate

if TYPE_CHECKING:
    from groove_core.evaluation.runner import Outcomes
    from groove_core.evaluation.tune import TuneReport

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;
max-width:72em;color:#1d2430;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #dde2ea}
table{border-collapse:collapse;margin:.5em 0}
th,td{padding:.3em .7em;text-align:right;border-bottom:1px solid #eef1f5}
th:first-child,td:first-child{text-align:left}td small{color:#6b7585}.meta{color:#4b5565}
.note{background:#f5f7fa;border-left:3px solid #8aa1c1;padding:.5em .9em}
"""


@dataclass(frozen=True)
class Row:
    """One line of the metric table."""

    name: str
    summary: Mapping[str, Estimate]
    n: int
    note: str = ""


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _svg(width: float, height: float, title: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
        f"<title>{_esc(title)}</title>",
    ]


def _text(x: float, y: float, body: str, size: int = 11, anchor: str = "middle") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}">{body}</text>'


def _rect(x: float, y: float, w: float, h: float, fill: str, extra: str = "") -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}"{extra}'


def metric_table(rows: Sequence[Row]) -> str:
    head = "".join(f"<th>{_esc(m)}</th>" for m in METRIC_NAMES)
    body = []
    for row in rows:
        cells = "".join(
            f"<td>{e.mean:.3f}<br><small>{e.low:.3f}–{e.high:.3f}</small></td>"
            for e in (row.summary[m] for m in METRIC_NAMES)
        )
        note = f"<br><small>{_esc(row.note)}</small>" if row.note else ""
        body.append(f"<tr><td>{_esc(row.name)}{note}</td><td>{row.n}</td>{cells}</tr>")
    return (
        f"<table><thead><tr><th>configuration</th><th>queries</th>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
        "<p class=meta>Each cell: mean, and below it the 95% bootstrap interval over queries.</p>"
    )


def rank_histogram(outcomes: Outcomes, title: str) -> str:
    """Bars: how many queries found their first relevant document at rank 1..10, or not."""
    counts = [0] * (DEPTH + 1)
    for item in outcomes.items:
        rank = item.first_rank
        counts[rank - 1 if rank is not None and rank <= DEPTH else DEPTH] += 1
    labels = [str(r) for r in range(1, DEPTH + 1)] + ["miss"]
    width, height, pad = 560, 220, 30
    bar = (width - 2 * pad) / len(counts)
    top = max(counts) or 1
    parts = _svg(width, height + 40, title)
    for i, (count, label) in enumerate(zip(counts, labels, strict=True)):
        h = (height - 20) * count / top
        x, y = pad + i * bar, height - h
        color = "#c0504d" if label == "miss" else "#4f81bd"
        parts.append(_rect(x + 2, y, bar - 4, h, color) + "/>")
        parts.append(_text(x + bar / 2, y - 4, str(count)))
        parts.append(_text(x + bar / 2, height + 16, label))
    parts.append(_text(width / 2, height + 34, "document rank of the first relevant hit", 12))
    parts.append("</svg>")
    return "".join(parts)


def _heat(value: float, low: float, high: float) -> str:
    t = 0.0 if high <= low else (value - low) / (high - low)
    # White (worst) to dark green (best): readable in print and for most colour vision.
    r, g, b = int(255 - 200 * t), int(255 - 110 * t), int(255 - 190 * t)
    return f"rgb({r},{g},{b})"


def heatmap(report: TuneReport) -> str:
    """Rows: heading/context/content weights; columns: rrf_k; cell: tuning-part mean."""
    # The k x column-weight plane at the current fusion weights (the fusion-weight sweep
    # is listed in the JSON output, not drawn).
    means = {
        p: v
        for p, v in report.tune_means.items()
        if p.fusion_weights == report.current.fusion_weights
    }
    ks = sorted({p.rrf_k for p in means})
    weights = sorted({p.weights for p in means})
    low, high = report.spread
    cell_w, cell_h, left, top = 58, 18, 110, 40
    width, height = left + cell_w * len(ks) + 10, top + cell_h * len(weights) + 10
    parts = _svg(width, height, f"{report.metric} on the tuning queries")
    parts.append(_text(left, 14, "rrf_k →", 12, "start"))
    for j, k in enumerate(ks):
        parts.append(_text(left + j * cell_w + cell_w / 2, 32, f"{k:g}"))
    for i, w in enumerate(weights):
        y = top + i * cell_h
        parts.append(_text(left - 6, y + 13, "/".join(f"{v:g}" for v in w), 11, "end"))
        for j, k in enumerate(ks):
            point = next((p for p in means if p.rrf_k == k and p.weights == w), None)
            if point is None:
                continue
            value, x = means[point], left + j * cell_w
            outline = point in (report.best, report.current)
            stroke = ' stroke="#000" stroke-width="2"' if outline else ""
            tip = f"<title>{_esc(point.label())}: {value:.4f}</title></rect>"
            parts.append(
                _rect(x, y, cell_w - 1, cell_h - 1, _heat(value, low, high), stroke) + ">" + tip
            )
            parts.append(_text(x + cell_w / 2, y + 13, f"{value:.3f}", 10))
    parts.append("</svg>")
    return (
        "<p class=meta>Rows: bm25 weights heading/context/content. Outlined: the current "
        "setting and the best one.</p>" + "".join(parts)
    )


def page(title: str, sections: Sequence[tuple[str, str]], meta: Sequence[str] = ()) -> str:
    """The whole document; ``sections`` are (heading, trusted HTML body) pairs."""
    stamp = time.strftime("%Y-%m-%d %H:%M")
    meta_html = "".join(f"<div class=meta>{_esc(m)}</div>" for m in meta)
    body = "".join(f"<h2>{_esc(h)}</h2>{content}" for h, content in sections)
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_esc(title)}</h1>{meta_html}<div class=meta>generated {stamp}</div>{body}"
        "</body></html>\n"
    )


def note(text: str) -> str:
    return f"<p class=note>{_esc(text)}</p>"
