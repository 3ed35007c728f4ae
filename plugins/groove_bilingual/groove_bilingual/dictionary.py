"""JMdict as the bilingual leg reads it: a small derived SQLite table in the user cache.

The source is the jamdict-data package's SQLite database (JMdict, EDRDG, CC BY-SA 4.0):
325 MB with every field of every entry, shipped xz-compressed. At first use (never at
import) it is converted once, with progress on stderr, into a file of two tables:

* ``en(word, headword, term, weight)``: an English gloss, cut into word-leg tokens
  (``groove_core.words.tokens``: stemmed, stop words out; ``to embed`` is ``embed``) ->
  a Japanese headword and the word-leg term that finds it (its tokens, space-separated:
  ``コンポーネント`` -> ``コン ンポ ポー ーネ ネン ント``), with the entry's weight;
* ``ja(form, word, weight)``: the other way, a written form (kanji or kana) -> an English
  gloss as a word-leg term, for a Japanese query over English notes.

A weight (0-1] is the product of: the entry's JMdict priority (a ``news1``/``ichi1``/
``spec1``... tag on the form: 1, else :data:`UNCOMMON`), the sense's position in its entry
(``1/sqrt(n)``: the tenth sense of ``run`` says little of it; for a katakana headword
:data:`LOANWORD` instead), and the form's position among the entry's forms (technical
Japanese writes borrowed English terms in katakana: ``component`` -> ``コンポーネント`` rather than
``構成要素``). The KB's own document frequencies are applied at query time.

Placed, named, checked and rebuilt as groove's other derived caches
(``groove_core.model_cache``): under ``$GROOVE_CACHE_DIR`` (else the user cache folder),
named after this format, the word segmentation and the source file's name, size and
modification time; written to a temporary file and renamed into place; checked on open
(its meta row, row counts, SQLite's ``quick_check``), and rebuilt when any check fails.
"""

from __future__ import annotations

import contextlib
import importlib.util
import lzma
import math
import os
import re
import shutil
import sqlite3
import stat
import sys
import tempfile
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from groove_core import words
from groove_core.config import ConfigError
from groove_core.model_cache import cache_root
from groove_core.query import normalize

#: The derived table's format: change it with any change to what :func:`convert` writes.
FORMAT = 5
#: The weight of a form without a JMdict priority tag.
UNCOMMON = 0.5
#: The factor of a katakana headword (a loanword, as technical Japanese writes them).
LOANWORD = 1.5
#: The factor of a form after the entry's first one (a variant spelling).
VARIANT = 0.7
#: Headwords kept per English word (best first), and English words per Japanese form.
PER_WORD = 16
PER_FORM = 6
#: An English gloss of more tokens than this is no query word's translation.
MAX_GLOSS_TOKENS = 3

#: Form information marking spellings a text is unlikely to use.
_RARE_FORMS = frozenset(
    {
        "ateji (phonetic) reading",
        "irregular okurigana usage",
        "word containing irregular kana usage",
        "word containing irregular kanji usage",
        "word containing out-dated kanji",
        "rarely-used kanji form",
        "search-only kanji form",
        "search-only kana form",
        "out-dated or obsolete kana usage",
    }
)
_KATAKANA = re.compile("[\u30a1-\u30fa\u30fc-\u30ff]+")
_BRACKETS = re.compile(r"\([^()]*\)")
#: A gloss's placeholders for a verb's object or subject (``way to use something``, ``to
#: lose one's temper``): no query writes them.
_PLACEHOLDERS = re.compile(
    r"\b(?:some(?:thing|one|body)(?:'s)?|oneself|one's|one another)\b", re.IGNORECASE
)
_SOURCE_NAME = "jamdict.db"

Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"groove-bilingual: {message}", file=sys.stderr, flush=True)


def source_path(configured: str | None = None) -> Path:
    """The JMdict database to convert: ``configured``, else the one jamdict-data installed
    (``jamdict.db``, or ``jamdict.db.xz`` where it was left compressed). The package is
    located without importing it."""
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise ConfigError(f"[search.bilingual] dictionary: no file {path}")
        return path
    spec = importlib.util.find_spec("jamdict_data")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        for name in (_SOURCE_NAME, _SOURCE_NAME + ".xz"):
            if (Path(folder) / name).is_file():
                return Path(folder) / name
    raise ConfigError(
        "the bilingual leg needs JMdict: pip install jamdict-data (or set "
        "[search.bilingual] dictionary to a jamdict.db), or turn it off with "
        "[search.bilingual] enabled = false"
    )


