#!/usr/bin/env python3
"""Rebuild the evaluation collections under ``evaldata/`` from their public sources.

Standard library only. The raw source files are not in the repository: download them
yourself (see ``--help`` and ``evaldata/README.md``), put them in one folder and run::

    python evaldata/build.py --raw RAW --out OUT            # every collection
    python evaldata/build.py --raw RAW --out OUT --only xquad-en-para
    python evaldata/build.py --check OUT                     # compare OUT with evaldata/

Every raw file is checked against the sha256 recorded in the collection's ``SOURCE.md``
before anything is written; a mismatch stops the build. The conversion rules are the ones
each ``SOURCE.md`` documents; the output is byte for byte the committed collection.
``SOURCE.md`` itself is hand-written documentation and is not generated.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

EVALDATA = Path(__file__).resolve().parent

# ---------------------------------------------------------------------------------------------
# Where the raw files come from. ``files`` maps the name the file must have in the --raw folder
# to (path in the repository at that commit, sha256 of its bytes). For the Vue trees the raw
# entry is a folder (a checkout of the repository at that commit, or its GitHub archive
# unpacked); ``tree_sha256`` is the sha256 of the manifest described in ``tree_digest``.
# ---------------------------------------------------------------------------------------------

SOURCES: dict[str, dict[str, Any]] = {
    "jsquad-ja-para": {
        "repo": "yahoojapan/JGLUE",
        "commit": "6f071c09316baae89c3d083a90985b4b1cb9968c",
        "files": {
            "jsquad-valid-v1.3.json": (
                "datasets/jsquad-v1.3/valid-v1.3.json",
                "fb0a57a35281ff03bbe7f0e878cff5b577985fbe6fcb242e7e8ddb63d1c0ab11",
            ),
        },
    },
    "xquad-en-para": {
        "repo": "google-deepmind/xquad",
        "commit": "60cac411649156efb6aab9dd4c9cde787a2c0345",
        "files": {
            "xquad.en.json": (
                "xquad.en.json",
                "e4c57d1c9143aaa1c5d265ba5987a65f4e69528d2a98f29d6e75019b10344f29",
            ),
        },
    },
    "cranfield-en": {
        "repo": "DrDesignX/Simple_IR",
        "commit": "e18aea0dd1761074e1721675f51f251f368cd808",
        "files": {
            "cran.all.1400": (
                "cran.all.1400",
                "b234544b6ceccd131520df4a3cb6d42aee6576eb577933d047e722bbfe7b0b09",
            ),
            "cran.qry": (
                "cran.qry",
                "bd65642599ac35409bd3941f37c171fb089bc290386863153d708f4394c9f344",
            ),
            "cranqrel": (
                "cranqrel",
                "149999bde29b890eb046325222d35afdbea40f652afee17a1f774356cf8e0911",
            ),
            "cranqrel.readme": (
                "cranqrel.readme",
                "8f4cb2e60ab2324bb3ad980bdc8b9cf6a9b98a08d097d90a351485dd6e25433f",
            ),
        },
    },
    "cacm-en": {
        "repo": "charlesdlrsa/moteur_recherche_fri",
        "commit": "2c6c0d9860eb3ff230fedce9a66eeeed4d751e4a",
        "files": {
            "cacm.all": (
                "cacm/cacm.all",
                "4843d291a920a20ce99d26906d387572f90d2286e83d8f717638108f251a5033",
            ),
            "cacm.query.text": (
                "cacm/query.text",
                "465bf5cbb900a5bbb32aff17eebafce5eec66021aaa2692127d511c792c00f8a",
            ),
            "cacm.qrels.text": (
                "cacm/qrels.text",
                "65c79960d45ff5021497d15e4a0dbee26e14300bff95947a8f0d9da941b4ab7d",
            ),
            "cacm.README": (
                "cacm/README",
                "48e26d6a282a42e11ec8cf04c0556c1ba152fa3577c4ba1393a974cdf4a16f77",
            ),
        },
    },
    "lisa-en": {
        "repo": "maycods/Search-Engine",
        "commit": "43f4d3865edfe8f696f8b553d6fb64f0a7209d5d",
        "files": {
            "LISA0.001": (
                "Collection/LISA0.001",
                "626b5bfe8bbcda4e90f06f9ef16cfce6377437bca17568731b486e491c37b77b",
            ),
            "LISA0.501": (
                "Collection/LISA0.501",
                "4347e9c38aaecbe3efe2f18141e388372f87433f1914cbd682368e2be817145d",
            ),
            "LISA1.001": (
                "Collection/LISA1.001",
                "ada3469598e1f0239ad0ffb933567d4276d6a991715165a6d977213a54edddac",
            ),
            "LISA1.501": (
                "Collection/LISA1.501",
                "2bbe413b2558e771b304fbd507f9a59465046305f6bead081bf5ea992cda9648",
            ),
            "LISA2.001": (
                "Collection/LISA2.001",
                "046a8fc320194add03372fe824cf3a049159ed1bb5412592ad4da4783ff6a149",
            ),
            "LISA2.501": (
                "Collection/LISA2.501",
                "ffa062d08af2c7b41f8e1755cf7bd91dd0af4bf3b140b5bd2580ae230de2106d",
            ),
            "LISA3.001": (
                "Collection/LISA3.001",
                "2271dd0f42ae994c39d5e12dca0565005a3710abe1c088f4d40b41c052de5849",
            ),
            "LISA3.501": (
                "Collection/LISA3.501",
                "daefea09ad10f383b3d0377bfef678af7c0112673ed4b1d47d7d311c26c7ecda",
            ),
            "LISA4.001": (
                "Collection/LISA4.001",
                "99678da43421ff5acf53b3f2e93f454913d85932443b685c6aec355ac0192cbc",
            ),
            "LISA4.501": (
                "Collection/LISA4.501",
                "a559152ba8e78003f0a589f3d4fedebc3a2489cb2fe916ed106bae3f5dddcaaf",
            ),
            "LISA5.001": (
                "Collection/LISA5.001",
                "f24c63e7924b478f0cb75437d783cd087e00b92c6f5ee2b4d42fe2033291f7e5",
            ),
            "LISA5.501": (
                "Collection/LISA5.501",
                "cfff39ddddcc9a6da9ebee06d397508305d5e54135f5aa65a487af99a7a37fb1",
            ),
            "LISA5.627": (
                "Collection/LISA5.627",
                "87db8d725d60606f566470d351306038626b4887223647cf8f7f3baebfd82354",
            ),
            "LISA5.850": (
                "Collection/LISA5.850",
                "fac9d15c6f41f7ccc1142c9fe6524ebbf5d656f8ef7bae0804ec5f20e51d21c3",
            ),
            "LISA.QUE": (
                "pertinence/LISA.QUE",
                "d2f042f4f68f8c67546dc44aba073e6acd3582be6e88c7f41a948b760eaea935",
            ),
            "LISARJ.NUM": (
                "pertinence/LISARJ.NUM",
                "bdd5db47eec2d193fe94a9ef4b0b64e2688e0fc1e4cb5617f2237e5b7afce3d4",
            ),
        },
    },
    "md-vue-docs-en": {
        "repo": "vuejs/docs",
        "commit": "01e098a967951ea92d09b100b8e7d82c7a3369a2",
        "tree": "vuejs-docs",
        "repo_dir": "vuejs+docs",
        "lang": "en",
        "tree_sha256": "43b724ccf26a4998f2cbdbf3043d8d178d4032bdc996a960a1cd178992858d7d",
    },
    "md-vue-docs-ja": {
        "repo": "vuejs-translations/docs-ja",
        "commit": "c627102bfabf8bc5ecaa6eb763b965a0a5d43a5b",
        "tree": "vuejs-docs-ja",
        "repo_dir": "vuejs-translations+docs-ja",
        "lang": "ja",
        "tree_sha256": "4a09a186ed2616211ca7fc6721eb6c1d30c801917587d008b0659ce045d7008f",
    },
}
VUE_PREFIX = "src/"


# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------


class BuildError(Exception):
    """A raw file is missing or is not the one the collection was built from."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def markdown_files(tree: Path) -> list[str]:
    """Every ``*.md`` under ``tree`` as a "/"-separated relative path, in code-point order."""
    return sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*.md") if p.is_file())


