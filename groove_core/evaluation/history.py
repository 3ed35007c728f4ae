"""``eval-history.json`` beside the index: every eval run, comparable over time.

Each run records a ConfigFingerprint (every setting that can change a ranking), the state
of the corpus, the mean metrics with their intervals, and each query's metrics (rounded,
keyed by query) so that a later run can be compared query by query with a paired test.
The file is rewritten atomically (temp file + rename), so an interrupted run never leaves
half a file; a file that cannot be parsed is set aside with a warning, never fatal.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groove_core.config import index_path
from groove_core.evaluation.metrics import METRIC_NAMES, PairedComparison, paired_test

if TYPE_CHECKING:
    from pydantic import BaseModel

    from groove_core.config import GrooveConfig
    from groove_core.evaluation.golden import GoldenSet
    from groove_core.evaluation.metrics import Estimate
    from groove_core.evaluation.runner import Outcomes
    from groove_core.evaluation.session import EvalSession, Variant
    from groove_core.plugins import Plugins
    from groove_core.storage import IndexStore

HISTORY_FILENAME = "eval-history.json"
#: Where the history was kept before it moved beside the index: the KB's own folder, among
#: the user's notes (a vault synchronised elsewhere carried it along).
LEGACY_HISTORY_FILENAME = ".groove-eval-history.json"
HISTORY_VERSION = 1
#: Oldest runs are dropped past this many, so the file stays small enough to rewrite.
MAX_RUNS = 500

Warn = Callable[[str], None]


def fingerprint(
    config: GrooveConfig,
    plugins: Plugins,
    embedder_identity: str,
    golden: GoldenSet,
    *,
    stage: str,
    limit: int,
    schema_version: int,
    variant: str = "default",
) -> dict[str, Any]:
    """The settings that change results, flat (``section.key`` -> value) for diffing;
    ``schema_version`` is the index's layout (``IndexBackend.schema_version``)."""
    from groove_core import __version__

    fusion = config.search.fusion
    enabled = sorted(i.name for i in plugins.infos if i.status == "enabled")
    versions = {i.name: i.version for i in plugins.infos if i.status == "enabled"}
    out: dict[str, Any] = {
        "variant": variant,
        "stage": stage,
        "limit": limit,
        "embedder": embedder_identity,
        "fusion.rrf_k": fusion.rrf_k,
        "fusion.weights": [fusion.heading, fusion.context, fusion.content],
        "fusion.candidates": fusion.candidates,
        # Every leg's weight as fused: the configured one, else the one its spec declares.
        "fusion.leg_weights": dict(
            sorted({**{s.name: s.weight for s in plugins.leg_specs()}, **fusion.weights}.items())
        ),
        "fusion.cross_script_lexical": fusion.cross_script_lexical,
        "fusion.coverage_threshold": fusion.coverage_threshold,
        "fusion.coverage_vector": fusion.coverage_vector,
        "plugins.enabled": enabled,
        "plugins.versions": versions,
        "index.schema_version": schema_version,
        "index.max_chunk_tokens": config.index.max_chunk_tokens,
        **(
            {"index.min_section_tokens": config.index.min_section_tokens}
            if config.index.min_section_tokens
            else {}
        ),
        "index.cjk_char_tokens": config.index.cjk_char_tokens,
        "golden.sha256": golden.sha256,
        "groove.version": __version__,
    }
    if fusion.method != "rrf":
        # named only when not the seed's, so runs recorded before the setting existed
        # compare as the same configuration
        out["fusion.method"] = fusion.method
    # Both stages: a plugin's leg (the title leg, switched on in its section) changes the
    # candidates too, and a comparison must name that change.
    out.update(_stage_settings(config, plugins))
    return out


def _stage_settings(config: GrooveConfig, plugins: Plugins) -> dict[str, Any]:
    """Every plugin section as validated (defaults included), by its path."""
    out: dict[str, Any] = {}
    settings = plugins.settings
    for section in sorted(settings.sections, key=lambda s: (s.path, s.plugin)):
        values = settings.values[section.model].model_dump(by_alias=True, mode="json")
        key = section.path or f"(top level, plugin {section.plugin})"
        out[key] = _fingerprinted(values, settings.values[section.model])
    return out


def _fingerprinted(section: Mapping[str, Any], settings: BaseModel | None) -> dict[str, Any]:
    """A plugin section without the keys its schema marks ``fingerprint: False``: where a
    server is (a URL may carry credentials) does not change results, and the history file
    is shared and kept."""
    if settings is None:
        return dict(section)
    fields = type(settings).model_fields
    hidden = {
        key
        for name, info in fields.items()
        for key in (name, info.alias or name)
        if isinstance(info.json_schema_extra, dict)
        and info.json_schema_extra.get("fingerprint") is False
    }
    return {key: value for key, value in section.items() if key not in hidden}


def corpus_state(store: IndexStore) -> dict[str, Any]:
    """Documents, chunks, and one hash over every (path, content hash) pair."""
    states = store.doc_states()
    digest = hashlib.sha256()
    for path in sorted(states):
        digest.update(f"{path}\0{states[path].content_hash}\n".encode())
    return {**store.counts(), "content_sha256": digest.hexdigest()[:16]}


def run_record(
    *,
    kb: Path,
    golden: GoldenSet,
    fp: Mapping[str, Any],
    corpus: Mapping[str, Any],
    outcomes: Outcomes,
    summary: Mapping[str, Any],
) -> dict[str, Any]:
    """One history entry; per-query metrics as parallel lists keyed by ``queries``."""
    items = outcomes.items
    return {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "golden": {"path": str(golden.path), "sha256": golden.sha256},
        "fingerprint": dict(fp),
        "corpus": dict(corpus),
        "n": len(items),
        "errors": len(outcomes.errors),
        "metrics": dict(summary),
        "queries": [o.key for o in items],
        "per_query": {m: [round(o.metrics[m], 4) for o in items] for m in METRIC_NAMES},
    }


