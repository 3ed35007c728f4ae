"""Golden files: accepted shapes, clear errors, and path resolution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaldata import EVALDATA
from groove_core.evaluation.golden import GoldenError, load_golden, resolve


def _write(path: Path, *records: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_shapes_ids_tags_and_grades(tmp_path: Path) -> None:
    golden = load_golden(
        _write(
            tmp_path / "g.jsonl",
            {"query": "plain", "expected": ["a.md", "b.md"]},
            "# a comment line",
            "",
            {"query": "graded", "expected": [{"path": "a.md", "rel": 2}, "c.md"], "id": "q2"},
            {
                "query": "mapped",
                "expected": ["a.md"],
                "grades": {"a.md": 3, "z.md": 0},
                "tags": ["x"],
            },
        )
    )
    first, second, third = golden.queries
    assert first.key == "line-1" and dict(first.grades) == {"a.md": 1.0, "b.md": 1.0}
    assert second.key == "q2" and dict(second.grades) == {"a.md": 2.0, "c.md": 1.0}
    assert dict(third.grades) == {"a.md": 3.0, "z.md": 0.0} and third.tags == ("x",)
    assert golden.graded
    assert len(golden.sha256) == 64


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', "JSON object"),
        ('{"expected": ["a.md"]}', '"query"'),
        ('{"query": "q", "expected": []}', '"expected"'),
        ('{"query": "q", "expected": [3]}', 'each "expected" item'),
        ('{"query": "q", "expected": [{"path": "a.md", "rel": -1}]}', "grade"),
        ('{"query": "q", "expected": [{"path": "a.md", "rel": 0}]}', "above 0"),
    ],
)
def test_bad_lines_name_the_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path / "g.jsonl", {"query": "ok", "expected": ["a.md"]}, line)
    with pytest.raises(GoldenError) as info:
        load_golden(path)
    assert f"{path}:2" in str(info.value) and message in str(info.value)


def test_duplicate_ids_and_empty_files_are_errors(tmp_path: Path) -> None:
    record = {"query": "q", "expected": ["a.md"], "id": "same"}
    with pytest.raises(GoldenError, match="duplicate id"):
        load_golden(_write(tmp_path / "d.jsonl", record, record))
    with pytest.raises(GoldenError, match="no queries"):
        load_golden(_write(tmp_path / "e.jsonl", "# only a comment"))
    with pytest.raises(GoldenError, match="cannot read"):
        load_golden(tmp_path / "absent.jsonl")


def test_paths_resolve_via_the_golden_folder_then_the_kb_root(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    indexed = frozenset({"docs/a.md", "docs/b.md", "c.md"})
    beside = _write(kb / "golden.jsonl", {"query": "q", "expected": ["docs/a.md"]})
    nested = _write(kb / "eval" / "g.jsonl", {"query": "q", "expected": ["../docs/a.md", "c.md"]})
    outside = _write(tmp_path / "elsewhere" / "g.jsonl", {"query": "q", "expected": ["docs/b.md"]})
    missing = _write(kb / "m.jsonl", {"query": "q", "expected": ["docs/zzz.md", "c.md"]})
    assert dict(resolve(load_golden(beside), kb, indexed)[0].grades) == {"docs/a.md": 1.0}
    assert dict(resolve(load_golden(nested), kb, indexed)[0].grades) == {
        "docs/a.md": 1.0,
        "c.md": 1.0,
    }
    assert dict(resolve(load_golden(outside), kb, indexed)[0].grades) == {"docs/b.md": 1.0}
    resolved = resolve(load_golden(missing), kb, indexed)[0]
    assert resolved.missing == ("docs/zzz.md",) and dict(resolved.grades) == {"c.md": 1.0}


@pytest.mark.parametrize(
    "name",
    [
        "jsquad-ja-para/golden.jsonl",
        "jsquad-ja-para/golden-hard.jsonl",
        "jsquad-ja-para/golden-all.jsonl",
        "jsquad-ja-para/golden-xlang-en2ja.jsonl",
        "xquad-en-para/golden.jsonl",
        "xquad-en-para/golden-hard.jsonl",
        "cacm-en/golden.jsonl",
        "lisa-en/golden.jsonl",
        "cranfield-en/golden.jsonl",
        "md-vue-docs-ja/golden-xlang-en2ja.jsonl",
        "md-vue-docs-ja/golden-questions-en2ja.jsonl",
        "md-vue-docs-en/golden-pasted.jsonl",
        "md-vue-docs-en/golden-xlang-ja2en.jsonl",
        "md-vue-docs-en/golden-questions-ja2en.jsonl",
        "dendron-vault-en/golden.jsonl",
        "dendron-vault-en/golden-keywords.jsonl",
        "dendron-vault-en/golden-stubs.jsonl",
    ],
)
def test_every_shared_golden_file_loads_and_resolves(name: str) -> None:
    path = EVALDATA / name
    golden = load_golden(path)
    docs = frozenset(
        p.relative_to(path.parent).as_posix() for p in (path.parent / "docs").rglob("*.md")
    )
    resolved = resolve(golden, path.parent, docs)
    assert all(q.grades and not q.missing for q in resolved)
    assert not golden.graded  # informational fields (cleverdon_code, answers) are not grades
