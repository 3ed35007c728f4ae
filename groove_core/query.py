"""Query compilation: the user's query string → an FTS5 MATCH expression (docs/query-syntax.md).

The query is never handed to FTS5 as is. It is compiled into quoted phrases joined with
``OR`` (and ``NOT`` for exclusions), so nothing a user types can become FTS5 syntax, and a
natural-language query still finds rows that share only some of its words.

Why script boundaries and a 3-character floor instead of morphological analysis:
``docs/adr/0002-script-boundaries-not-morphological-analysis.md``. Why exclusions are
exposed on their own (``negative_expr``): ``docs/adr/0011-exclusions-agree-across-legs.md``.
The user-facing syntax is described in ``docs/query-syntax.md``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from groove_core.errors import GrooveError

__all__ = [
    "MAX_INPUT_CHARS",
    "MAX_PHRASES",
    "MAX_QUERY_CHARS",
    "MIN_PHRASE_CHARS",
    "ParsedQuery",
    "QueryError",
    "QueryWarning",
    "Rarity",
    "match_expression",
    "most_distinctive",
    "normalize",
    "parse_query",
]

MAX_PHRASES = 32
"""Per-polarity cap. FTS cost is roughly linear in the phrase count (docs/retrieval-
pipeline.md, "Cost notes"), so this is the knob that bounds the worst case; realistic
queries use well under half of it."""

MAX_QUERY_CHARS = 2_000
"""The longest query searched whole, in characters. The embedder sees at most this much of
a longer one (its first characters, cut at a space): every stage after the parser costs time
and memory in proportion to the text it is given (a 3.9 MB query once ran 334 s and peaked
at 22 GB, mostly in the embedder). Most golden queries of the evaluation collections are
under 300 characters; one pasted question is 2,023."""

MAX_INPUT_CHARS = 16_000
"""How much of a query is read at all: its words are drawn from the first this many
characters (after NFKC too), the rest is dropped with a warning. MCP refuses a longer
argument outright (stdio has no body cap in front of it); the CLI and eval cut it."""

MIN_PHRASE_CHARS = 3
"""The trigram tokenizer matches nothing for a phrase under 3 characters."""

_QUOTE = '"'
_EXCLUDE = "-"


class QueryError(GrooveError, ValueError):
    """A query that must not run (e.g. one made only of exclusions)."""


class OptionError(QueryError):
    """A search that must not run because of one of its options or the settings they need
    (a limit out of range, a stage without its model), not of the query's words: messages
    say so instead of calling the query invalid."""


@dataclass(frozen=True)
class QueryWarning:
    """Something the compiler had to leave out; surfaced so that no loss is silent."""

    code: str
    message: str
    dropped: tuple[str, ...]


@dataclass(frozen=True)
class ParsedQuery:
    """A compiled query: what the FTS leg, the vector leg and the later stages each see."""

    text: str
    positives: tuple[str, ...]
    negatives: tuple[str, ...]
    match_expr: str | None
    negative_expr: str | None
    embed_text: str
    fts_skipped: bool
    warnings: tuple[QueryWarning, ...]
    # (text, quoted) of every part of the non-excluded tokens: the word leg segments these
    # itself (its tokens have no 3-character floor; see groove_core.words).
    positive_parts: tuple[tuple[str, bool], ...] = ()
    # A pasted log's group of each of ``positive_parts`` (0 the lines that say what went
    # wrong, 1 its other lines, 2 its frames; see :func:`most_distinctive`); empty for
    # any other query, whose parts are all one group.
    positive_groups: tuple[int, ...] = ()


def normalize(text: str) -> str:
    """NFKC-normalise ``text``; applied to both indexed text and queries.

    Both sides must agree, or a full-width ``ＡＰＩ`` in a note would never match ``API`` in
    a query. Case is kept: the trigram tokenizer already folds case when it compares.
    """
    return unicodedata.normalize("NFKC", text)


# --------------------------------------------------------------------------- scanning


@dataclass(frozen=True)
class _Part:
    """A stretch of one whitespace-delimited token: either quoted (verbatim) or not."""

    text: str
    quoted: bool


@dataclass(frozen=True)
class _Token:
    """A whitespace-delimited token (a quoted phrase may span whitespace inside it)."""

    parts: tuple[_Part, ...]
    negative: bool


def _clean(text: str) -> str:
    """Replace control characters and lone surrogates with spaces.

    NUL and other C0/C1 controls are meaningless in a search and NUL can truncate the
    expression in SQLite's C API; lone surrogates cannot be encoded as UTF-8 at all.
    """
    return "".join(" " if unicodedata.category(ch) in ("Cc", "Cs") else ch for ch in text)


def _read_quoted(text: str, start: int) -> tuple[str, int] | None:
    """Read a ``"..."`` phrase opening at ``start``: (content, index after the close).

    ``""`` inside the phrase is one literal ``"`` (FTS5's own convention). Returns None
    when the quote is never closed; the caller then treats it as punctuation, which keeps
    the rest of the query searchable word by word rather than as one long verbatim phrase.
    """
    chars: list[str] = []
    i = start + 1
    while i < len(text):
        if text[i] != _QUOTE:
            chars.append(text[i])
            i += 1
        elif text[i + 1 : i + 2] == _QUOTE:
            chars.append(_QUOTE)
            i += 2
        else:
            return "".join(chars), i + 1
    return None


def _read_token(text: str, start: int) -> tuple[tuple[_Part, ...], int]:
    """Read one token from ``start`` up to unquoted whitespace: (parts, end index)."""
    parts: list[_Part] = []
    plain: list[str] = []
    i = start
    while i < len(text) and not text[i].isspace():
        quoted = _read_quoted(text, i) if text[i] == _QUOTE else None
        if quoted is None:
            plain.append(text[i])
            i += 1
            continue
        if plain:
            parts.append(_Part("".join(plain), quoted=False))
            plain = []
        parts.append(_Part(quoted[0], quoted=True))
        i = quoted[1]
    if plain:
        parts.append(_Part("".join(plain), quoted=False))
    return tuple(parts), i


def _scan(text: str) -> Iterator[_Token]:
    """Split the cleaned query into tokens, marking ``-token`` and ``-"phrase"`` exclusions.

    A ``-`` counts only at the start of a token and only when something follows it, so a
    hyphen inside a word (``state-of-the-art``) or a lone ``-`` is ordinary punctuation, and
    so is a doubled one: ``--noEmit`` in a pasted command line is an option, not an
    exclusion.
    """
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        negative = (
            text[i] == _EXCLUDE
            and i + 1 < len(text)
            and not text[i + 1].isspace()
            and text[i + 1] != _EXCLUDE
        )
        parts, i = _read_token(text, i + 1 if negative else i)
        yield _Token(parts, negative)


# --------------------------------------------------------------------------- phrases

_KANJI = "kanji"
_LATIN = "latin"
_SCRIPT_PREFIXES = (
    ("CJK ", _KANJI),
    ("IDEOGRAPHIC ", _KANJI),  # 々, 〇, 〆: written and read as part of kanji words
    ("LATIN ", _LATIN),
    ("HIRAGANA ", "hiragana"),
    ("KATAKANA", "katakana"),  # also KATAKANA-HIRAGANA PROLONGED SOUND MARK (ー)
    ("HANGUL ", "hangul"),
)


@lru_cache(maxsize=4096)
def _script(ch: str) -> str | None:
    """The character class a run is made of, or None for a boundary character.

    Letters and digits are word characters; punctuation, symbols, spaces and format
    characters are boundaries. Digits share the Latin class so ``GPT4o`` stays one run.
    Scripts without a special case are keyed by the first word of their Unicode name
    (CYRILLIC, GREEK, ARABIC, ...), which keeps each one a class of its own.
    """
    category = unicodedata.category(ch)
    if category[0] not in "LN":
        return None
    if category == "Nd":
        return _LATIN
    name = unicodedata.name(ch, "")
    for prefix, script in _SCRIPT_PREFIXES:
        if name.startswith(prefix):
            return script
    return name.split(" ", 1)[0] or "other"


def _words(text: str) -> Iterator[list[str]]:
    """Split unquoted text into words (at boundaries), each word into same-script runs.

    A combining mark continues the run it follows (it belongs to the previous letter); a
    mark with nothing to attach to is a boundary.
    """
    runs: list[str] = []
    current: list[str] = []
    current_script: str | None = None
    for ch in text:
        if unicodedata.category(ch)[0] == "M":
            if current:
                current.append(ch)
                continue
            script = None
        else:
            script = _script(ch)
        if script != current_script and current:
            runs.append("".join(current))
            current = []
        if script is None and runs:
            yield runs
            runs = []
        if script is not None:
            current.append(ch)
        current_script = script
    if current:
        runs.append("".join(current))
    if runs:
        yield runs


def _run_phrases(runs: list[str]) -> Iterator[str]:
    """Phrases of one word: long runs alone, short runs joined to neighbours to reach 3.

    A short run absorbs the runs to its right until the joined text reaches 3 characters
    (``再`` + ``ランキング``; ``の`` + ``評価``). Short runs absorbed this way are spent;
    a long run absorbed this way is still a phrase of its own. A short tail that cannot
    reach 3 to its right borrows from its left instead (``システム`` + ``化``); a word that
    cannot reach 3 at all yields nothing.
    """
    i = 0
    while i < len(runs):
        if len(runs[i]) >= MIN_PHRASE_CHARS:
            yield runs[i]
            i += 1
            continue
        end = i + 1
        joined = runs[i]
        while len(joined) < MIN_PHRASE_CHARS and end < len(runs):
            joined += runs[end]
            end += 1
        if len(joined) >= MIN_PHRASE_CHARS:
            yield joined
            # runs[i] is short, so end - 1 > i and this always advances.
            i = end - 1 if len(runs[end - 1]) >= MIN_PHRASE_CHARS else end
            continue
        start = i
        while len(joined) < MIN_PHRASE_CHARS and start > 0:
            start -= 1
            joined = runs[start] + joined
        if len(joined) >= MIN_PHRASE_CHARS:
            yield joined
        return


def _part_phrases(part: _Part) -> Iterator[str]:
    """Phrases of one token part: a quoted part verbatim, a plain part by the run rules.

    A quoted part's floor is measured without its outer spaces, so ``" a "`` (which the
    trimmed query would reduce to ``a``) is dropped like ``"a"``; what is kept stays verbatim.
    """
    if part.quoted:
        if len(part.text.strip()) >= MIN_PHRASE_CHARS:
            yield part.text
        return
    for runs in _words(part.text):
        yield from _run_phrases(runs)


#: A line of a pasted log that locates rather than says: a stack frame (JavaScript, Java,
#: Python, Firefox/Safari, a console's ``fn @ file:line``, Vue's component trace
#: ``at <App>``), a caret line, a bundler's ``Plugin:`` / ``File:`` (and ``_CODE_FRAME``).
_FRAME = re.compile(
    r"""^\s*(?:
        at\s+\S.*(?:\(.*:\d+(?::\d+)?\)|:\d+:\d+|\(native\)|\(<anonymous>\))\s*$
      | at\s+[\w$.<>]+\(.*\)\s*$
      | at\s+<
      | File\s+".*",\s+line\s+\d+
      | \S*@\S+:\d+(?::\d+)?\s*$
      | \S.*\s@\s\S+:\d+(?::\d+)?\s*$
      | \|?\s*\^+[~^]*\s*$
      | (?:Plugin|File|Caused\ by):\s
      | \.\.\.\s*\d+\s+more
    )""",
    re.VERBOSE,
)
#: A code frame's line: indented or marked, a line number and a bar (``  12 |   <div>``); a
#: table row of a pasted Markdown table starts at the margin.
_CODE_FRAME = re.compile(r"^(?:[ \t]+|[ \t]*>[ \t]*)\d+[ \t]*\|")
#: The longest line tried as a frame.
_FRAME_CHARS = 400
#: A line of a pasted log that says what went wrong.
_TELLS = re.compile(
    r"\b(?:\w*Error|\w*Exception|error|warn(?:ing)?|fail(?:ed|ure|s)?|cannot|can't|invalid|"
    r"unexpected|not\s+(?:defined|found|a\s+function|allowed|supported))\b",
    re.IGNORECASE,
)
#: A multi-line query is a pasted log from this many frame lines on (or when it is longer
#: than the embedder reads).
MIN_FRAMES = 2


def _telling_first(text: str) -> list[str]:
    """A pasted log's lines in three groups, the most telling first: the lines that say
    what went wrong (an error, a warning), its other lines, its frames (each group in its
    own order); ``[text]`` for anything else. A stack trace's message (``inject() can only
    be used inside setup()``) is what the user wants explained; its frames and log chatter
    name files, functions and line numbers that are rare in the notes for no reason and
    would take the phrase cap's places and the embedder's characters (issue #42: with the
    message after 2,000 characters of a console dump, no leg found the page)."""
    if "\n" not in text:
        return [text]
    lines = text.splitlines()
    # a frame is a short line; a longer one is never tried (the pattern backtracks)
    frames = [
        len(line) <= _FRAME_CHARS and bool(_FRAME.match(line) or _CODE_FRAME.match(line))
        for line in lines
    ]
    if sum(frames) < MIN_FRAMES and len(text) <= MAX_QUERY_CHARS:
        return [text]
    groups: list[list[str]] = [[], [], []]
    for line, frame in zip(lines, frames, strict=True):
        groups[2 if frame else 0 if _TELLS.search(line) else 1].append(line)
    return ["\n".join(group) for group in groups]


def _dedupe(phrases: Iterable[str]) -> list[str]:
    """Drop repeated phrases, keeping the first occurrence's position."""
    return list(dict.fromkeys(phrases))


