"""Odd things on disk: FIFOs, symlink loops, links past the ignore rules, floods of chunks,
files that stop being indexable, malformed ignore patterns. Each is skipped with a reason or
refused with a clear error; none hangs, crashes a run or leaks what is ignored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.config import ConfigError, parse_config
from groove_core.kb_files import DocumentError, resolve_markdown
from groove_core.testing import FAST_CONFIG, make_kb, open_kb

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _index_in_child(kb: Path, timeout: float) -> dict[str, object]:
    """Run an index in a child process (a hang fails the test instead of blocking it);
    the report, plus the child's peak memory in MB."""
    code = (
        "import json, resource, sys\n"
        # ru_maxrss survives exec: a child started by vfork reports its parent's peak (the
        # whole test session's). VmHWM belongs to the child's own address space.
        "def peak_mb():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            return int(line.split()[1]) // 1024\n"
        "    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024\n"
        "from groove_core.app import Groove\n"
        "report = Groove.open(__import__('pathlib').Path(sys.argv[1])).index().to_json()\n"
        "report['max_rss_mb'] = peak_mb()\n"
        "print(json.dumps(report))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(kb)],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"groove index ran for over {timeout} s") from None
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _skipped(report: dict[str, object]) -> dict[str, str]:
    entries = report["skipped"]
    assert isinstance(entries, list)
    return {e["path"]: e["reason"] for e in entries}


def _indexed(kb: Path) -> set[str]:
    app = Groove.open(kb)
    try:
        return {d.path for d in app.store.documents()}
    finally:
        app.close()


# -- FIFOs and symlink loops -------------------------------------------------------------


def test_a_fifo_named_md_is_skipped_not_read(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    os.mkfifo(kb / "pipe.md")
    report = _index_in_child(kb, timeout=90)
    assert _skipped(report) == {"pipe.md": "not a regular file (a FIFO)"}
    assert _indexed(kb) == {"a.md"}


def test_names_that_are_not_utf8_are_skipped_with_the_reason(tmp_path: Path) -> None:
    """A Latin-1 name (``caf\xe9.md``) crashed the whole run in the store."""
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    with open(os.path.join(os.fsencode(kb), b"caf\xe9.md"), "w", encoding="utf-8") as note:
        note.write("# Cafe\n\ncoffee\n")
    os.mkdir(os.path.join(os.fsencode(kb), b"d\xe9j\xe0"))
    with open(os.path.join(os.fsencode(kb), b"d\xe9j\xe0", b"n.md"), "w") as note:
        note.write("# N\n\nnote\n")
    report = _index_in_child(kb, timeout=90)
    reason = "its name is not valid UTF-8 (rename it to index it)"
    assert _skipped(report) == {"caf\\xe9.md": reason, "d\\xe9j\\xe0/": reason}
    assert _indexed(kb) == {"a.md"}


def test_symlink_loops_between_files_are_skipped(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"good.md": "# Good\n\nfine\n"})
    (kb / "a.md").symlink_to("b.md")
    (kb / "b.md").symlink_to("a.md")
    (kb / "x.md").symlink_to("x.md")
    (kb / "gone.md").symlink_to("nowhere.md")
    report = Groove.open(kb).index()
    reasons = dict(report.skipped)
    for name in ("a.md", "b.md", "x.md"):
        assert reasons[name].startswith("symlink loop"), reasons
    assert reasons["gone.md"].startswith("broken symlink")
    assert report.documents_total == 1


# -- links past the ignore and confinement rules ----------------------------------------


SECRET = "# Private\n\nthe launch code is swordfish\n"


def _kb_with_links(tmp_path: Path) -> Path:
    kb = make_kb(
        tmp_path / "kb",
        {
            "a.md": "# A\n\nalpha\n",
            "private/p.md": SECRET,
            ".git/secret.md": SECRET,
            "notes.txt": SECRET,
            ".grooveignore": "private/**\n",
        },
    )
    (kb / "expose.md").symlink_to("private/p.md")
    (kb / "gitlink.md").symlink_to(".git/secret.md")
    (kb / "text.md").symlink_to("notes.txt")
    return kb


def test_a_symlink_to_an_ignored_file_is_not_indexed(tmp_path: Path) -> None:
    kb = _kb_with_links(tmp_path)
    report = Groove.open(kb).index()
    reasons = dict(report.skipped)
    assert reasons["expose.md"] == (
        "symlink to private/p.md, which is excluded by the ignore pattern 'private/**'"
    )
    assert reasons["gitlink.md"].startswith("symlink to .git/secret.md, which is inside .git/")
    assert reasons["text.md"] == "symlink to notes.txt, which is not a Markdown file"
    assert _indexed(kb) == {"a.md"}
    app = open_kb(kb, index=False)
    assert all("swordfish" not in h.content for h in app.search("launch code swordfish").results)


def test_search_and_get_document_refuse_the_same_links(tmp_path: Path) -> None:
    kb = _kb_with_links(tmp_path)
    app = open_kb(kb)
    for link in ("expose.md", "gitlink.md", "text.md"):
        with pytest.raises(DocumentError):
            resolve_markdown(app, link)
    assert _indexed(kb) == {"a.md"}


# -- the chunk cap -----------------------------------------------------------------------


def test_a_file_over_the_chunk_cap_is_skipped_with_the_reason(tmp_path: Path) -> None:
    config = FAST_CONFIG + "[index]\nmax_chunks_per_file = 5\nmin_section_tokens = 0\n"
    many = "".join(f"# Part {i}\n\ntext {i}\n\n" for i in range(6))
    kb = make_kb(tmp_path / "kb", {"many.md": many, "few.md": "# A\n\none\n"}, config=config)
    report = Groove.open(kb).index()
    assert dict(report.skipped)["many.md"] == ("more than 5 chunks: over index.max_chunks_per_file")
    assert _indexed(kb) == {"few.md"}


def test_a_flood_of_headings_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    # 4 MB, a million one-line sections: before the cap, a million chunks, 2 GB of memory
    # and (with the default embedder) about a day of embedding.
    kb = make_kb(tmp_path / "kb", {"flood.md": "# h\n" * 1_000_000, "a.md": "# A\n\nalpha\n"})
    report = _index_in_child(kb, timeout=120)
    assert "index.max_chunks_per_file" in _skipped(report)["flood.md"]
    assert report["documents_total"] == 1
    max_rss = report["max_rss_mb"]
    assert isinstance(max_rss, int) and max_rss < 600, f"peak memory {max_rss} MB"


# -- files that stop being indexable -----------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason", "cap"),
    [
        ("caf\xe9 swordfish".encode("latin-1"), "not valid UTF-8", ""),
        (b"# A\n\nswordfish\x00\x00", "binary file", ""),
        (b"# A\n\n" + b"swordfish " * 400, "larger than index.max_file_bytes", ""),
        (
            "".join(f"# S{i}\n\nswordfish {i}\n\n" for i in range(9)).encode(),
            "max_chunks_per_file",
            "max_chunks_per_file = 8\nmin_section_tokens = 0\n",
        ),
    ],
    ids=["invalid-utf8", "nul", "over-size-cap", "over-chunk-cap"],
)
def test_a_file_that_becomes_unindexable_leaves_the_index(
    tmp_path: Path, content: bytes, reason: str, cap: str
) -> None:
    config = FAST_CONFIG + "[index]\nmax_file_bytes = 2048\n" + cap
    kb = make_kb(
        tmp_path / "kb", {"a.md": "# A\n\nswordfish\n", "b.md": "# B\n\nbravo\n"}, config=config
    )
    app = open_kb(kb)
    assert any("swordfish" in h.content for h in app.search("swordfish").results)
    (kb / "a.md").write_bytes(content)
    report = app.index()
    why = dict(report.skipped)["a.md"]
    assert reason in why and why.endswith("its earlier version was removed from the index")
    assert report.removed == 1
    assert _indexed(kb) == {"b.md"}
    assert all("swordfish" not in h.content for h in app.search("swordfish").results)


# -- malformed ignore patterns -----------------------------------------------------------


def test_a_malformed_grooveignore_line_is_a_clear_error(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n", ".grooveignore": "# x\n[z-a]\n"})
    result = CliRunner().invoke(build_cli(None), ["index", str(kb)])
    assert result.exit_code == 1
    assert ".grooveignore line 2: glob '[z-a]'" in result.output
    assert "runs backwards" in result.output
    assert "Traceback" not in result.output and str(tmp_path) not in result.output


def test_a_malformed_ignore_pattern_in_the_config_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"index\.ignore.*empty character class"):
        parse_config({"index": {"ignore": ["drafts/**", "[]"]}}, "groove.toml")