def history_path(kb: Path, config: GrooveConfig, warn: Warn | None = None) -> Path:
    """The KB's eval history: beside its index (``.groove/`` by default), not among the
    notes. A history left in the KB's folder is moved there (with a warning)."""
    path = index_path(kb, config).parent / HISTORY_FILENAME
    legacy = kb / LEGACY_HISTORY_FILENAME
    if legacy.is_file() and not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(legacy, path)
        except OSError as err:
            if warn is not None:
                warn(f"cannot move eval history {legacy} beside the index ({err})")
            return legacy
        if warn is not None:
            warn(f"moved eval history {legacy.name} beside the index: {path}")
    return path


def load_history(path: Path, warn: Warn) -> list[dict[str, Any]]:
    """The recorded runs, oldest first; a missing file is empty, a corrupt one is moved
    aside (``.corrupt``) with a warning so the next write does not destroy it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as err:
        warn(f"cannot read eval history {path} ({err}); starting a new one")
        return []
    try:
        data = json.loads(text)
        runs = data["runs"]
        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            raise TypeError("runs is not a list of objects")
    except (ValueError, KeyError, TypeError) as err:
        backup = path.with_name(path.name + ".corrupt")
        warn(f"eval history {path} is corrupt ({err}); moved it to {backup.name}")
        with contextlib.suppress(OSError):  # unreadable backups are not worth failing on
            os.replace(path, backup)
        return []
    return runs


def append_run(path: Path, record: Mapping[str, Any], warn: Warn) -> list[dict[str, Any]]:
    """Append ``record`` and rewrite the file atomically; returns the runs before it."""
    runs = load_history(path, warn)
    kept = [*runs, dict(record)][-MAX_RUNS:]
    payload = json.dumps({"version": HISTORY_VERSION, "runs": kept}, ensure_ascii=False)
    try:
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(payload)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as err:
        warn(f"cannot write eval history {path}: {err}")
    return runs


def previous_run(
    runs: Sequence[Mapping[str, Any]], record: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The latest earlier run on the same golden file (same content hash) and variant."""
    sha = record["golden"]["sha256"]
    variant = record["fingerprint"].get("variant")
    for run in reversed(runs):
        try:
            if run["golden"]["sha256"] == sha and run["fingerprint"].get("variant") == variant:
                found: Mapping[str, Any] = run
                return found
        except (KeyError, TypeError, AttributeError):
            continue
    return None


def fingerprint_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Human lines naming every setting that differs: ``fusion.rrf_k: 60.0 -> 30.0``."""
    lines = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            lines.append(
                f"{key}: {_short(old.get(key, '(absent)'))} -> {_short(new.get(key, '(absent)'))}"
            )
    return lines


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Delta:
    """Change of each metric against a previous run, over the queries both share."""

    previous: Mapping[str, Any]
    changes: dict[str, PairedComparison]
    differences: list[str]
    corpus_changed: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "previous_timestamp": self.previous.get("timestamp"),
            "metrics": {m: c.to_json() for m, c in self.changes.items()},
            "fingerprint_differences": self.differences,
            "corpus_changed": self.corpus_changed,
        }


def compare(previous: Mapping[str, Any], record: Mapping[str, Any], *, seed: int) -> Delta | None:
    """Paired comparison of ``record`` against ``previous`` on their common queries."""
    try:
        old_index = {k: i for i, k in enumerate(previous["queries"])}
        old_values = previous["per_query"]
    except (KeyError, TypeError):
        return None
    shared = [(i, old_index[k]) for i, k in enumerate(record["queries"]) if k in old_index]
    changes = {}
    for metric in METRIC_NAMES:
        if metric not in old_values:
            continue
        new = [record["per_query"][metric][i] for i, _ in shared]
        old = [old_values[metric][j] for _, j in shared]
        changes[metric] = paired_test(new, old, seed=seed)
    return Delta(
        previous,
        changes,
        fingerprint_diff(previous.get("fingerprint", {}), record["fingerprint"]),
        previous.get("corpus") != record["corpus"],
    )


@dataclass(frozen=True)
class VariantRun:
    """One variant's eval: its outcomes, summary, history record and change since the
    previous comparable run (None when there is none, or with ``--no-history``)."""

    variant: Variant
    outcomes: Outcomes
    summary: Mapping[str, Estimate]
    record: dict[str, Any]
    delta: Delta | None


def record_run(
    session: EvalSession,
    variant: Variant,
    outcomes: Outcomes,
    *,
    kb: Path,
    limit: int,
    seed: int,
    keep: bool,
    warn: Warn,
) -> VariantRun:
    """Summarise a variant's outcomes and, when ``keep``, append the run to ``kb``'s history
    and compare it with the previous run of the same variant on the same golden file."""
    from groove_core.evaluation.session import summarize

    summary = summarize(outcomes, seed)
    fp = fingerprint(
        variant.config,
        session.searcher(variant.config).plugins,
        session.embedder.identity,
        session.golden,
        stage=variant.stage,
        limit=limit,
        schema_version=session.app.backend.schema_version,
        variant=variant.name,
    )
    record = run_record(
        kb=kb,
        golden=session.golden,
        fp=fp,
        corpus=corpus_state(session.app.store),
        outcomes=outcomes,
        summary={m: e.to_json() for m, e in summary.items()},
    )
    delta = None
    if keep:
        runs = append_run(history_path(kb, variant.config, warn), record, warn)
        previous = previous_run(runs, record)
        if previous is not None:
            delta = compare(previous, record, seed=seed)
    return VariantRun(variant, outcomes, summary, record, delta)
