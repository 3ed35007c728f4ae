"""A tiny JMdict in jamdict-data's schema (the tables the conversion reads), written per
test: never the 54 MB package."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from groove_bilingual import dictionary

#: (idseq, kanji forms, kana forms, senses: [[gloss, ...], ...], priority tags of the forms)
ENTRIES = [
    (1, ["埋め込む"], ["うめこむ"], [["to embed", "to bury"]], ["ichi1"]),
    (2, [], ["コンポーネント"], [["component"]], []),
    (3, ["構成要素"], ["こうせいようそ"], [["component", "constituent"]], []),
    (4, ["状態"], ["じょうたい"], [["state", "condition"]], ["news1"]),
    (5, ["庭"], ["にわ"], [["garden", "yard"]], ["ichi1"]),
    (6, ["麺麭"], ["パン"], [["ferment"], ["bread"]], []),
    (7, ["算出"], ["さんしゅつ"], [["computation", "calculation"]], ["news1"]),
    (8, ["属性"], ["ぞくせい"], [["property", "attribute"]], ["news1"]),
    (9, [], ["プロパティ"], [["property (programming)"]], []),
    (10, ["宇宙船"], ["うちゅうせん"], [["spaceship"]], []),
    (11, [], ["コース"], [["course", "route"]], ["ichi1"]),
    (12, ["植物園"], ["しょくぶつえん"], [["botanical garden"]], ["news1"]),
    (13, ["基礎"], ["きそ"], [["foundation", "basis"]], ["news1"]),
    (14, ["基礎的"], ["きそてき"], [["basic", "fundamental"]], []),
    (15, ["目的"], ["もくてき"], [["purpose", "goal"]], ["news1"]),
    (16, ["目"], ["め"], [["eye"]], ["news1"]),
]

SCHEMA = """
CREATE TABLE Entry (idseq INTEGER NOT NULL UNIQUE);
CREATE TABLE Kanji (ID INTEGER PRIMARY KEY, idseq INTEGER, text TEXT);
CREATE TABLE KJI (kid INTEGER, text TEXT);
CREATE TABLE KJP (kid INTEGER, text TEXT);
CREATE TABLE Kana (ID INTEGER PRIMARY KEY, idseq INTEGER, text TEXT, nokanji BOOLEAN);
CREATE TABLE KNI (kid INTEGER, text TEXT);
CREATE TABLE KNP (kid INTEGER, text TEXT);
CREATE TABLE Sense (ID INTEGER PRIMARY KEY, idseq INTEGER);
CREATE TABLE SenseGloss (sid INTEGER, lang TEXT, gend TEXT, text TEXT);
"""


def write_jmdict(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    for idseq, kanji, kana, senses, tags in ENTRIES:
        db.execute("INSERT INTO Entry VALUES (?)", (idseq,))
        for text in kanji:
            kid = db.execute(
                "INSERT INTO Kanji(idseq, text) VALUES (?, ?)", (idseq, text)
            ).lastrowid
            db.executemany("INSERT INTO KJP VALUES (?, ?)", [(kid, t) for t in tags])
        for text in kana:
            kid = db.execute(
                "INSERT INTO Kana(idseq, text, nokanji) VALUES (?, ?, 0)", (idseq, text)
            ).lastrowid
            db.executemany("INSERT INTO KNP VALUES (?, ?)", [(kid, t) for t in tags])
        for glosses in senses:
            sid = db.execute("INSERT INTO Sense(idseq) VALUES (?)", (idseq,)).lastrowid
            db.executemany(
                "INSERT INTO SenseGloss VALUES (?, 'eng', '', ?)", [(sid, g) for g in glosses]
            )
    db.commit()
    db.close()
    return path


@pytest.fixture
def jmdict(tmp_path: Path) -> Path:
    return write_jmdict(tmp_path / "jamdict.db")


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test converts into its own cache folder, with no table opened before."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("GROOVE_CACHE_DIR", str(folder))
    dictionary.forget()
    yield folder
    dictionary.forget()