def tree_digest(tree: Path) -> str:
    """sha256 of the manifest ``"<sha256>  <relative path>\\n"`` of every ``*.md``, path order.

    The same as ``(cd TREE && find . -name '*.md' -type f | sed 's|^\\./||' | LC_ALL=C sort |
    xargs sha256sum) | sha256sum``.
    """
    manifest = "".join(f"{sha256_file(tree / rel)}  {rel}\n" for rel in markdown_files(tree))
    return hashlib.sha256(manifest.encode("utf-8")).hexdigest()


def verify_tree(name: str, raw: Path) -> None:
    src = SOURCES[name]
    tree = raw / src["tree"] / VUE_PREFIX
    if not tree.is_dir():
        raise BuildError(
            f"{name}: missing {tree} (a checkout of github.com/{src['repo']} at {src['commit']})"
        )
    got = tree_digest(tree)
    if got != src["tree_sha256"]:
        raise BuildError(
            f"{name}: the *.md files under {tree} have tree digest {got}, expected "
            f"{src['tree_sha256']} (is the checkout at {src['commit']}?)"
        )


def verify_files(name: str, raw: Path) -> None:
    src = SOURCES[name]
    if "tree" in src:
        verify_tree(name, raw)
        return
    for fname, (repo_path, want) in src["files"].items():
        path = raw / fname
        if not path.is_file():
            raise BuildError(
                f"{name}: missing raw file {path} "
                f"(= {repo_path} of github.com/{src['repo']} at {src['commit']})"
            )
        got = sha256_file(path)
        if got != want:
            raise BuildError(f"{name}: {path} has sha256 {got}, expected {want}")


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def write_stats(path: Path, stats: dict[str, Any]) -> None:
    # indent=1, no trailing newline: the committed layout
    write_text(path, json.dumps(stats, ensure_ascii=False, indent=1))


def sample_key(question_id: str) -> str:
    """Deterministic sampling order: sha1("evaldata-v1:" + question id)."""
    return hashlib.sha1(("evaldata-v1:" + question_id).encode("utf-8")).hexdigest()


def normalise(text: str) -> str:
    """NFKC, lower-case, punctuation, symbols, spaces and underscores removed.

    Only the characters Python's ``re`` counts as word characters, less ``_``, stay (those
    ``str.isalnum()`` accepts; combining marks go too): ``re.sub(r"[\\W_]", "", ...)``.
    """
    return re.sub(r"[\W_]", "", unicodedata.normalize("NFKC", text).lower())


def trigrams(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(len(text) - 2)}


def trigram_overlap(query: str, doc_text: str) -> float:
    """Share of the query's distinct character trigrams (after ``normalise``) found in doc."""
    q = trigrams(normalise(query))
    if not q:
        return 0.0
    d = trigrams(normalise(doc_text))
    return round(len(q & d) / len(q), 4)


