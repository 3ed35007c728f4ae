"""``groove eval`` and ``groove tune``.

Only click (and the standard library) is imported at module level: ``groove --help`` builds
these commands, and must not pay for numpy, pydantic or an embedder. Everything else is
imported inside the command bodies.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from groove_core.cli.common import handle_errors
from groove_core.cli.options import config_option, defaulted, file_option, kb_option
from groove_core.cli.terminal import dumps, printable

if TYPE_CHECKING:
    from groove_core.evaluation.history import Delta, VariantRun
    from groove_core.evaluation.metrics import Estimate
    from groove_core.evaluation.runner import Outcomes
    from groove_core.evaluation.session import EvalSession
    from groove_core.evaluation.tune import TuneReport

STAGES = ("candidates", "full")


def _warn(message: str) -> None:
    click.echo(f"groove: warning: {message}", err=True)


@dataclass(frozen=True)
class _Shared:
    """What eval and tune are both given (the options :func:`_common` adds)."""

    kb: Path
    config_path: Path | None
    golden_path: Path | None
    limit: int
    as_json: bool
    report_path: Path | None
    seed: int | None

    def session(self) -> EvalSession:
        """The KB opened with its golden queries resolved."""
        from groove_core.evaluation.session import EvalSession

        return EvalSession.open(self.kb, self.config_path, self.golden_path)

    @property
    def bootstrap_seed(self) -> int:
        from groove_core.evaluation.metrics import DEFAULT_SEED

        return DEFAULT_SEED if self.seed is None else self.seed


def _common(func: Callable[..., None]) -> Callable[..., None]:
    """The options eval and tune share; the command receives them as one :class:`_Shared`
    (its first argument), the rest of its options by name."""
    names = [f.name for f in fields(_Shared)]

    @functools.wraps(func)
    def command(**kwargs: Any) -> None:
        shared = _Shared(**{name: kwargs.pop(name) for name in names})
        func(shared, **kwargs)

    options = [
        kb_option,
        config_option,
        file_option(
            "--golden", "golden_path", "Golden queries, JSON Lines (default: <kb>/golden.jsonl)."
        ),
        click.option(
            "--limit",
            type=click.IntRange(10, 200),
            default=10,
            show_default=True,
            help="Chunks taken from each result list before collapsing to documents.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
        file_option(
            "--report", "report_path", "Also write a self-contained HTML report to this file."
        ),
        click.option("--seed", type=int, default=None, help="Bootstrap seed (default fixed)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class _Progress:
    """A progress bar on stderr when it is a terminal; silent otherwise (CI logs, pipes).
    Used as a context manager: the bar is closed however the run ends."""

    def __init__(self, total: int, label: str) -> None:
        self._bar: Any = None
        if sys.stderr.isatty() and total >= 20:
            self._bar = click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True)
            self._bar.__enter__()

    def __call__(self, step: int) -> None:
        if self._bar is not None:
            self._bar.update(step)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


# -- eval --------------------------------------------------------------------------------


@click.command("eval")
@_common
@defaulted(
    "--stage",
    click.Choice(STAGES),
    "candidates",
    "candidates: the fused hybrid list (stage 1); full: every enabled stage.",
)
@file_option(
    "--per-query",
    "per_query_path",
    "Write each query's rank and metrics here (.csv for CSV, else JSON Lines).",
)
@click.option("--ablate", is_flag=True, help="Lexical only, vector only, hybrid, + each stage.")
@click.option("--no-history", is_flag=True, help="Do not record this run in the history.")
@handle_errors
def eval_cmd(
    shared: _Shared, stage: str, per_query_path: Path | None, ablate: bool, no_history: bool
) -> None:
    """Measure retrieval quality on golden queries.

    Reports recall@1/5/10, MRR@10, nDCG@10 and hit@10 with 95% bootstrap intervals,
    document-level (a document counts once, at its best chunk's rank). Each run is
    recorded beside the index (<kb>/.groove/eval-history.json) and compared with the
    previous run on the same golden file. See docs/eval.md.
    """
    from groove_core.evaluation.history import record_run
    from groove_core.evaluation.session import Variant

    session = shared.session()
    if ablate:
        from groove_core.evaluation.session import ablation_variants

        variants = ablation_variants(session)
    else:
        variants = [Variant("default", session.config, "full" if stage == "full" else "candidates")]
    results = []
    for variant in variants:
        with _Progress(len(session.queries), f"eval {variant.name}") as progress:
            outcomes = session.run(
                variant.config, stage=variant.stage, limit=shared.limit, progress=progress
            )
        results.append(
            record_run(
                session,
                variant,
                outcomes,
                kb=shared.kb,
                limit=shared.limit,
                seed=shared.bootstrap_seed,
                keep=not no_history,
                warn=_warn,
            )
        )
    if per_query_path is not None:
        _write_per_query(per_query_path, results)
    if shared.report_path is not None:
        _write_eval_report(shared.report_path, session, results)
    if shared.as_json:
        click.echo(dumps(_eval_json(session, results)))
    else:
        _print_eval(session, results, ablate)


def _eval_json(session: EvalSession, results: Sequence[VariantRun]) -> dict[str, Any]:
    runs = []
    for r in results:
        runs.append(
            {
                "variant": r.variant.name,
                "stage": r.variant.stage,
                "note": r.variant.note,
                "n": len(r.outcomes.items),
                "metrics": {m: e.to_json() for m, e in r.summary.items()},
                "rejected": [
                    {"id": o.key, "query": o.query, "error": o.error} for o in r.outcomes.errors
                ],
                "delta": r.delta.to_json() if r.delta is not None else None,
                "fingerprint": r.record["fingerprint"],
                "corpus": r.record["corpus"],
            }
        )
    return {
        "golden": str(session.golden.path),
        "graded": session.golden.graded,
        "queries": len(session.queries),
        "missing_expected": [{"id": k, "path": p} for k, p in session.missing()],
        "runs": runs,
    }


def _print_eval(session: EvalSession, results: Sequence[VariantRun], ablate: bool) -> None:
    from groove_core.evaluation.metrics import METRIC_NAMES

    judged = "graded" if session.golden.graded else "binary"
    click.echo(
        f"golden: {printable(str(session.golden.path))} ({len(session.queries)} queries, "
        f"{judged} judgements)"
    )
    if ablate:
        _print_ablation(results)
    else:
        result = results[0]
        click.echo(f"stage: {result.variant.stage}")
        click.echo(f"{'metric':<10} {'mean':>6}  {'95% CI':<13}  change vs previous run")
        for m in METRIC_NAMES:
            e = result.summary[m]
            change = _change_text(result.delta, m)
            click.echo(f"{m:<10} {e.mean:>6.3f}  {e.low:.3f}-{e.high:.3f}  {change}")
        _print_delta_context(result.delta, result.record["corpus"])
    rejected = results[0].outcomes.errors
    if rejected:
        click.echo(
            f"{_count(len(rejected), 'query', 'queries')} rejected by the query language "
            "(counted as misses):"
        )
        for o in rejected:
            # Ids, queries and the errors quoting them come from the golden file.
            click.echo(printable(f"  {o.key}: {o.query!r}: {o.error}"))
    missing = session.missing()
    if missing:
        click.echo(
            f"{_count(len(missing), 'expected document')} not in the index "
            "(counted as not found), e.g.:"
        )
        for key, path in missing[:5]:
            click.echo(printable(f"  {key}: {path}"))


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _change_text(delta: Delta | None, metric: str) -> str:
    if delta is None or metric not in delta.changes:
        return "-"
    c = delta.changes[metric]
    d = c.delta
    mark = "significant" if c.significant else "noise"
    return f"{d.mean:+.3f} (CI {d.low:+.3f}..{d.high:+.3f}, p={c.p_value:.3f}, {mark})"


def _print_delta_context(delta: Delta | None, corpus: Mapping[str, Any]) -> None:
    if delta is None:
        click.echo("(first run on this golden file: nothing to compare with)")
        return
    click.echo(f"compared with the run of {delta.previous.get('timestamp', '?')}:")
    if not delta.differences and not delta.corpus_changed:
        click.echo("  same configuration and corpus")
    for line in delta.differences:
        click.echo(printable(f"  {line}"))
    if delta.corpus_changed:
        click.echo(printable(f"  corpus changed: {delta.previous.get('corpus')} -> {dict(corpus)}"))


def _print_ablation(results: Sequence[VariantRun]) -> None:
    names = ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "hit@10")
    width = max(len(r.variant.name) for r in results) + 2
    click.echo(
        f"{'configuration':<{width}}" + "".join(f"{n:>10}" for n in names) + "   ndcg@10 95% CI"
    )
    for r in results:
        cells = "".join(f"{r.summary[n].mean:>10.3f}" for n in names)
        e = r.summary["ndcg@10"]
        note = f"  ({r.variant.note})" if r.variant.note else ""
        click.echo(f"{r.variant.name:<{width}}{cells}   {e.low:.3f}-{e.high:.3f}{note}")


def _write_per_query(path: Path, results: Sequence[VariantRun]) -> None:
    from groove_core.evaluation.metrics import METRIC_NAMES

    rows = []
    for r in results:
        for o in r.outcomes.items:
            rows.append(
                {
                    "variant": r.variant.name,
                    "id": o.key,
                    "query": o.query,
                    "first_relevant_rank": o.first_rank,
                    "relevant": o.relevant,
                    **{m: round(o.metrics[m], 4) for m in METRIC_NAMES},
                    "top": [d.path for d in o.docs[:10]],
                    "error": o.error,
                    "missing_expected": list(o.missing),
                }
            )
    try:
        if path.suffix.lower() == ".csv":
            _write_csv(path, rows)
        else:
            with path.open("w", encoding="utf-8") as handle:
                for row in rows:
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    except OSError as err:
        raise click.ClickException(f"cannot write {path}: {err.strerror}") from None


def _write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    import csv

    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["id"])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: " ".join(v) if isinstance(v, list) else v for k, v in row.items()})


def _write_eval_report(path: Path, session: EvalSession, results: Sequence[VariantRun]) -> None:
    from groove_core.evaluation import report

    rows = [
        report.Row(r.variant.name, r.summary, len(r.outcomes.items), r.variant.note)
        for r in results
    ]
    sections = [("Metrics", report.metric_table(rows))]
    for r in results:
        sections.append(
            (
                f"Rank distribution: {r.variant.name}",
                report.rank_histogram(r.outcomes, r.variant.name),
            )
        )
    meta = [
        f"golden file: {session.golden.path} ({len(session.queries)} queries)",
        f"knowledge base: {session.app.kb}",
    ]
    _write_text(path, report.page("groove eval", sections, meta))


def _write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise click.ClickException(f"cannot write {path}: {err.strerror}") from None


# -- tune --------------------------------------------------------------------------------


@click.command("tune")
@_common
@defaulted(
    "--metric",
    click.Choice(["ndcg@10", "mrr@10", "recall@1", "recall@5", "recall@10", "hit@10"]),
    "ndcg@10",
    "The metric to optimise.",
)
@defaulted(
    "--holdout",
    click.FloatRange(0.2, 0.8),
    0.5,
    "Share of the golden queries held out to test the chosen setting.",
)
@click.option(
    "--write", is_flag=True, help="Write the winner to [search.fusion] if it is a real gain."
)
@handle_errors
def tune_cmd(shared: _Shared, metric: str, holdout: float, write: bool) -> None:
    """Sweep RRF k and the bm25 column weights; report whether any setting really helps.

    The best setting is picked on one part of the golden queries and tested against the
    current one on the held-out part with a paired test. groove.toml is only written with
    --write, and only when the gain is beyond noise. See docs/eval.md for the grid.
    """
    from groove_core.evaluation.tomledit import write_tuned
    from groove_core.evaluation.tune import assess, current_point, grid, k_values, run_grid

    session = shared.session()
    searcher = session.searcher()
    terms_leg = searcher.plugins.terms_leg()
    current = current_point(session.config, terms_leg, searcher.plugins.leg_weight(terms_leg))
    ks = k_values(session.config, searcher.plugins.leg_specs())
    weights = {p.weights for p in grid(current, ks)}
    with _Progress(len(session.queries) * (1 + len(weights)), "tune") as progress:
        result = run_grid(searcher, session.queries, limit=shared.limit, progress=progress)
    keys = [q.golden.key for q in session.queries]
    try:
        tuned = assess(
            result, keys, current, metric=metric, holdout=holdout, seed=shared.bootstrap_seed
        )
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    written = write_tuned(tuned, shared.kb, shared.config_path, _warn, terms_leg) if write else None
    if shared.report_path is not None:
        _write_tune_report(shared.report_path, session, tuned, result.outcomes[current])
    if shared.as_json:
        shown = str(written) if written is not None else None
        payload = {"golden": str(session.golden.path), **tuned.to_json(), "written": shown}
        click.echo(dumps(payload))
    else:
        _print_tune(session, tuned, written)


def _print_tune(session: EvalSession, tuned: TuneReport, written: Path | None) -> None:
    low, high = tuned.spread
    n = len(session.queries)
    golden = printable(str(session.golden.path))
    click.echo(f"golden: {golden} ({n} queries: {tuned.tune_n} to tune, ", nl=False)
    click.echo(f"{tuned.held_n} held out)")
    settings, metric = len(tuned.tune_means), tuned.metric
    click.echo(f"grid: {settings} settings; {metric} on the tuning queries {low:.3f}-{high:.3f}")
    for name, point, held in (
        ("current", tuned.current, tuned.held_current),
        ("best", tuned.best, tuned.held_best),
    ):
        tuning = tuned.tune_means[point]
        click.echo(f"{name + ':':<8} {point.label()}  tuning {tuning:.3f}  held-out {_est(held)}")
    click.echo(f"verdict: {tuned.verdict()}")
    if written:
        click.echo(f"wrote [search.fusion] to {printable(str(written))}")


def _est(e: Estimate) -> str:
    return f"{e.mean:.3f} ({e.low:.3f}-{e.high:.3f})"


def _write_tune_report(
    path: Path, session: EvalSession, tuned: TuneReport, current: Outcomes
) -> None:
    from groove_core.evaluation import report

    sections = [
        ("Verdict", report.note(tuned.verdict())),
        (f"{tuned.metric} over the grid (tuning queries)", report.heatmap(tuned)),
        (
            "Rank distribution at the current setting (all queries)",
            report.rank_histogram(current, "current"),
        ),
    ]
    meta = [
        f"golden file: {session.golden.path} ({len(session.queries)} queries)",
        f"knowledge base: {session.app.kb}",
    ]
    _write_text(path, report.page("groove tune", sections, meta))
