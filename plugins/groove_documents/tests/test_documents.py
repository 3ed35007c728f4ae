"""PDF, Word and HTML files written by the test are indexed, searched and served like
notes: hits name the PDF page, headings and tables are kept, and ``plugins list`` names the
loaders with the types they claim."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from groove_documents import plugin
from groove_documents.testing import (
    docx_of_sections,
    image_only_pdf,
    pdf_bytes,
)

from groove_core.app import Groove
from groove_core.cli.get import Target, read_target
from groove_core.config import load_config
from groove_core.plugins import list_plugins
from groove_core.testing import FAST_CONFIG, make_kb, open_kb

SECTIONS = [
    ("Compost", ["Brown and green layers keep a compost heap warm through winter."]),
    ("Crossings", ["A zebra crossing gives pedestrians the right of way."]),
]


def _app(kb: Path, index: bool = True) -> Groove:
    return open_kb(kb, extra_plugins=[("documents", plugin)], entry_points=False, index=index)


def test_a_pdf_hit_names_its_page_and_get_serves_that_page(tmp_path: Path) -> None:
    pages = [
        ["Chapter one is about the garden shed and its tools."],
        ["Lichens grow slowly on the north side of old stones."],
        ["The last page lists the sources."],
    ]
    kb = make_kb(tmp_path / "kb", {"note.md": "# Note\n\nshed keys\n"})
    (kb / "field-guide.pdf").write_bytes(pdf_bytes(pages, title="Field guide"))
    app = _app(kb)
    hit = app.search("lichens on stones", limit=1).results[0]
    assert hit.path == "field-guide.pdf"
    assert hit.heading_path[-1] == "Page 2"
    page = read_target(app, Target(path="field-guide.pdf#page=2"), 0)
    assert page["content"] == (
        "## Page 2\n\nLichens grow slowly on the north side of old stones.\n\n"
    )
    whole = read_target(app, Target(path="field-guide.pdf"), 0)
    assert whole["title"] == "Field guide" and whole["indexed"]
    assert not whole["changed_since_index"]


def test_docx_keeps_headings_lists_and_tables(tmp_path: Path) -> None:
    table = [["Plant", "Water"], ["Fern", "weekly"], ["Cactus", "monthly"]]
    kb = make_kb(tmp_path / "kb", {})
    (kb / "care.docx").write_bytes(docx_of_sections("Plant care", SECTIONS, table))
    app = _app(kb)
    text = read_target(app, Target(path="care.docx"), 0)["content"]
    assert text.startswith("# Plant care\n\n## Compost\n\nBrown and green layers")
    assert "| Plant | Water |\n| --- | --- |\n| Fern | weekly |" in text
    hit = app.search("zebra crossing pedestrians", limit=1).results[0]
    assert (hit.path, hit.heading_path) == ("care.docx", ("Plant care", "Crossings"))
    cactus = app.search("Cactus monthly", limit=1).results[0]
    assert cactus.path == "care.docx" and "| Cactus | monthly |" in cactus.content


def test_html_keeps_headings_tables_and_links_and_drops_scripts(tmp_path: Path) -> None:
    page = (
        "<html><head><title>Ignored: the h1 names it</title><script>var secret = 1;</script>"
        "</head><body><nav><a href='guide.md'>the guide</a></nav>"
        "<h1>Shed manual</h1><h2 id='tools'>Tools &amp; keys</h2><p>The spare key hangs "
        "<b>behind</b> the door.<br>Second line.</p><ul><li>rake<li>hoe</ul>"
        "<table><tr><th>Tool</th><th>Place</th></tr><tr><td>Rake</td><td>wall</td></tr>"
        "</table><pre>code  kept\n  as is</pre></body></html>"
    )
    kb = make_kb(tmp_path / "kb", {"guide.md": "# Guide\n\ntext\n"})
    (kb / "shed.html").write_text(page, encoding="utf-8")
    app = _app(kb)
    text = read_target(app, Target(path="shed.html"), 0)["content"]
    assert text == (
        "[the guide](guide.md)\n\n# Shed manual\n\n## Tools & keys\n\n"
        "The spare key hangs behind the door.\nSecond line.\n\n- rake\n\n- hoe\n\n"
        "| Tool | Place |\n| --- | --- |\n| Rake | wall |\n\n```\ncode  kept\n  as is\n```\n"
    )
    assert "secret" not in text
    section = read_target(app, Target(path="shed.html#tools"), 0)["content"]
    assert section.startswith("## Tools & keys") and "Shed manual" not in section
    links = app.store.links_of("shed.html", 10)
    assert links is not None and [link.path for link in links.outgoing] == ["guide.md"]


def test_a_pdf_without_a_text_layer_is_reported_as_such(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {"note.md": "# Note\n\ntext\n"})
    (kb / "scan.pdf").write_bytes(image_only_pdf())
    report = _app(kb, index=False).index()
    assert dict(report.skipped) == {
        "scan.pdf": "PDF has no text layer (scanned or image-only? OCR is not supported)"
    }


def test_the_types_read_are_a_setting(tmp_path: Path) -> None:
    kb = make_kb(
        tmp_path / "kb", {}, config=FAST_CONFIG + '\n[plugin.documents]\ntypes = ["html"]\n'
    )
    (kb / "a.html").write_text("<p>alpha</p>", encoding="utf-8")
    (kb / "b.pdf").write_bytes(pdf_bytes([["bravo"]]))
    app = _app(kb)
    assert [d.path for d in app.store.documents()] == ["a.html"]


def test_plugins_list_shows_each_loader_and_its_types(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", {})
    infos, problem = list_plugins(load_config(kb), extra=[("documents", plugin)])
    assert problem is None
    row = next(i for i in infos if i.name == "documents")
    assert row.loaders == ("pdf/1: .pdf", "docx/2: .docx", "html/2: .html, .htm")
    assert row.hooks == ("groove_config_sections", "groove_loaders")


def test_the_libraries_load_only_when_a_file_needs_them(tmp_path: Path) -> None:
    # A fresh process: the plugin set is built, the walk claims the types, and neither
    # library is imported until a file of its type is read.
    probe = (
        "import sys\n"
        "from groove_core.config import GrooveConfig\n"
        "from groove_core.plugins import make_plugin_manager\n"
        "from groove_documents import plugin\n"
        "table = make_plugin_manager(GrooveConfig(), extra=[('documents', plugin)]).loaders()\n"
        "assert table.claims('a.pdf') and table.claims('b.docx')\n"
        "print(sorted({'pypdf', 'docx', 'lxml'} & set(sys.modules)))\n"
        "table.load('c.html', b'<p>x</p>')\n"
        "print(sorted({'pypdf', 'docx', 'lxml'} & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert done.stdout.splitlines() == ["[]", "[]"]


def test_the_core_install_pulls_none_of_the_document_libraries() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[3]
    core = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    required = " ".join(core["dependencies"]).lower()
    mine = tomllib.loads(
        (root / "plugins" / "groove_documents" / "pyproject.toml").read_text(encoding="utf-8")
    )["project"]
    libraries = [d.split(">")[0].split("=")[0].strip().lower() for d in mine["dependencies"]]
    libraries += ["reportlab"]
    assert [lib for lib in libraries if lib != "groove-core" and lib in required] == []
    assert {"pypdf", "python-docx"} <= set(libraries)