# The stop words of ``word_overlap`` (English collections only). SOURCE.md does not list them;
# this list reproduces every committed word_overlap of xquad-en-para and cranfield-en, and
# each word in it is needed for that. A word that occurs in none of those queries cannot be
# told apart, so the original list may have had more.
# fmt: off
STOP_WORDS = frozenset({
    "a", "about", "after", "an", "and", "are", "as", "at", "be", "been", "before", "being",
    "by", "can", "could", "did", "do", "does", "during", "for", "from", "has", "have", "how",
    "in", "into", "is", "it", "its", "no", "not", "of", "on", "or", "over", "should", "than",
    "that", "the", "there", "these", "this", "those", "to", "under", "was", "were", "what",
    "when", "where", "which", "who", "whom", "whose", "why", "will", "with", "would",
})
# fmt: on


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", unicodedata.normalize("NFKC", text).lower())


def word_overlap(query: str, doc_text: str) -> float:
    """Share of the query's non-stop-word words (with repeats) that occur as words in doc."""
    q = [w for w in words(query) if w not in STOP_WORDS]
    if not q:
        return 0.0
    d = set(words(doc_text))
    return round(sum(1 for w in q if w in d) / len(q), 4)


def percentile20(values: list[float]) -> float:
    s = sorted(values)
    return s[int(0.2 * len(s))]


