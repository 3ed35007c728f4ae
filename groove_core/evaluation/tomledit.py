"""Set a few numeric keys of one table in groove.toml, leaving every other byte alone.

tomllib only reads. A general TOML writer would re-serialise the whole file and lose the
user's comments and layout, so ``groove tune --write`` edits lines instead: it rewrites
the ``key = value`` lines of ``[search.fusion]`` (keeping a trailing comment), adds the
missing keys under the header, or appends the table. Layouts it cannot edit safely
(the table written inline or with dotted keys elsewhere) are refused with a clear error.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groove_core.errors import GrooveError

if TYPE_CHECKING:
    from groove_core.evaluation.tune import TuneReport


class TomlEditError(GrooveError, ValueError):
    """The file cannot be edited safely; the message says what to do by hand."""


def _header_re(table: str) -> re.Pattern[str]:
    parts = r"\s*\.\s*".join(re.escape(p) for p in table.split("."))
    return re.compile(rf"^\s*\[\s*{parts}\s*\]\s*(#.*)?$")


_ANY_HEADER = re.compile(r"^\s*\[")


def _lookup(data: Mapping[str, Any], table: str) -> Any:
    node: Any = data
    for part in table.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _format(value: float) -> str:
    return repr(float(value))


def set_table_values(text: str, table: str, values: Mapping[str, float]) -> str:
    """``text`` with ``[table]`` holding ``values``; raises TomlEditError when unsafe."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise TomlEditError(f"the file is not valid TOML: {err}") from None
    lines = text.splitlines(keepends=True)
    header = _header_re(table)
    start = next((i for i, line in enumerate(lines) if header.match(line)), None)
    if start is None:
        if _lookup(before, table) is not None:
            raise TomlEditError(
                f"[{table}] is written inline or with dotted keys; set it by hand: "
                + ", ".join(f"{k} = {_format(v)}" for k, v in values.items())
            )
        out = _append_table(text, table, values)
    else:
        out = _edit_table(lines, start, values)
    return _checked(out, before, table, values)


def _append_table(text: str, table: str, values: Mapping[str, float]) -> str:
    body = "".join(f"{key} = {_format(v)}\n" for key, v in values.items())
    sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    return f"{text}{sep}[{table}]\n{body}"


#: ``key = value  # comment`` (groups: indent, key, ``=`` with its blanks, value, comment,
#: line end). The value's blanks are taken only before more of it, possessively: a lazy
#: value beside ``\s*`` before the comment was quadratic in a line's blanks.
_KEY_LINE = re.compile(
    r"^(\s*)([A-Za-z0-9_-]+)(\s*=\s*+)((?:[^#\s]|[^\S\r\n]++(?=[^#\s]))*+)"
    r"(\s*#[^\r\n]*+)?[^\S\r\n]*(\r?\n)?$"
)


def _edit_table(lines: list[str], start: int, values: Mapping[str, float]) -> str:
    end = next((i for i in range(start + 1, len(lines)) if _ANY_HEADER.match(lines[i])), len(lines))
    pending = dict(values)
    last_key_line = start
    for i in range(start + 1, end):
        match = _KEY_LINE.match(lines[i])
        if not match:
            continue
        last_key_line = i
        key = match.group(2)
        if key in pending:
            indent, _, eq, _, comment, newline = match.groups()
            lines[i] = f"{indent}{key}{eq}{_format(pending.pop(key))}{comment or ''}{newline or ''}"
    if pending:
        if not lines[last_key_line].endswith("\n"):
            lines[last_key_line] += "\n"
        added = "".join(f"{key} = {_format(v)}\n" for key, v in pending.items())
        lines.insert(last_key_line + 1, added)
    return "".join(lines)


def _checked(out: str, before: Mapping[str, Any], table: str, values: Mapping[str, float]) -> str:
    """Re-read the result: the table must hold the values and nothing else may change."""
    try:
        after = tomllib.loads(out)
    except tomllib.TOMLDecodeError as err:
        raise TomlEditError(
            f"editing [{table}] would break the file ({err}); edit it by hand"
        ) from None
    got = _lookup(after, table) or {}
    if any(got.get(k) != float(v) for k, v in values.items()):
        raise TomlEditError(f"could not set the values of [{table}]; edit it by hand")
    expected_other = _without(before, table)
    if _without(after, table) != expected_other:
        raise TomlEditError(f"editing [{table}] would change other settings; edit it by hand")
    return out


def _without(data: Mapping[str, Any], table: str) -> dict[str, Any]:
    """A copy of ``data`` with ``table`` removed (and parents left empty dropped)."""
    head, _, rest = table.partition(".")
    out = dict(data)
    if head not in out:
        return out
    if not rest:
        del out[head]
        return out
    child = out[head]
    if isinstance(child, Mapping):
        pruned = _without(child, rest)
        if pruned:
            out[head] = pruned
        else:
            del out[head]
    return out


def write_tuned(
    tuned: TuneReport,
    kb: Path,
    config_path: Path | None,
    warn: Callable[[str], None],
    terms_leg: str | None,
) -> Path | None:
    """``groove tune --write``: put the winner in ``[search.fusion]`` of the KB's
    groove.toml (or ``config_path``) when it is a real gain; returns the file written.
    The ``word`` knob is written as the weight of ``terms_leg`` (the lexical leg that
    reports the query's terms).

    The file is replaced whole (temp file + rename) and must still be a valid
    configuration afterwards (a ConfigError says why not)."""
    from groove_core.config import CONFIG_FILENAME, load_config

    if not tuned.to_json()["recommend"]:
        warn("not writing groove.toml: no setting beats the current one beyond noise")
        return None
    path = config_path or kb / CONFIG_FILENAME
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    updated = set_table_values(text, "search.fusion", tuned.best.fusion_values())
    if terms_leg is not None and tuned.best.word != tuned.current.word:
        updated = set_table_values(updated, "search.fusion.weights", {terms_leg: tuned.best.word})
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(updated, encoding="utf-8")
    tmp.replace(path)
    load_config(kb, path)  # the edited file must still be a valid configuration
    return path
