"""Path globs: the ``path`` search filter, ``.grooveignore`` and ``[index]`` include/exclude.

Path globs come from untrusted places (an MCP client's ``path``, ``.grooveignore``), so they
are never turned into a backtracking regex: a 37-character glob such as ``"**?" * 12 + "X"``
kept Python's ``re`` busy for minutes while holding the GIL. A glob is compiled to a small
NFA instead and simulated with a set of states (a bit mask), which costs at most
``len(path) * len(pattern)`` steps whatever the pattern. Transitions are memoised, so
matching the same glob against many paths costs about one dict lookup per character.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from groove_core.query import QueryError

#: Memoised transitions kept per compiled glob; past this the memo starts over, so a
#: hostile stream of paths cannot grow it without bound.
_MAX_MEMO = 4096


class GlobError(QueryError):
    """A malformed glob; the message names the pattern and what is wrong with it.

    A :class:`QueryError` (a ``ValueError``), so the CLI and the MCP server report it as a
    bad request, like any other problem with what was asked.
    """


@dataclass(frozen=True)
class _Token:
    """One NFA state: what it consumes, and where it may move without consuming.

    ``kind`` is ``lit`` (the character ``chars``), ``any`` (one character but ``/``),
    ``class`` (one character in ``ranges`` of code points, or not in them when ``negated``;
    never ``/``),
    ``star`` (stays on any character but ``/``, or on any at all when ``slash``) or
    ``jump`` (consumes nothing; may skip ``skip`` states ahead: an optional group).
    """

    kind: str
    chars: frozenset[str] = frozenset()
    # (first, last) code points, inclusive. Never the set of characters: a class such as
    # [ -\U0010ffff] would be a million strings (150 MB), and a glob may hold hundreds.
    ranges: tuple[tuple[int, int], ...] = ()
    negated: bool = False
    slash: bool = False
    skip: int = 0

    def consumes(self, ch: str) -> bool:
        if self.kind == "lit":
            return ch in self.chars
        if ch == "/" and not self.slash:
            return False
        if self.kind == "class":
            code = ord(ch)
            return any(lo <= code <= hi for lo, hi in self.ranges) != self.negated
        return self.kind in ("any", "star")


def _optional_any_then(tokens: list[_Token], last: str) -> None:
    """Append ``(?:.*<last>)?`` (``**/`` and the any-folder prefix are this group)."""
    tokens += [_Token("jump", skip=3), _Token("star", slash=True), _Token("lit", frozenset(last))]


def _parse_class(pattern: str, start: int) -> tuple[_Token, int] | None:
    """The class opening at ``pattern[start]`` and the index after it; None if unclosed.

    ``[!...]`` and ``[^...]`` negate (as git's wildmatch does); ``a-z`` is a range;
    everything else, ``\\`` included, stands for itself.
    """
    close = pattern.find("]", start + 1)
    if close == -1:
        return None
    whole = pattern[start : close + 1]
    body = pattern[start + 1 : close]
    negated = body[:1] in ("!", "^")
    if negated:
        body = body[1:]
    if not body:
        raise GlobError(
            f"glob {pattern!r}: {whole} is an empty character class "
            "(to match '[' itself, write [[])"
        )
    ranges = tuple(_class_ranges(pattern, whole, body))
    return _Token("class", ranges=ranges, negated=negated), close + 1


def _class_ranges(pattern: str, whole: str, body: str) -> Iterator[tuple[int, int]]:
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            if low > high:
                raise GlobError(
                    f"glob {pattern!r}: the range {low}-{high} in {whole} runs backwards "
                    f"(write {high}-{low})"
                )
            yield ord(low), ord(high)
            i += 3
        else:
            yield ord(body[i]), ord(body[i])
            i += 1


def _tokens(pattern: str) -> list[_Token]:
    """The body of a glob as NFA states, in order."""
    tokens: list[_Token] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            _optional_any_then(tokens, "/")
            i += 3
        elif pattern.startswith("**", i):
            tokens.append(_Token("star", slash=True))
            i += 2
        elif pattern[i] == "*":
            tokens.append(_Token("star"))
            i += 1
        elif pattern[i] == "?":
            tokens.append(_Token("any"))
            i += 1
        elif pattern[i] == "[" and (parsed := _parse_class(pattern, i)) is not None:
            tokens.append(parsed[0])
            i = parsed[1]
        else:
            tokens.append(_Token("lit", frozenset(pattern[i])))
            i += 1
    return tokens


def _normalise(pattern: str) -> str:
    pattern = pattern.strip().lstrip("/")
    return pattern[2:] if pattern.startswith("./") else pattern


class Glob:
    """A compiled path glob; :meth:`matches` runs in time linear in the path."""

    def __init__(self, pattern: str) -> None:
        clean = _normalise(pattern)
        tokens: list[_Token] = []
        if "/" not in clean.rstrip("/"):
            _optional_any_then(tokens, "/")  # a bare name matches in any folder
        if not any(c in clean for c in "*?["):
            # A plain path names a file or a folder: match it and everything below it.
            tokens += _tokens(clean.rstrip("/"))
            tokens += [_Token("jump", skip=3), _Token("lit", frozenset("/"))]
            tokens.append(_Token("star", slash=True))
        else:
            tokens += _tokens(clean)
        self.pattern = pattern
        self._tokens = tokens
        self._accept = 1 << len(tokens)
        self._memo: dict[tuple[int, str], int] = {}
        self._start = self._closure(1)

    def _closure(self, states: int) -> int:
        """Add every state reachable without consuming; all such moves go forward, so one
        pass in index order is enough."""
        for i, token in enumerate(self._tokens):
            if states >> i & 1:
                if token.kind in ("star", "jump"):
                    states |= 1 << (i + 1)
                if token.kind == "jump":
                    states |= 1 << (i + token.skip)
        return states

    def _step(self, states: int, ch: str) -> int:
        key = (states, ch)
        known = self._memo.get(key)
        if known is not None:
            return known
        following = 0
        for i, token in enumerate(self._tokens):
            if states >> i & 1 and token.consumes(ch):
                following |= 1 << (i if token.kind == "star" else i + 1)
        following = self._closure(following)
        if len(self._memo) >= _MAX_MEMO:
            self._memo.clear()
        self._memo[key] = following
        return following

    def matches(self, path: str) -> bool:
        states = self._start
        for ch in path:
            states = self._step(states, ch)
            if not states:
                return False
        return bool(states & self._accept)


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> Glob:
    """Compile a path glob: ``*`` and ``?`` stay inside one path segment, ``**`` crosses
    segments (``docs/**`` matches everything below ``docs/``), ``[abc]``, ``[a-z]`` and
    ``[!abc]`` are classes of one character (never ``/``).

    A pattern without ``/`` matches the file name in any folder (like .gitignore), so
    ``--path '*.md'`` and ``--path 'guide*'`` do what people expect; a pattern without
    wildcards names a file or a folder (``--path docs/api`` is everything below it).
    Raises :class:`GlobError` for a malformed class (``[]``, ``[!]``, ``[z-a]``).
    """
    return Glob(pattern)


def path_matches(pattern: str, path: str) -> bool:
    return compile_glob(pattern).matches(path)