def mean4(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


# SOURCE.md: "lines that would parse as Markdown block syntax (#, >, list markers, <, fences)".
# Only one line in all the sources matches (xquad Oxygen-p01: "2. This method ..."), so the
# data pin down no more than that; this is the natural reading of the sentence.
_BLOCK_START = re.compile(r"^(?:#|>|<|[-+*](?:\s|$)|\d+[.)](?:\s|$)|```|~~~)")


def escape_block_syntax(paragraph: str) -> str:
    """Prefix a backslash to lines that Markdown would read as block syntax."""
    return "\n".join("\\" + ln if _BLOCK_START.match(ln) else ln for ln in paragraph.split("\n"))


# ---------------------------------------------------------------------------------------------
# SQuAD-style collections (JSQuAD, XQuAD): one doc per paragraph
# ---------------------------------------------------------------------------------------------

SQUAD: dict[str, dict[str, str]] = {
    "jsquad-ja-para": {"raw": "jsquad-valid-v1.3.json", "lang": "ja"},
    "xquad-en-para": {"raw": "xquad.en.json", "lang": "en"},
}


def paragraph_doc(title: str, index: int, para: dict[str, Any], lang: str) -> str:
    """``docs/<article id>-pNN.md`` for one paragraph.

    JSQuAD question ids are ``a<page id>p<paragraph>q<question>``: the article id and the
    paragraph number come from them (the source lists paragraphs in string order of that
    number, p0, p1, p10, p11, ...). XQuAD ids are opaque: the article id is the title with
    every run of other characters than ASCII letters and digits made one "-", and the
    paragraph number is the position in the article.
    """
    if lang == "ja":
        found = {re.fullmatch(r"(a\d+)p(\d+)q\d+", qa["id"]) for qa in para["qas"]}
        keys = {(m.group(1), int(m.group(2))) for m in found if m}
        if len(keys) != 1 or None in found:
            raise BuildError(f"unexpected JSQuAD question ids in {title!r} paragraph {index}")
        aid, number = keys.pop()
        return f"docs/{aid}-p{number:02d}.md"
    aid = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-")
    return f"docs/{aid}-p{index:02d}.md"


def build_squad(name: str, raw: Path, out: Path) -> None:
    spec = SQUAD[name]
    lang = spec["lang"]
    data = json.loads((raw / spec["raw"]).read_text(encoding="utf-8"))["data"]
    root = out / name
    docs: dict[str, str] = {}
    questions = []  # (id, question, answers, doc path, title + paragraph text)
    n_paragraphs = 0
    for article in data:
        title = article["title"].replace("_", " ")
        for i, para in enumerate(article["paragraphs"]):
            context = para["context"]
            if " [SEP] " in context:  # JSQuAD contexts are "<title> [SEP] <paragraph>"
                context = context.split(" [SEP] ", 1)[1]
            context = context.strip()
            rel = paragraph_doc(article["title"], i, para, lang)
            docs[rel] = f"# {title}\n\n{escape_block_syntax(context)}\n"
            n_paragraphs += 1
            for qa in para["qas"]:
                answers = sorted({a["text"] for a in qa["answers"]})
                question = qa["question"].strip()
                questions.append((qa["id"], question, answers, rel, title + " " + context))

    counts: dict[str, int] = {}
    for q in questions:
        key = normalise(q[1])
        counts[key] = counts.get(key, 0) + 1
    pool: list[dict[str, Any]] = []
    for qid, text, answers, rel, doc_text in questions:
        key = normalise(text)
        if counts[key] > 1 or len(key) < 4:
            continue
        row = {
            "query": text,
            "expected": [rel],
            "id": qid,
            "answers": answers,
            "trigram_overlap": trigram_overlap(text, doc_text),
        }
        if lang == "en":
            row["word_overlap"] = word_overlap(text, doc_text)
        pool.append(row)
    threshold = percentile20([r["trigram_overlap"] for r in pool])
    for r in pool:
        r["hard"] = r["trigram_overlap"] <= threshold
    pool.sort(key=lambda r: r["id"])
    by_sample = sorted(pool, key=lambda r: sample_key(r["id"]))
    golden = sorted(by_sample[:300], key=lambda r: r["id"])
    hard = sorted([r for r in by_sample if r["hard"]][:150], key=lambda r: r["id"])

    for rel, text in docs.items():
        write_text(root / rel, text)
    write_jsonl(root / "golden-all.jsonl", pool)
    write_jsonl(root / "golden.jsonl", golden)
    write_jsonl(root / "golden-hard.jsonl", hard)
    write_stats(
        root / "stats.json",
        {
            "name": name,
            "unit": "paragraph",
            "docs": len(docs),
            "articles": len(data),
            "paragraphs": n_paragraphs,
            "questions_in_source": len(questions),
            "pool_after_filter": len(pool),
            "hard_threshold_trigram_overlap_p20": threshold,
            "hard_in_pool": sum(r["hard"] for r in pool),
            "golden": len(golden),
            "golden_hard_in_golden": sum(r["hard"] for r in golden),
            "golden_hard_file": len(hard),
            "mean_overlap_golden": mean4([r["trigram_overlap"] for r in golden]),
            "mean_overlap_hard": mean4([r["trigram_overlap"] for r in hard]),
        },
    )


# ---------------------------------------------------------------------------------------------
# Cranfield (SMART format): one doc per abstract, all judged queries
# ---------------------------------------------------------------------------------------------


def parse_smart(text: str) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """``.I <id>`` records of ``.X`` fields; a field may repeat (docs 240, 576, 578 do)."""
    records: list[tuple[str, list[tuple[str, list[str]]]]] = []
    for line in text.split("\n"):
        m = re.fullmatch(r"\.I (\S+)", line)
        if m:
            records.append((m.group(1), []))
            continue
        m = re.fullmatch(r"\.([A-Z])", line)
        if m:
            records[-1][1].append((m.group(1), []))
            continue
        if records and records[-1][1]:
            records[-1][1][-1][1].append(line)
    return records


def join_lines(lines: Iterable[str]) -> str:
    return " ".join(" ".join(lines).split())


def smart_field(fields: list[tuple[str, list[str]]], tag: str) -> str:
    """All lines of every ``.<tag>`` field, joined by single spaces."""
    return join_lines(line for t, lines in fields if t == tag for line in lines)


def cran_paragraphs(fields: list[tuple[str, list[str]]]) -> list[str]:
    """The .W text: every .W field starts a paragraph, and so does a line indented 2+ spaces."""
    paras: list[list[str]] = []
    for tag, lines in fields:
        if tag != "W":
            continue
        paras.append([])
        for line in lines:
            if line.startswith("  ") and paras[-1]:
                paras.append([])
            paras[-1].append(line)
    return [p for p in (join_lines(lines) for lines in paras) if p]


def build_cranfield(name: str, raw: Path, out: Path) -> None:
    root = out / name
    docs_text: dict[str, str] = {}  # doc path -> the text overlaps are computed against
    for doc_id, fields in parse_smart((raw / "cran.all.1400").read_text(encoding="utf-8")):
        title = smart_field(fields, "T")
        paras = cran_paragraphs(fields)
        # The abstract opens with a copy of the title: drop it (once) where more text follows.
        if title and len(paras) > 1 and paras[0].startswith(title):
            paras[0] = paras[0][len(title) :].strip()
            paras = [p for p in paras if p]
        if title.endswith(" ."):
            title = title[:-2]
        head = ["---", f"cranfield_id: {json.dumps(doc_id)}"]
        for key, tag in (("author", "A"), ("bibliography", "B")):
            value = smart_field(fields, tag)
            if value:
                head.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
        head.append("---")
        heading = title or f"Cranfield document {doc_id}"
        body = "\n\n".join(paras) if paras else "(no abstract)"
        markdown = f"# {heading}\n\n{body}\n"
        rel = f"docs/cran-{int(doc_id):04d}.md"
        docs_text[rel] = markdown  # overlaps: heading + abstract, not the front matter
        write_text(root / rel, "\n".join(head) + "\n\n" + markdown)

    queries = parse_smart((raw / "cran.qry").read_text(encoding="utf-8"))
    judged: dict[int, list[tuple[str, int]]] = {}
    for line in (raw / "cranqrel").read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts:
            continue
        qnum, docnum, code = int(parts[0]), int(parts[1]), int(parts[2])
        if 1 <= code <= 4:
            judged.setdefault(qnum, []).append((f"docs/cran-{docnum:04d}.md", code))
    rows: list[dict[str, Any]] = []
    for position, (source_id, fields) in enumerate(queries, start=1):
        text = smart_field(fields, "W")
        if text.endswith(" ."):
            text = text[:-2] + "."
        rels = judged.get(position, [])
        codes = dict(rels)
        expected = [p for p, _ in sorted(rels, key=lambda pc: (pc[1], pc[0]))]
        rows.append(
            {
                "query": text,
                "expected": expected,
                "id": f"cran-q{position:03d}",
                "source_query_id": source_id,
                "cleverdon_code": codes,
                "trigram_overlap": max(trigram_overlap(text, docs_text[p]) for p in expected),
                "word_overlap": max(word_overlap(text, docs_text[p]) for p in expected),
            }
        )
    write_jsonl(root / "golden.jsonl", rows)
    pairs = sum(len(r["expected"]) for r in rows)
    write_stats(
        root / "stats.json",
        {
            "name": name,
            "docs": len(docs_text),
            "queries": len(rows),
            "relevant_pairs": pairs,
            "mean_relevant_per_query": round(pairs / len(rows), 2),
            "mean_trigram_overlap_vs_best_rel_doc": mean4([r["trigram_overlap"] for r in rows]),
            "queries_in_source": len(queries),
        },
    )


# ---------------------------------------------------------------------------------------------
# CACM (SMART format, as Cranfield): one doc per article, the 52 judged queries of 64
# ---------------------------------------------------------------------------------------------

#: Length buckets of ``content_words`` (issue #42): (label, lowest, highest or None).
LENGTH_BUCKETS = (("0-7", 0, 7), ("8-15", 8, 15), ("16-31", 16, 31), ("32+", 32, None))

# fmt: off
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["january", "february", "march", "april", "may", "june", "july", "august",
         "september", "october", "november", "december"],
        start=1,
    )
}
# fmt: on


