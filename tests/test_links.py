"""Links between notes: recorded at index time, resolved when read, served by get_document,
the ``related`` MCP tool and ``groove links``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from groove_core.cli import build_cli
from groove_core.mcp.server import build_mcp_server
from groove_core.sqlite.store import check_consistency
from groove_core.testing import call_tools, make_kb, open_kb
from tests.test_mcp_server import error_text, ok

VAULT = {
    "index.md": "# Home\n\nStart at [the guide](guide/intro.md) or [[Idea]].\n",
    "guide/intro.md": (
        "# Intro\n\nSee [setup](./setup.md#install), [home](/), [web](https://example.com),\n"
        "[missing](nope.md), [[Idea|an idea]] and ![[diagram.png]].\n\n"
        "```\n[[not a link]] [nor](this.md)\n```\n"
    ),
    "guide/setup.md": "# Setup\n\nBack to [intro](intro) and [[intro]].\n",
    "notes/Idea.md": "# Idea\n\nAn idea linked from [[index]].\n",
}


def _kb(tmp_path: Path) -> Path:
    return make_kb(tmp_path / "kb", VAULT)


def test_outgoing_links_resolve_to_kb_paths(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    found = app.store.links_of("guide/intro.md", 100)
    assert found is not None
    out = [(link.kind, link.target, link.path, link.line) for link in found.outgoing]
    assert out == [
        ("link", "./setup.md#install", "guide/setup.md", 3),
        ("link", "/", "index.md", 3),
        ("link", "nope.md", None, 4),
        ("wikilink", "Idea", "notes/Idea.md", 4),
        ("embed", "diagram.png", None, 4),
    ]
    assert found.outgoing_total == 5


def test_backlinks_list_every_document_linking_in(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    found = app.store.links_of("guide/intro.md", 100)
    assert found is not None
    back = [(b.path, b.kind, b.line) for b in found.backlinks]
    assert back == [
        ("guide/setup.md", "link", 3),
        ("guide/setup.md", "wikilink", 3),
        ("index.md", "link", 3),
    ]
    idea = app.store.links_of("notes/Idea.md", 1)
    assert idea is not None
    assert idea.backlinks_total == 2 and len(idea.backlinks) == 1


def test_links_follow_their_document_through_changes_and_deletes(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    app = open_kb(kb)
    (kb / "guide/setup.md").write_text("# Setup\n\nNo links any more.\n")
    (kb / "index.md").unlink()
    app.index()
    found = app.store.links_of("guide/intro.md", 100)
    assert found is not None and found.backlinks == ()
    # The link to the deleted home page is now unresolved, not gone.
    assert [link.path for link in found.outgoing][1] is None
    assert check_consistency(app.store).ok


def test_doctor_reports_links_of_a_vanished_document(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    app = open_kb(kb)
    index_file = app.index_file
    app.store.close()
    conn = sqlite3.connect(index_file)
    conn.execute("INSERT INTO links VALUES (9999, 0, 'link', 'x.md', 'x', 1)")
    conn.commit()
    conn.close()
    app = open_kb(kb, index=False)
    found = check_consistency(app.store)
    assert found.link_orphans == {9999} and not found.ok


def test_related_tool_and_get_document_links(tmp_path: Path) -> None:
    server = build_mcp_server(open_kb(_kb(tmp_path)))
    related, document, small, missing, hostile = call_tools(
        server,
        ("related", {"path": "guide/intro.md"}),
        ("get_document", {"path": "guide/intro.md"}),
        ("related", {"path": "guide/intro.md", "limit": 1}),
        ("related", {"path": "nope.md"}),
        ("related", {"path": "../etc/passwd.md"}),
    )
    payload = ok(related)
    assert payload["path"] == "guide/intro.md" and payload["title"] == "Intro"
    assert payload["outgoing_total"] == 5 and len(payload["outgoing"]) == 5
    assert {b["path"] for b in payload["backlinks"]} == {"guide/setup.md", "index.md"}
    assert payload["truncated"] is False
    links = ok(document)["links"]
    assert links["outgoing"][0]["path"] == "guide/setup.md"
    assert len(ok(small)["outgoing"]) == 1
    assert "no file" in error_text(missing)
    assert ".." in error_text(hostile)
    [over] = call_tools(server, ("related", {"path": "index.md", "limit": 10**6}))
    assert over.is_error


def test_related_stays_under_the_response_budget(tmp_path: Path) -> None:
    many = "# Hub\n\n" + "".join(f"[n{i}](notes/n{i}.md)\n" for i in range(400))
    kb = make_kb(tmp_path / "kb", {"hub.md": many})
    server = build_mcp_server(open_kb(kb), max_response_chars=4000)
    [result] = call_tools(server, ("related", {"path": "hub.md", "limit": 500}))
    payload = ok(result)
    assert len(json.dumps(payload, ensure_ascii=False, separators=(",", ":"))) <= 4000
    assert payload["truncated"] is True and payload["outgoing_total"] == 400
    assert 0 < len(payload["outgoing"]) < 400


def test_groove_links_command(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    open_kb(kb).store.close()
    runner = CliRunner()
    human = runner.invoke(build_cli(None), ["links", "notes/Idea.md", "--kb", str(kb)])
    assert human.exit_code == 0, human.output
    assert "links from notes/Idea.md (1):" in human.output
    assert "index -> index.md" in human.output
    assert "backlinks to notes/Idea.md (2):" in human.output
    as_json = runner.invoke(build_cli(None), ["links", "index.md", "--kb", str(kb), "--json"])
    assert json.loads(as_json.output)["outgoing"][0]["path"] == "guide/intro.md"
    bad = runner.invoke(build_cli(None), ["links", "../x.md", "--kb", str(kb)])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    assert "'..'" in bad.output