def _cap(
    phrases: list[str],
    limit: int,
    kind: str,
    rarity: Rarity | None = None,
    groups: Sequence[int] | None = None,
) -> tuple[tuple[str, ...], QueryWarning | None]:
    """Keep ``limit`` phrases, in query order: the rarest by ``rarity`` when given, else the
    first; with ``groups`` (each phrase's group, a pasted log's: 0 its telling lines, 1 the
    rest, 2 its frames), a lower group's before a higher one's, each group by rarity. Say
    so, with what was dropped, when cutting.

    Rarest, because a long question's first words are rarely its point: on cranfield-en with
    the cap at 6, keeping the phrases fewest chunks hold took the lexical legs' nDCG@10 from
    0.275 to 0.364, and at 12 from 0.360 to 0.384 (paired p <= 0.002; docs/query-syntax.md).
    """
    if len(phrases) <= limit:
        return tuple(phrases), None
    if rarity is None:
        kept, which = phrases[:limit], "the first"
    else:
        keep = most_distinctive(rarity(phrases), limit, groups)
        kept, which = [phrases[i] for i in keep], "the most distinctive"
    chosen = set(kept)
    dropped = tuple(p for p in phrases if p not in chosen)
    warning = QueryWarning(
        code=f"{kind}s_truncated",
        message=(
            f"the query compiled to {len(phrases)} {kind} phrases; only {which} {limit} "
            f"are used and {len(dropped)} were dropped"
        ),
        dropped=dropped,
    )
    return tuple(kept), warning