def cache_file(source: Path, root: Path | None = None) -> Path:
    """Where the derived table of ``source`` lives: its name changes with the source file,
    this format and the word segmentation."""
    info = source.stat()
    stamp = zlib.crc32(f"{source.resolve()}|{info.st_size}|{info.st_mtime_ns}".encode())
    name = f"jmdict-en-f{FORMAT}-w{words.SEGMENTATION}-{stamp:08x}.sqlite"
    return (root or cache_root()) / name


class DictionaryError(Exception):
    """The derived table is missing or fails a check."""


# ---------- conversion ----------


def _tokens(text: str) -> list[str]:
    return words.tokens(normalize(text).lower(), drop_stop_words=True)


def _form_weight(prioritized: bool, position: int) -> float:
    """A form's part of its weight: its priority (1, else UNCOMMON) and its position among
    its entry's forms (a variant spelling: VARIANT)."""
    return (1.0 if prioritized else UNCOMMON) * (VARIANT if position else 1.0)


def _noun_of(form: str, known: dict[str, bool]) -> str | None:
    """The noun a ``-的`` adjective is made of, where the dictionary has it as a word of its
    own (基礎的 "basic" -> 基礎, which JMdict glosses only "foundation; basis"; 目的 is no
    目 + 的: a one-character stem is none), else None."""
    stem = form[:-1]
    return stem if form.endswith("的") and len(stem) >= 2 and stem in known else None


def gloss_key(gloss: str) -> str | None:
    """A gloss as an English query's word-leg tokens (``to embed`` -> ``embed``, brackets
    out), or None when it has none or more than :data:`MAX_GLOSS_TOKENS`."""
    text = _BRACKETS.sub(" ", gloss)
    if text.lower().startswith("to "):
        text = text[3:]
    # a gloss that is all placeholder (``something``) keeps it
    found = _tokens(_PLACEHOLDERS.sub(" ", text)) or _tokens(text)
    if not found or len(found) > MAX_GLOSS_TOKENS:
        return None
    return " ".join(found)


def form_term(form: str) -> str | None:
    """The word-leg term that finds ``form`` in a note (its tokens side by side), or None
    when the word leg has no token for it (a word written in hiragana)."""
    found = words.tokens(normalize(form))
    return " ".join(found) if found else None


def _unpacked(source: Path, folder: Path, progress: Progress) -> tuple[Path, bool]:
    """``source`` as a SQLite file (unpacked into ``folder`` when it is the .xz), and
    whether that file is a temporary one."""
    if source.suffix != ".xz":
        return source, False
    fd, name = tempfile.mkstemp(prefix=".tmp-jmdict-source-", dir=folder)
    total = source.stat().st_size
    progress(f"unpacking {source.name} ({total / 1e6:.0f} MB)")
    with os.fdopen(fd, "wb") as out, open(source, "rb") as raw, lzma.open(raw) as packed:
        shown = 0
        while chunk := packed.read(1 << 22):
            out.write(chunk)
            done = raw.tell() * 100 // total
            if done >= shown + 25:
                shown = done - done % 25
                progress(f"unpacking {shown}%")
    return Path(name), True