def content_words(text: str) -> list[str]:
    """The query's words (``words``: runs of ASCII letters and digits after NFKC and
    lower-casing) less ``STOP_WORDS``, repeats kept. Its length is a golden row's ``words``."""
    return [w for w in words(text) if w not in STOP_WORDS]


def length_bucket(n: int) -> str:
    for label, low, high in LENGTH_BUCKETS:
        if n >= low and (high is None or n <= high):
            return label
    raise ValueError(n)


def cacm_date(b_field: str) -> str | None:
    """``CACM December, 1958`` (or ``June, 1969``) -> ``1958-12``; None for another shape."""
    m = re.fullmatch(r"(?:CACM\s+)?([A-Za-z]+),?\s*(\d{4})", b_field.strip())
    if not m or m.group(1).lower() not in _MONTHS:
        return None
    return f"{m.group(2)}-{_MONTHS[m.group(1).lower()]:02d}"


def smart_lines(fields: list[tuple[str, list[str]]], tag: str) -> list[str]:
    """The non-empty lines of every ``.<tag>`` field, each with its spaces folded."""
    return [" ".join(ln.split()) for t, lines in fields if t == tag for ln in lines if ln.strip()]


def _request_stats(rows: list[dict[str, Any]], in_source: int) -> dict[str, Any]:
    """The stats.json keys of a collection of long requests (cacm-en, lisa-en)."""
    pairs = sum(len(r["expected"]) for r in rows)
    lengths = sorted(r["words"] for r in rows)
    return {
        "queries": len(rows),
        "queries_in_source": in_source,
        "relevant_pairs": pairs,
        "mean_relevant_per_query": round(pairs / len(rows), 2),
        "mean_trigram_overlap_vs_best_rel_doc": mean4([r["trigram_overlap"] for r in rows]),
        "mean_content_words": round(sum(lengths) / len(lengths), 2),
        "median_content_words": lengths[len(lengths) // 2],
        "queries_per_length_bucket": {
            label: sum(1 for r in rows if r["length_bucket"] == label)
            for label, _, _ in LENGTH_BUCKETS
        },
    }


def build_cacm(name: str, raw: Path, out: Path) -> None:
    """``docs/cacm-NNNN.md`` per article; golden rows for the queries that have judgements.

    The raw files have CRLF line ends (read in text mode: universal newlines). One record
    id is split over two lines in the source (``.I 28`` / ``56`` = 2856); it is rejoined.
    Body: ``# <title>`` then the ``.W`` abstract as one paragraph (1,587 of 3,204 articles
    have one; the others are a title only). ``.K`` key words and ``.C`` CR categories are
    front matter under names groove does not read as tags (``cacm_keywords``,
    ``cr_categories``), so the searchable text is title + abstract, as for Cranfield.
    ``.N`` (record stamp) and ``.X`` (citation links) are left out.
    """
    root = out / name
    text = (raw / "cacm.all").read_text(encoding="ascii")
    text, joined = re.subn(r"(?m)^(\.I \d+)\n(\d+)\n", r"\1\2\n", text)
    if joined != 1:
        raise BuildError(f"{name}: expected one split .I line in cacm.all, found {joined}")
    docs_text: dict[str, str] = {}
    with_abstract = 0
    for doc_id, fields in parse_smart(text):
        rel = f"docs/cacm-{int(doc_id):04d}.md"
        if rel in docs_text:
            raise BuildError(f"{name}: duplicate document {doc_id}")
        title = smart_field(fields, "T")
        abstract = smart_field(fields, "W")
        head = ["---", f"cacm_id: {json.dumps(doc_id)}"]
        authors = smart_lines(fields, "A")
        if authors:
            head.append(f"authors: {json.dumps(authors)}")
        published = smart_field(fields, "B")
        if published:
            date = cacm_date(published)
            if date:
                head.append(f"date: {json.dumps(date)}")
            head.append(f"published: {json.dumps(published)}")
        for key, tag in (("cacm_keywords", "K"), ("cr_categories", "C")):
            value = smart_field(fields, tag)
            if value:
                head.append(f"{key}: {json.dumps(value)}")
        head.append("---")
        heading = title or "(untitled)"  # one article (3193); no word a query uses
        markdown = f"# {heading}\n"
        if abstract:
            markdown += f"\n{escape_block_syntax(abstract)}\n"
            with_abstract += 1
        docs_text[rel] = markdown
        write_text(root / rel, "\n".join(head) + "\n\n" + markdown)

    queries = parse_smart((raw / "cacm.query.text").read_text(encoding="ascii"))
    judged: dict[int, list[str]] = {}
    for line in (raw / "cacm.qrels.text").read_text(encoding="ascii").splitlines():
        parts = line.split()
        if parts:
            judged.setdefault(int(parts[0]), []).append(f"docs/cacm-{int(parts[1]):04d}.md")
    rows: list[dict[str, Any]] = []
    for source_id, fields in queries:
        expected = sorted(set(judged.get(int(source_id), [])))
        if not expected:
            continue
        missing = [p for p in expected if p not in docs_text]
        if missing:
            raise BuildError(f"{name}: query {source_id} judges unknown documents {missing}")
        query = smart_field(fields, "W")
        n_words = len(content_words(query))
        row: dict[str, Any] = {
            "query": query,
            "expected": expected,
            "id": f"cacm-q{int(source_id):02d}",
            "source_query_id": source_id,
            "words": n_words,
            "length_bucket": length_bucket(n_words),
        }
        authors = smart_lines(fields, "A")
        if authors:
            row["query_authors"] = authors
        row["trigram_overlap"] = max(trigram_overlap(query, docs_text[p]) for p in expected)
        row["word_overlap"] = max(word_overlap(query, docs_text[p]) for p in expected)
        rows.append(row)
    write_jsonl(root / "golden.jsonl", rows)
    write_stats(
        root / "stats.json",
        {
            "name": name,
            "docs": len(docs_text),
            "docs_with_abstract": with_abstract,
            **_request_stats(rows, len(queries)),
        },
    )


# ---------------------------------------------------------------------------------------------
# LISA (Sheffield/Glasgow plain-text format): one doc per abstract, the 35 judged queries
# ---------------------------------------------------------------------------------------------

#: The document files of the distribution, in document order (concatenated they are the set).
LISA_DOC_FILES = (
    "LISA0.001", "LISA0.501", "LISA1.001", "LISA1.501", "LISA2.001", "LISA2.501", "LISA3.001",
    "LISA3.501", "LISA4.001", "LISA4.501", "LISA5.001", "LISA5.501", "LISA5.627", "LISA5.850",
)  # fmt: skip
_LISA_END = "*" * 44  # the line that ends every record
#: The source's damage in LISA1.501 (see SOURCE.md): ids it never holds, ids it holds twice.
LISA_LOST_IDS = (1993, 1994, 1995, 1996, 1997)
LISA_REPEATED_IDS = (1998, 1999, 2000, 2001)


def lisa_records(text: str) -> list[list[str]]:
    """The records of one document file: the lines between two ``*`` x 44 end lines."""
    if not text.endswith("\n" + _LISA_END + "\n"):
        raise BuildError("a LISA document file does not end with its record end line")
    return [
        chunk.split("\n") for chunk in text[: -len(_LISA_END) - 2].split("\n" + _LISA_END + "\n")
    ]


def lisa_paragraphs(lines: list[str]) -> list[str]:
    """Runs of non-blank lines (a blank line may hold spaces), each joined by single spaces."""
    paras: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paras[-1].append(line)
        elif paras[-1]:
            paras.append([])
    return [join_lines(p) for p in paras if p]


def build_lisa(name: str, raw: Path, out: Path) -> None:
    """``docs/lisa-NNNN.md`` per abstract; golden rows for the 35 queries, all judged.

    A record is ``Document <id>``, the title (one or more lines), a blank line (empty or
    spaces), the abstract, then the ``*`` x 44 end line. Body: ``# <title>`` (its lines
    joined) then the abstract as one paragraph (no abstract has a blank line inside).
    LISA1.501 is damaged in the distribution itself: ids 1993-1997 are absent, 1998-2000
    appear twice in it and 2001 once more at the head of LISA2.001 (the copies are the
    same text; one file is written), and one record has no ``Document`` line (the tail of
    a lost abstract, also spliced into 1992's): it is left out. Everything else is kept as
    it is, upper case included. Judgements come from ``LISARJ.NUM`` (``LISA.REL`` is
    garbled from query 21 to 23 in every copy; it agrees with ``LISARJ.NUM`` elsewhere).
    """
    root = out / name
    docs_text: dict[str, str] = {}
    records = headless = repeated = 0
    for fname in LISA_DOC_FILES:
        for lines in lisa_records((raw / fname).read_text(encoding="ascii")):
            records += 1
            m = re.fullmatch(r"Document\s+(\d+)\s*", lines[0])
            if not m:
                if fname != "LISA1.501" or headless:
                    raise BuildError(
                        f"{name}: unexpected record without a Document line in {fname}"
                    )
                headless += 1
                continue
            doc_id = str(int(m.group(1)))
            rest = lines[1:]
            blank = next((i for i, ln in enumerate(rest) if not ln.strip()), None)
            if not blank:  # None (no blank line) or 0 (no title)
                raise BuildError(f"{name}: document {doc_id} has no title line and blank line")
            title = join_lines(rest[:blank])
            paras = lisa_paragraphs(rest[blank + 1 :])
            if len(paras) != 1:
                raise BuildError(f"{name}: document {doc_id} has {len(paras)} abstract paragraphs")
            markdown = f"# {title}\n\n{escape_block_syntax(paras[0])}\n"
            rel = f"docs/lisa-{int(doc_id):04d}.md"
            if rel in docs_text:
                if int(doc_id) not in LISA_REPEATED_IDS or docs_text[rel] != markdown:
                    raise BuildError(f"{name}: document {doc_id} repeated with other text")
                repeated += 1
                continue
            docs_text[rel] = markdown
            head = ["---", f"lisa_id: {json.dumps(doc_id)}", "---"]
            write_text(root / rel, "\n".join(head) + "\n\n" + markdown)
    lost = [i for i in range(1, 6005) if f"docs/lisa-{i:04d}.md" not in docs_text]
    if lost != list(LISA_LOST_IDS) or len(docs_text) != 6004 - len(LISA_LOST_IDS):
        raise BuildError(f"{name}: unexpected set of documents (absent ids {lost[:10]})")

    # LISARJ.NUM: whitespace-separated integers, per query: id, count, that many doc ids.
    numbers = [int(n) for n in (raw / "LISARJ.NUM").read_text(encoding="ascii").split()]
    judged: dict[int, list[str]] = {}
    i = 0
    while i < len(numbers):
        qid, count = numbers[i], numbers[i + 1]
        if qid in judged or i + 2 + count > len(numbers):
            raise BuildError(f"{name}: malformed LISARJ.NUM at query {qid}")
        judged[qid] = [f"docs/lisa-{d:04d}.md" for d in numbers[i + 2 : i + 2 + count]]
        i += 2 + count

    # LISA.QUE: a line holding the query id, then the request, ended by " #".
    queries: list[tuple[str, str]] = []
    que = (raw / "LISA.QUE").read_text(encoding="ascii")
    for m in re.finditer(r"(?m)^(\d+)\n(.*?)#[ \t]*$", que, flags=re.S):
        queries.append((m.group(1), join_lines(m.group(2).split("\n"))))
    if len(queries) != 35 or sorted(judged) != [int(q) for q, _ in queries]:
        raise BuildError(f"{name}: {len(queries)} queries; judged {sorted(judged)}")
    rows: list[dict[str, Any]] = []
    for source_id, query in queries:
        expected = sorted(set(judged[int(source_id)]))
        missing = [p for p in expected if p not in docs_text]
        if missing:
            raise BuildError(f"{name}: query {source_id} judges unknown documents {missing}")
        n_words = len(content_words(query))
        rows.append(
            {
                "query": query,
                "expected": expected,
                "id": f"lisa-q{int(source_id):02d}",
                "source_query_id": source_id,
                "words": n_words,
                "length_bucket": length_bucket(n_words),
                "trigram_overlap": max(trigram_overlap(query, docs_text[p]) for p in expected),
                "word_overlap": max(word_overlap(query, docs_text[p]) for p in expected),
            }
        )
    write_jsonl(root / "golden.jsonl", rows)
    write_stats(
        root / "stats.json",
        {
            "name": name,
            "docs": len(docs_text),
            "records_in_source": records,
            "records_without_id": headless,
            "records_repeated": repeated,
            "ids_absent": list(LISA_LOST_IDS),
            **_request_stats(rows, len(queries)),
        },
    )


# ---------------------------------------------------------------------------------------------
# Vue.js documentation trees: copied unchanged; ja also gets the en->ja title set
# ---------------------------------------------------------------------------------------------

_FENCE = re.compile(r"(`{3,}|~{3,})")
_HEADING = re.compile(r"(#{1,6})\s")
_KANA = re.compile(r"[\u3040-\u30ff]")


def markdown_headings(text: str) -> tuple[list[tuple[int, str]], int]:
    """ATX headings outside fenced code as (level, line), and the number of fenced blocks.

    A fence is a line that starts (after any indentation) with ``` or ~~~; it is closed by the
    next line that starts with the same character. Front matter is not skipped (no Vue page
    has a heading-like line in it); a file that starts with a BOM has no heading on line 1.
    """
    heads: list[tuple[int, str]] = []
    fences = 0
    fence_char = ""
    for line in text.split("\n"):
        m = _FENCE.match(line.lstrip())
        if fence_char:
            if m and m.group(1)[0] == fence_char:
                fence_char = ""
            continue
        if m:
            fences += 1
            fence_char = m.group(1)[0]
            continue
        h = _HEADING.match(line)
        if h:
            heads.append((len(h.group(1)), line))
    return heads, fences


def h1_query(line: str) -> str:
    """The text of a ``# `` heading: anchor ``{#...}``, HTML tags and backslashes removed."""
    text = re.sub(r"\s*\{#[^}]*\}\s*$", "", line[2:])
    text = re.sub(r"<[^>]*>", " ", text).replace("\\", "")
    return " ".join(text.split())


def build_vue(name: str, raw: Path, out: Path) -> None:
    src = SOURCES[name]
    tree = raw / src["tree"] / VUE_PREFIX
    root = out / name
    files = markdown_files(tree)
    stats: dict[str, int] = {
        "files": 0,
        "bytes": 0,
        "missing_blobs": 0,
        "with_front_matter": 0,
        "headings": 0,
        "h1": 0,
        "h2": 0,
        "h3_plus": 0,
        "fenced_code_blocks": 0,
        "max_heading_depth": 0,
        "files_with_kana": 0,
        "largest_file_bytes": 0,
    }
    for rel in files:
        data = (tree / rel).read_bytes()
        target = root / "docs" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        text = data.decode("utf-8")
        heads, fences = markdown_headings(text)
        levels = [level for level, _ in heads]
        stats["files"] += 1
        stats["bytes"] += len(data)
        stats["largest_file_bytes"] = max(stats["largest_file_bytes"], len(data))
        stats["with_front_matter"] += text.startswith("---\n")
        stats["headings"] += len(levels)
        stats["h1"] += levels.count(1)
        stats["h2"] += levels.count(2)
        stats["h3_plus"] += sum(1 for lv in levels if lv >= 3)
        stats["fenced_code_blocks"] += fences
        stats["max_heading_depth"] = max([stats["max_heading_depth"], *levels])
        stats["files_with_kana"] += bool(_KANA.search(text))
    write_stats(
        root / "stats.json",
        {
            "name": name,
            "repo_dir": src["repo_dir"],
            "commit": src["commit"],
            "prefix": VUE_PREFIX,
            "lang": src["lang"],
            **stats,
        },
    )
    write_xlang(name, raw, root, set(files))


#: A Vue tree's cross-lingual titles: (the other tree, whose page titles are the queries;
#: the file's direction tag).
XLANG = {
    "md-vue-docs-ja": ("md-vue-docs-en", "en2ja"),
    "md-vue-docs-en": ("md-vue-docs-ja", "ja2en"),
}


def write_xlang(name: str, raw: Path, root: Path, files: set[str]) -> None:
    """golden-xlang-<tag>.jsonl: the H1 of each page of the other language's tree -> this
    tree's page at the same path (``golden-xlang-en2ja.jsonl`` in the Japanese tree,
    ``golden-xlang-ja2en.jsonl`` in the English one)."""
    other, tag = XLANG[name]
    other_tree = raw / SOURCES[other]["tree"] / VUE_PREFIX
    rows: list[dict[str, Any]] = []
    for rel in markdown_files(other_tree):
        if rel not in files:
            continue
        heads, _ = markdown_headings((other_tree / rel).read_text(encoding="utf-8"))
        h1 = [line for level, line in heads if level == 1]
        query = h1_query(h1[0]) if h1 else ""
        if not query:
            continue
        rows.append(
            {
                "query": query,
                "expected": [f"docs/{rel}"],
                "id": f"vue-{tag}-{rel.removesuffix('.md')}",
                "source": f"{other}/docs/{rel} (H1)",
            }
        )
    rows.sort(key=lambda r: r["id"])
    write_jsonl(root / f"golden-xlang-{tag}.jsonl", rows)


BUILDERS: dict[str, Callable[[str, Path, Path], None]] = {
    "md-vue-docs-en": build_vue,
    "md-vue-docs-ja": build_vue,
    "cranfield-en": build_cranfield,
    "cacm-en": build_cacm,
    "lisa-en": build_lisa,
    "jsquad-ja-para": build_squad,
    "xquad-en-para": build_squad,
}


# ---------------------------------------------------------------------------------------------
# --check: compare a rebuilt tree with the committed one
# ---------------------------------------------------------------------------------------------

NOT_GENERATED = frozenset({"SOURCE.md"})  # hand-written, committed, not rebuilt
#: Golden files written by hand for a collection (their SOURCE.md says how): committed, not
#: rebuilt.
HAND_WRITTEN = {
    "jsquad-ja-para": frozenset(
        {"golden-xlang-en2ja.jsonl", "golden-short.jsonl", "build_short.py"}
    ),
    "md-vue-docs-en": frozenset({"golden-pasted.jsonl", "golden-questions-ja2en.jsonl"}),
    "md-vue-docs-ja": frozenset({"golden-questions-en2ja.jsonl"}),
}


def collection_files(folder: Path) -> set[str]:
    if not folder.is_dir():
        return set()
    skip = NOT_GENERATED | HAND_WRITTEN.get(folder.name, frozenset())
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and p.relative_to(folder).as_posix() not in skip
    }


