"""Every response within the size budget, and nothing left out silently.

Each response is JSON text kept under ``max_response_chars`` characters, so that an agent's
tool-output cap is never blown; whatever does not fit is reported (``truncated``,
``omitted_*``, ``clipped_fields``). Only the standard library: ``groove serve`` reads the
defaults here without loading the MCP SDK.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

DEFAULT_MAX_RESPONSE_CHARS = 40_000
#: Below this even one result's metadata might not fit, so truncation could not be explicit.
MIN_RESPONSE_CHARS = 2_000
#: Each descriptive field of a result (title, heading, heading path, tags, warnings...) gets
#: at most this fraction of the budget, so that no one field can crowd out the content: a
#: file with 300,000 front-matter tags once made a 2.9 MB response against a 40k budget.
FIELD_SHARE = 16


def dumps(obj: Any) -> str:
    """The JSON text a client reads: compact, non-ASCII kept (one character per kana)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def largest(n: int, fits: Callable[[int], bool]) -> int:
    """The largest k in [0, n] with fits(k), for a fits that is true up to some k."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def clip_text(text: str, fits: Callable[[str], bool]) -> str:
    return text[: largest(len(text), lambda k: fits(text[:k]))]


#: The descriptive fields of a search hit that FIELD_SHARE bounds (content has its own rule).
HIT_FIELDS = ("title", "heading", "heading_path", "tags", "expanded_from")
#: The same for a whole search response.
SEARCH_FIELDS = ("warnings", "filter_applied")


def _cap(value: Any, limit: int) -> Any:
    """``value`` within ``limit`` characters of JSON text: a string shortened, a list
    shortened by whole items from its end, each value of a mapping capped alike."""
    if len(dumps(value)) <= limit:
        return value
    if isinstance(value, str):
        return clip_text(value, lambda t: len(dumps(t)) <= limit)
    if isinstance(value, list):
        return value[: largest(len(value), lambda k: len(dumps(value[:k])) <= limit)]
    if isinstance(value, dict):
        return {key: _cap(item, limit) for key, item in value.items()}
    return value


def cap_fields(obj: dict[str, Any], fields: Sequence[str], limit: int) -> dict[str, Any]:
    """``obj`` with each of ``fields`` capped at ``limit`` characters; the names of those
    that were cut are listed in ``clipped_fields``, so that no cut is silent."""
    out = dict(obj)
    clipped = []
    for field in fields:
        value = out.get(field)
        if value is not None and len(dumps(value)) > limit:
            out[field] = _cap(value, limit)
            clipped.append(field)
    if clipped:
        out["clipped_fields"] = clipped
    return out


def clipped_note(count: int, what: str) -> str:
    return (
        f"descriptive fields of {count} {what} were cut short to stay under the response size "
        "budget (see clipped_fields)"
    )


def fit_search(payload: dict[str, Any], budget: int) -> dict[str, Any]:
    """Keep the leading results that fit the budget; cut the first one's content if needed.

    Titles, headings, tags and the other descriptive fields are first capped at a share of
    the budget each, so whatever a file's front matter holds, results still fit.
    """
    share = budget // FIELD_SHARE
    results = [cap_fields(h, HIT_FIELDS, share) for h in payload["results"]]
    capped = cap_fields(payload, SEARCH_FIELDS, share)
    notes = (
        [f"{', '.join(capped.pop('clipped_fields'))} cut short"]
        if "clipped_fields" in capped
        else []
    )
    if clipped := sum("clipped_fields" in h for h in results):
        notes.append(clipped_note(clipped, "results"))
    out = {**capped, "results": results, "truncated": bool(notes)}
    out.update(omitted_results=0, omitted_chars=0)
    if notes:
        out["note"] = "; ".join(notes)
    if len(dumps(out)) <= budget:
        return out

    def shaped(kept: list[dict[str, Any]], chars: int) -> dict[str, Any]:
        omitted = len(results) - len(kept)
        note = (
            f"{omitted} of {len(results)} results and {chars} characters of content were left "
            "out to stay under the response size budget; lower `limit` or read the file with "
            "get_document"
        )
        return {
            **out,
            "results": kept,
            "truncated": True,
            "omitted_results": omitted,
            "omitted_chars": chars,
            "note": "; ".join([note, *notes]),
        }

    def fits(candidate: dict[str, Any]) -> bool:
        return len(dumps(candidate)) <= budget

    k = largest(len(results), lambda k: fits(shaped(results[:k], 0)))
    if k > 0 or not results:
        return shaped(results[:k], 0)
    first = results[0]
    content: str = first["content"]

    def with_content(text: str) -> dict[str, Any]:
        limit = len(text.encode("utf-8"))
        spans = [s for s in first["match_spans"] if s[1] <= limit]
        hit = {**first, "content": text, "match_spans": spans, "content_truncated": True}
        return shaped([hit], len(content) - len(text))

    if not fits(with_content("")):
        return shaped([], 0)  # not even its path fits: say so rather than exceed the budget
    return with_content(clip_text(content, lambda t: fits(with_content(t))))


RELATED_NOTE = (
    "links were left out to stay under the response size budget; the totals say how many there are"
)


def fit_links(
    payload: dict[str, Any], fits: Callable[[dict[str, Any]], bool]
) -> tuple[dict[str, Any], bool]:
    """``payload`` with its ``outgoing`` and ``backlinks`` cut to the largest common length
    that ``fits``; True when something was cut."""
    longest = max(len(payload["outgoing"]), len(payload["backlinks"]))

    def shaped(k: int) -> dict[str, Any]:
        return {
            **payload,
            "outgoing": payload["outgoing"][:k],
            "backlinks": payload["backlinks"][:k],
        }

    k = largest(longest, lambda k: fits(shaped(k)))
    return shaped(k), k < longest


def fit_status(payload: dict[str, Any], budget: int) -> dict[str, Any]:
    """index_status within the budget: the lists of changed files are capped (their counts
    stay complete, so a reader sees how many are not listed)."""
    changes = cap_fields(payload["changes_on_disk"], ("added", "modified", "deleted"), budget // 8)
    clipped = changes.pop("clipped_fields", None)
    out = {**payload, "changes_on_disk": changes, "truncated": bool(clipped)}
    if clipped:
        out["note"] = (
            f"the lists {', '.join(clipped)} were cut to stay under the response size budget; "
            "the *_count fields are complete"
        )
    return out