def _read(
    db: sqlite3.Connection, progress: Progress
) -> tuple[dict[str, dict[tuple[str, str], float]], dict[str, dict[str, float]]]:
    """(English word -> {(headword, term): weight}, form -> {English word: weight})."""
    # forms per entry: (text, priority, position), the rarely-used spellings out
    forms: dict[int, list[tuple[str, bool, int]]] = defaultdict(list)
    readings: dict[int, list[tuple[str, bool, int]]] = defaultdict(list)
    for table, info, prio, into in (
        ("Kanji", "KJI", "KJP", forms),
        ("Kana", "KNI", "KNP", readings),
    ):
        rows = db.execute(
            f"SELECT f.idseq, f.text, EXISTS (SELECT 1 FROM {prio} p WHERE p.kid = f.ID), "
            f"(SELECT group_concat(i.text, '|') FROM {info} i WHERE i.kid = f.ID) "
            f"FROM {table} f ORDER BY f.ID"
        )
        for idseq, text, prioritized, notes in rows:
            if notes and set(notes.split("|")) & _RARE_FORMS:
                continue
            into[idseq].append((text, bool(prioritized), len(into[idseq])))
    known: dict[str, bool] = {}
    for into in (forms, readings):
        for found in into.values():
            for text, prioritized, _ in found:
                known[text] = known.get(text, False) or prioritized
    progress("read the headwords")
    total = db.execute("SELECT count(*) FROM SenseGloss WHERE lang = 'eng'").fetchone()[0]
    en: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    ja: dict[str, dict[str, float]] = defaultdict(dict)
    ordinal: dict[int, int] = {}
    last_sense: dict[int, int] = {}
    rows = db.execute(
        "SELECT s.idseq, s.ID, g.text FROM SenseGloss g JOIN Sense s ON s.ID = g.sid "
        "WHERE g.lang = 'eng' ORDER BY s.idseq, s.ID"
    )
    shown = 0
    for done, (idseq, sid, gloss) in enumerate(rows, 1):
        if done * 100 // max(total, 1) >= shown + 20:
            shown += 20
            progress(f"converting the glosses {shown}%")
        if last_sense.get(idseq) != sid:
            last_sense[idseq] = sid
            ordinal[idseq] = ordinal.get(idseq, 0) + 1
        key = gloss_key(gloss or "")
        if key is None:
            continue
        sense = 1 / math.sqrt(ordinal[idseq])
        written = forms.get(idseq) or []
        spoken = readings.get(idseq) or []
        # The headwords a note writes: the kanji forms, or the kana of a kana-only word.
        heads = written or spoken
        for text, prioritized, position in heads:
            # a loanword's senses are the borrowed word's: its position says little
            weight = _form_weight(prioritized, position) * (
                LOANWORD if _KATAKANA.fullmatch(text) else sense
            )
            term = form_term(text)
            if term is not None:
                pair = (text, term)
                en[key][pair] = max(en[key].get(pair, 0.0), weight)
            stem = _noun_of(text, known)
            if stem is not None and (term := form_term(stem)) is not None:
                # notes write the noun where the dictionary glosses the adjective: weighed
                # as the adjective's sense, by the noun's own priority tags
                own = _form_weight(known[stem], position) * sense
                en[key][(stem, term)] = max(en[key].get((stem, term), 0.0), own)
        # A Japanese query writes the kanji forms, or katakana (a reading in hiragana of a
        # word with kanji forms would match inside other words' kana).
        kana = [f for f in spoken if not written or _KATAKANA.fullmatch(f[0])]
        for text, prioritized, position in [*written, *kana]:
            weight = sense * _form_weight(prioritized, position)
            ja[normalize(text)][key] = max(ja[normalize(text)].get(key, 0.0), weight)
    return en, ja


def convert(source: Path, target: Path, progress: Progress = _stderr) -> None:
    """Write the derived table of the JMdict database ``source`` to ``target``, atomically
    (a temporary file renamed into place)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    progress(f"converting JMdict ({source}) once, into {target}")
    db_path, temporary = _unpacked(source, target.parent, progress)
    fd, tmp_name = tempfile.mkstemp(prefix=f".tmp-{target.name}-", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            en, ja = _read(db, progress)
        finally:
            db.close()
        out = sqlite3.connect(tmp)
        try:
            _write(out, en, ja, source)
        finally:
            out.close()
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        if temporary:
            db_path.unlink(missing_ok=True)
    size = target.stat().st_size / 1e6
    progress(f"JMdict converted in {time.perf_counter() - started:.1f} s ({size:.1f} MB)")


def _write(
    out: sqlite3.Connection,
    en: dict[str, dict[tuple[str, str], float]],
    ja: dict[str, dict[str, float]],
    source: Path,
) -> None:
    out.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE en (word TEXT NOT NULL, headword TEXT NOT NULL, term TEXT NOT NULL, "
        "weight REAL NOT NULL, PRIMARY KEY (word, headword)) WITHOUT ROWID;"
        "CREATE TABLE ja (form TEXT NOT NULL, word TEXT NOT NULL, weight REAL NOT NULL, "
        "PRIMARY KEY (form, word)) WITHOUT ROWID;"
    )
    en_rows: list[tuple[str, str, str, float]] = []
    for key, pairs in en.items():
        best = sorted(pairs.items(), key=lambda item: (-item[1], item[0]))[:PER_WORD]
        en_rows.extend((key, head, term, round(w, 4)) for (head, term), w in best)
    ja_rows: list[tuple[str, str, float]] = []
    for form, glosses in ja.items():
        best_ja = sorted(glosses.items(), key=lambda item: (-item[1], item[0]))[:PER_FORM]
        ja_rows.extend((form, key, round(w, 4)) for key, w in best_ja)
    out.executemany("INSERT INTO en VALUES (?, ?, ?, ?)", en_rows)
    out.executemany("INSERT INTO ja VALUES (?, ?, ?)", ja_rows)
    meta = {
        "format": str(FORMAT),
        "segmentation": words.SEGMENTATION,
        "source": source.name,
        "en_rows": str(len(en_rows)),
        "ja_rows": str(len(ja_rows)),
        "licence": "JMdict (EDRDG), CC BY-SA 4.0, https://www.edrdg.org/edrdg/licence.html",
    }
    out.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
    out.commit()


# ---------- reading ----------


def _check_private(path: Path) -> None:
    if not hasattr(os, "getuid"):
        return
    info = path.stat()
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(
            f"the JMdict cache {path} is not this user's alone (owner or permissions): "
            "remove it, or set GROOVE_CACHE_DIR to a private folder"
        )


def check(path: Path) -> None:
    """DictionaryError unless ``path`` is a complete derived table of this format."""
    if not path.is_file():
        raise DictionaryError("no cache")
    _check_private(path)
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if db.execute("PRAGMA quick_check").fetchone() != ("ok",):
                raise DictionaryError("it fails SQLite's quick_check")
            meta = dict(db.execute("SELECT key, value FROM meta"))
            if meta.get("format") != str(FORMAT):
                raise DictionaryError(f"format {meta.get('format')}, not {FORMAT}")
            for table in ("en", "ja"):
                count = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                if str(count) != meta.get(f"{table}_rows"):
                    raise DictionaryError(f"{table} holds {count} rows, not {meta.get(table)}")
        finally:
            db.close()
    except sqlite3.Error as err:
        raise DictionaryError(f"{type(err).__name__}: {err}") from None


#: Forms looked up in one statement (under SQLite's oldest limit on parameters, 999).
LOOKUP_BATCH = 500


class Dictionary:
    """The derived table, read-only, one connection per thread (searches run on several)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        return db

    def english(self, keys: Iterable[str]) -> dict[str, list[tuple[str, str, float]]]:
        """English word-leg key -> [(headword, term, weight)], best first; only found keys."""
        out: dict[str, list[tuple[str, str, float]]] = {}
        for key in dict.fromkeys(keys):
            rows = self._db().execute(
                "SELECT headword, term, weight FROM en WHERE word = ? "
                "ORDER BY weight DESC, headword",
                (key,),
            )
            found = [(str(h), str(t), float(w)) for h, t, w in rows]
            if found:
                out[key] = found
        return out

    def japanese(self, forms: Iterable[str]) -> dict[str, list[tuple[str, float]]]:
        """Japanese form -> [(English word-leg term, weight)], best first; found forms only,
        in the order given. Looked up LOOKUP_BATCH forms a statement: a long Japanese query
        has tens of thousands of candidate forms."""
        wanted = list(dict.fromkeys(forms))
        found: dict[str, list[tuple[str, float]]] = {}
        for start in range(0, len(wanted), LOOKUP_BATCH):
            batch = wanted[start : start + LOOKUP_BATCH]
            rows = self._db().execute(
                f"SELECT form, word, weight FROM ja WHERE form IN ({','.join('?' * len(batch))}) "
                "ORDER BY form, weight DESC, word",
                batch,
            )
            for form, word, weight in rows:
                found.setdefault(str(form), []).append((str(word), float(weight)))
        return {form: found[form] for form in wanted if form in found}