def check(rebuilt: Path, names: list[str], committed: Path = EVALDATA) -> list[str]:
    """Differences between ``rebuilt/<name>`` and ``committed/<name>``, one line each."""
    problems: list[str] = []
    for name in names:
        ours, theirs = committed / name, rebuilt / name
        mine, built = collection_files(ours), collection_files(theirs)
        if not built:
            problems.append(f"{name}: nothing rebuilt under {theirs}")
            continue
        problems += [f"{name}: missing from the rebuild: {rel}" for rel in sorted(mine - built)]
        problems += [f"{name}: not in the committed copy: {rel}" for rel in sorted(built - mine)]
        for rel in sorted(mine & built):
            if (ours / rel).read_bytes() != (theirs / rel).read_bytes():
                problems.append(f"{name}: differs: {rel}")
    return problems


def raw_files_help() -> str:
    lines = ["raw files (the --raw folder must hold these names):", ""]
    for name, src in SOURCES.items():
        lines.append(f"  {name}: github.com/{src['repo']} at commit {src['commit']}")
        if "tree" in src:
            lines.append(
                f"    {src['tree']}/  a checkout (or unpacked GitHub archive) of that commit;"
            )
            lines.append(f"      its {VUE_PREFIX}**/*.md have tree digest {src['tree_sha256']}")
        for fname, (repo_path, digest) in src.get("files", {}).items():
            lines.append(f"    {fname}  = {repo_path}")
            lines.append(f"      sha256 {digest}")
    lines.append("")
    lines.append("md-vue-docs-ja and md-vue-docs-en each need the other's tree (golden-xlang-*).")
    lines.append("See evaldata/README.md for download commands.")
    return "\n".join(lines)