def most_distinctive(
    counts: Sequence[int | None], limit: int, groups: Sequence[int] | None = None
) -> list[int]:
    """The positions of the ``limit`` most distinctive of a query's phrases or terms, in
    query order, given how many chunks hold each (``counts``): a lower group's before a
    higher one's (``groups``: a pasted log's, as :attr:`ParsedQuery.positive_groups`),
    then the rarest; one the index does not hold (None or 0) last. Both lexical legs cap
    a query this way (the trigram leg's phrases, the word leg's terms)."""
    rank = groups if groups else [0] * len(counts)
    order = sorted(range(len(counts)), key=lambda i: (rank[i], _rank_key(counts[i]), i))
    return sorted(order[:limit])


def _rank_key(count: int | None) -> tuple[int, int]:
    """Rarest first; a phrase the index does not hold (None or 0) last: it can add nothing
    the others do not."""
    return (1, 0) if not count else (0, count)


# --------------------------------------------------------------------------- expressions


def _quote(phrase: str) -> str:
    """An FTS5 string: inside double quotes every operator, column filter or ``*`` is text."""
    return _QUOTE + phrase.replace(_QUOTE, _QUOTE * 2) + _QUOTE


def _or_expr(phrases: Iterable[str]) -> str:
    return " OR ".join(_quote(p) for p in phrases)