_lock = threading.Lock()
_opened: dict[Path, Dictionary] = {}
_by_setting: dict[tuple[str | None, Path | None], Dictionary] = {}


def open_dictionary(
    configured: str | None = None, root: Path | None = None, progress: Progress = _stderr
) -> Dictionary:
    """The derived table for the configured (or installed) JMdict: checked once per
    process, converted first when missing, rebuilt when it fails a check. Later calls for
    the same setting return it at once (locating the package and reading the source
    file's size took 0.4 ms a query)."""
    key = (configured, root)
    found = _by_setting.get(key)
    if found is not None:
        return found
    source = source_path(configured)
    try:
        target = cache_file(source, root)
    except (OSError, RuntimeError) as err:
        raise ConfigError(f"the bilingual leg has no cache folder for JMdict: {err}") from None
    with _lock:
        found = _opened.get(target)
        if found is not None:
            _by_setting[key] = found
            return found
        try:
            check(target)
        except DictionaryError as err:
            if target.exists():
                progress(f"rebuilding the JMdict cache {target}: {err}")
                with contextlib.suppress(OSError):
                    target.unlink()
            try:
                convert(source, target, progress)
                _remove_stale(target)
                check(target)
            except (OSError, sqlite3.Error, DictionaryError) as err2:
                raise ConfigError(
                    f"the JMdict cache {target} could not be written: {err2}"
                ) from None
        found = _opened[target] = _by_setting[key] = Dictionary(target)
        return found


def _remove_stale(current: Path) -> None:
    """Other derived tables beside ``current`` (an older source or format): removed."""
    for entry in current.parent.glob("jmdict-en-f*.sqlite"):
        if entry != current:
            with contextlib.suppress(OSError):
                entry.unlink()
    for entry in current.parent.glob(".tmp-jmdict-*"):
        with contextlib.suppress(OSError):
            if time.time() - entry.stat().st_mtime > 3600:
                entry.unlink() if entry.is_file() else shutil.rmtree(entry)


def forget() -> None:
    """Drop this process's opened tables (tests)."""
    with _lock:
        _opened.clear()
        _by_setting.clear()