def prepare_output(folder: Path) -> None:
    """Start from an empty folder, so that no file of an earlier run survives.

    Only a folder that is empty or holds an earlier build (a ``stats.json``) is cleared.
    """
    if folder.exists():
        if any(folder.iterdir()) and not (folder / "stats.json").is_file():
            raise BuildError(f"{folder} exists and is not an earlier build; remove it first")
        shutil.rmtree(folder)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__,
        epilog=raw_files_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--raw", type=Path, help="folder holding the raw source files")
    ap.add_argument("--out", type=Path, help="folder to write the collections into")
    ap.add_argument(
        "--only",
        choices=sorted(BUILDERS),
        action="append",
        help="build (or check) only this collection; may be repeated",
    )
    ap.add_argument(
        "--check",
        type=Path,
        metavar="DIR",
        help="compare the collections in DIR (a --out folder) with the committed evaldata/, "
        "byte for byte (SOURCE.md excepted); exit status 1 on any difference. With --raw and "
        "--out, build first.",
    )
    args = ap.parse_args(argv)
    names = args.only or sorted(BUILDERS)
    if args.raw is None and args.check is None:
        ap.error("give --raw and --out to build, or --check DIR to compare")
    if args.raw is not None:
        if args.out is None:
            ap.error("--raw needs --out")
        if args.out.resolve() == EVALDATA:
            ap.error("--out must not be evaldata/ itself: build elsewhere and use --check")
        try:
            for name in names:
                verify_files(name, args.raw)
                if name in XLANG:  # its cross-lingual queries come from the other tree
                    verify_files(XLANG[name][0], args.raw)
            for name in names:
                prepare_output(args.out / name)
                BUILDERS[name](name, args.raw, args.out)
                print(f"built {name} -> {args.out / name}")
        except BuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.check is not None:
        problems = check(args.check, names)
        for line in problems:
            print(line)
        for name in names:
            if not any(p.startswith(name + ":") for p in problems):
                print(f"{name}: identical to evaldata/{name}")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