def match_expression(positives: Sequence[str], negatives: Sequence[str]) -> str:
    """The MATCH expression of these phrases, as :func:`parse_query` writes it: what the
    SQLite store hands FTS5, and what ``--explain`` shows of a leg that searched with
    fewer phrases than the query has."""
    return _match_expr(tuple(positives), tuple(negatives))


def _match_expr(positives: tuple[str, ...], negatives: tuple[str, ...]) -> str:
    """``"a" OR "b"``, or ``("a" OR "b") NOT ("c")`` with exclusions.

    No column filter, so the NOT is judged on the same row and columns (heading, context,
    content) as the positive match. The parentheses are needed: NOT binds tighter than OR.
    """
    positive = _or_expr(positives)
    if not negatives:
        return positive
    return f"({positive}) NOT ({_or_expr(negatives)})"


# --------------------------------------------------------------------------- entry point


#: How many chunks of the index searched hold each phrase (None when unknown), for keeping
#: the most distinctive phrases of a query that has more than the cap.
Rarity = Callable[[Sequence[str]], Sequence[int | None]]


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _head(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, cut at a space when there is one."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit + 1)
    return text[: cut if cut > 0 else limit].rstrip()


def _shortened(length: int, phrases: int, max_phrases: int) -> QueryWarning:
    words = f"its {max_phrases} most distinctive words" if phrases > max_phrases else "its words"
    read = (
        f"; only its first {MAX_INPUT_CHARS:,} characters were read"
        if length > MAX_INPUT_CHARS
        else ""
    )
    return QueryWarning(
        code="query_shortened",
        message=(
            f"the query is {length:,} characters long{read}: its first {MAX_QUERY_CHARS:,} "
            f"characters are searched by meaning, {words} by text"
        ),
        dropped=(),
    )


def parse_query(
    text: str, *, max_phrases: int = MAX_PHRASES, rarity: Rarity | None = None
) -> ParsedQuery:
    """Compile a user query (docs/query-syntax.md).

    Raises QueryError when the query has exclusions and nothing else, since running it
    would return "everything except X", which is never what a search means. A query longer
    than :data:`MAX_QUERY_CHARS` is searched, not refused: its words come from its first
    :data:`MAX_INPUT_CHARS` characters, the embedder sees its first
    :data:`MAX_QUERY_CHARS`, and a warning says so. Past ``max_phrases`` phrases the
    rarest by ``rarity`` are kept (the first without it).
    """
    if max_phrases < 1:
        raise ValueError(f"max_phrases must be at least 1, got {max_phrases}")
    # NFKC can lengthen text (one ligature becomes up to 18 characters): cut again after it.
    read = normalize(text[:MAX_INPUT_CHARS])[:MAX_INPUT_CHARS]
    groups = [list(_scan(_clean(group))) for group in _telling_first(read)]
    if len(groups) > 1:  # a pasted log: a "-" in it is punctuation, never an exclusion
        groups = [[_Token(t.parts, False) for t in group] for group in groups]
    tokens = [t for group in groups for t in group]
    kept = [t for t in tokens if not t.negative]
    excluded = [t for t in tokens if t.negative]

    # The embedder sees plain words: exclusions removed, phrase quotes removed.
    embed_text = _collapse(" ".join(part.text for t in kept for part in t.parts))
    long = len(text) > MAX_QUERY_CHARS or len(read) > MAX_QUERY_CHARS
    if long:
        embed_text = _head(embed_text, MAX_QUERY_CHARS)
    if excluded and not embed_text:
        raise QueryError(
            "the query only excludes (-word); add at least one word to search for, "
            'or quote the term to search for a literal leading hyphen ("-word")'
        )

    first_seen: dict[str, int] = {}  # phrase -> the group it first occurs in
    for rank, group in enumerate(groups):
        for t in group:
            for part in () if t.negative else t.parts:
                for phrase in _part_phrases(part):
                    first_seen.setdefault(phrase, rank)
    positive_list = list(first_seen)
    negative_list = _dedupe(p for t in excluded for part in t.parts for p in _part_phrases(part))
    fts_skipped = len(embed_text) < MIN_PHRASE_CHARS
    if not positive_list and not fts_skipped:
        positive_list = [embed_text]  # every fragment under 3: search the query verbatim
    positives, positive_warning = _cap(
        positive_list,
        max_phrases,
        "positive",
        rarity,
        list(first_seen.values()) if len(groups) > 1 else None,
    )
    negatives, negative_warning = _cap(negative_list, max_phrases, "negative")
    warnings = [w for w in (positive_warning, negative_warning) if w is not None]
    if long:
        warnings.insert(0, _shortened(len(text), len(positive_list), max_phrases))

    return ParsedQuery(
        text=text,
        positives=positives,
        negatives=negatives,
        match_expr=None if fts_skipped else _match_expr(positives, negatives),
        negative_expr=_or_expr(negatives) if negatives else None,
        embed_text=embed_text,
        fts_skipped=fts_skipped,
        warnings=tuple(warnings),
        positive_parts=tuple((part.text, part.quoted) for t in kept for part in t.parts),
        positive_groups=(
            tuple(
                rank
                for rank, group in enumerate(groups)
                for t in group
                if not t.negative
                for _ in t.parts
            )
            if len(groups) > 1
            else ()
        ),
    )
