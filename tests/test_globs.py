"""Path globs: linear-time matching, the same meaning as before, clear errors when malformed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from groove_core.cli import build_cli
from groove_core.filters import GlobError, compile_glob, path_matches
from groove_core.testing import make_kb, open_kb


def _old_glob_regex(pattern: str) -> re.Pattern[str]:
    """The regex translation globs used before (backtracking): the oracle for their meaning."""
    pattern = pattern.strip().lstrip("/")
    if pattern.startswith("./"):
        pattern = pattern[2:]
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            close = pattern.find("]", i + 1)
            if close == -1:
                out.append(re.escape(ch))
                i += 1
            else:
                out.append(f"[{pattern[i + 1 : close]}]")
                i = close + 1
        else:
            out.append(re.escape(ch))
            i += 1
    body = "".join(out)
    if "/" not in pattern.rstrip("/"):
        body = f"(?:.*/)?{body}"
    if not any(c in pattern for c in "*?["):
        body = f"{body.rstrip('/')}(?:/.*)?"
    return re.compile(body, re.DOTALL)


PATHOLOGICAL = "**?" * 12 + "X"


_TIMER = """
import json, sys, time
from groove_core.filters import path_matches
out = []
for pattern, path in json.loads(sys.stdin.read()):
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        path_matches(pattern, path)
        best = min(best, time.perf_counter() - started)
    out.append(best)
print(json.dumps(out))
"""


def _match_seconds(*pairs: tuple[str, str]) -> list[float]:
    """Seconds each (glob, path) match takes, timed in a child process: a backtracking
    match holds the GIL, so only a process can be stopped when it runs away."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _TIMER],
            input=json.dumps(pairs),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"matching {pairs!r} ran for over 60 s") from None
    return [float(x) for x in json.loads(done.stdout)]


def test_a_pathological_glob_matches_in_linear_time() -> None:
    path = "a/" * 200 + "b" * 400  # 800 characters, no X: every way of matching fails
    assert len(PATHOLOGICAL) == 37
    hostile, plain = _match_seconds((PATHOLOGICAL, path), ("**/*.md", path))
    # The hostile pattern costs a small multiple of a plain one (both are linear).
    assert hostile < max(plain, 0.0005) * 100, (hostile, plain)
    assert not path_matches(PATHOLOGICAL, path)
    assert path_matches(PATHOLOGICAL, path + "X")


def test_cost_grows_linearly_with_the_path() -> None:
    short, long = _match_seconds((PATHOLOGICAL, "ab/" * 500), (PATHOLOGICAL, "cd/" * 5000))
    assert long < max(short, 0.0005) * 40, (short, long)  # ten times the path


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("[z-a]", "runs backwards"),
        ("[]", "empty character class"),
        ("[!]", "empty character class"),
        ("docs/[^]/x.md", "empty character class"),
    ],
)
def test_a_malformed_glob_is_a_clear_error(pattern: str, problem: str) -> None:
    with pytest.raises(GlobError, match=re.escape(problem)) as caught:
        compile_glob(pattern)
    assert repr(pattern) in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_classes_ranges_and_negation() -> None:
    assert path_matches("notes/[a-c]?.md", "notes/b1.md")
    assert not path_matches("notes/[a-c]?.md", "notes/d1.md")
    assert path_matches("notes/[!a-c]1.md", "notes/d1.md")
    assert path_matches("notes/[^a-c]1.md", "notes/d1.md")
    assert path_matches("[[]draft].md", "x/[draft].md")
    assert path_matches("a[b.md", "a[b.md")  # an unclosed [ is a literal
    # A class is one character of a segment, like ? : it never matches the separator.
    assert not path_matches("a[!x]b", "a/b")
    assert not path_matches("a[/]b", "a/b")


# Small benign patterns over a tiny alphabet, so that the old regex cannot blow up and
# most generated paths come near a match.
_PIECES = ["a", "b", ".", "/", "*", "**", "**/", "?", "[ab]", "[a-c]", "md"]
_patterns = st.lists(st.sampled_from(_PIECES), min_size=0, max_size=6).map("".join)
_paths = st.lists(st.sampled_from(["a", "b", "c", "/", ".", "md"]), max_size=10).map("".join)


@settings(max_examples=600, deadline=None)
@given(pattern=_patterns, path=_paths)
def test_same_meaning_as_the_old_regex(pattern: str, path: str) -> None:
    expected = _old_glob_regex(pattern).fullmatch(path) is not None
    assert path_matches(pattern, path) == expected


def test_search_with_a_malformed_path_is_a_usage_error(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha text\n"})
    open_kb(kb).close()
    result = CliRunner().invoke(
        build_cli(None), ["search", "alpha", "--kb", str(kb), "--path", "[z-a]"]
    )
    assert result.exit_code == 2, result.output
    assert "[z-a]" in result.output and "runs backwards" in result.output
    assert "Traceback" not in result.output


def test_mcp_search_with_a_malformed_path_is_a_tool_error(tmp_path: Path) -> None:
    import asyncio

    from mcp import Client

    from groove_core.mcp.server import build_mcp_server

    app = open_kb(make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha text\n"}))

    async def call() -> tuple[bool, str]:
        async with Client(build_mcp_server(app)) as client:
            result = await client.call_tool("search", {"query": "alpha", "path": "notes/[!]/*.md"})
            return result.is_error, "".join(getattr(c, "text", "") for c in result.content)

    is_error, text = asyncio.run(call())
    assert is_error
    assert "empty character class" in text and "Traceback" not in text


def test_a_pathological_path_filter_does_not_stall_a_search(tmp_path: Path) -> None:
    files = {f"{'deep/' * 20}n{i}.md": f"# N{i}\n\nalpha {i}\n" for i in range(30)}
    kb = make_kb(tmp_path / "kb", files)
    open_kb(kb).close()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    args = ["search", "alpha", "--kb", str(kb), "--json", "--path", PATHOLOGICAL]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "groove_core", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("a search with a hostile path glob ran for over 60 s") from None
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"] == []


def test_wide_classes_cost_neither_memory_nor_time() -> None:
    # A range up to U+10FFFF was once expanded into a set of a million one-character strings
    # (150 MB, 0.7 s per class): 40 characters of glob took a gigabyte and 8 s over MCP.
    import tracemalloc

    hostile = "[ -\U0010ffff]" * 200  # 1,000 characters, within the MCP argument bound
    tracemalloc.start()
    glob = compile_glob.__wrapped__(hostile)
    assert not glob.matches("x" * 199)
    assert glob.matches("x" * 200)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20_000_000, f"{peak / 1e6:.0f} MB"
    assert compile_glob("[!a-c]x").matches("dx") and not compile_glob("[!a-c]x").matches("bx")
