"""Comments a writer hid are served nowhere (issue #44, item 1): Obsidian ``%% comments %%``
and HTML / MDX comments are left out of the index and, with their line breaks kept, out of
``groove get``, MCP ``get_document`` (whole, by lines, by chunk) and ``resources/read``,
unless ``[index] serve_comments = true``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groove_core.cli import build_cli
from groove_core.config import ConfigError
from groove_core.mcp.resources import document_uri
from groove_core.mcp.server import build_mcp_server
from groove_core.testing import FAST_CONFIG, call_tools, drive_mcp, make_kb, open_kb

NOTE = (
    "---\ntitle: Plans\n---\n"  # 1-3
    "# Plans\n"  # 4
    "\n"  # 5
    "Public roadmap for the garden. %% my salary is 1234 %% Spring first.\n"  # 6
    "\n"  # 7
    "%%\nprivate block: the landlord is unpleasant\n%%\n"  # 8-10
    "<!-- draft: do not publish the budget -->\n"  # 11
    "\n"  # 12
    "## Tools\n"  # 13
    "\n"  # 14
    "```\nliteral %% kept %% and <!-- kept -->\n```\n"  # 15-17
    "Rakes and hoes.\n"  # 18
)
SECRETS = ("1234", "landlord", "budget")


def _kb(tmp_path: Path, extra: str = "") -> Path:
    kb = make_kb(tmp_path / "vault", {"plans.md": NOTE}, config=FAST_CONFIG + extra)
    (kb / ".obsidian").mkdir()
    return kb


def _served(kb: Path) -> dict[str, str]:
    """The note as each surface serves it: CLI get (whole, by chunk), MCP get_document
    (whole, lines, by chunk) and resources/read."""
    app = open_kb(kb)
    hit = app.search("rakes hoes", limit=1).results[0]
    cli = build_cli(None)
    runner = CliRunner()

    def get(*args: str) -> str:
        result = runner.invoke(cli, ["get", *args, "--kb", str(kb), "--json"])
        assert result.exit_code == 0, result.output
        return str(json.loads(result.output)["content"])

    server = build_mcp_server(app)
    whole, lines, chunk = call_tools(
        server,
        ("get_document", {"path": "plans.md"}),
        ("get_document", {"path": "plans.md", "start_line": 6, "end_line": 11}),
        ("get_document", {"path": "plans.md", "chunk_id": hit.chunk_id, "neighbours": 1}),
    )

    async def read(client: Any) -> Any:
        return await client.read_resource(document_uri(kb.name, "plans.md"))

    [resource] = drive_mcp(build_mcp_server(app), read).contents
    return {
        "cli get": get("plans.md"),
        "cli get chunk": get(f"#{hit.chunk_id}"),
        "mcp whole": whole.structured_content["content"],
        "mcp lines": lines.structured_content["content"],
        "mcp chunk": chunk.structured_content["content"],
        "resource": resource.text,
    }


def test_comments_are_served_nowhere_and_lines_keep_their_numbers(tmp_path: Path) -> None:
    served = _served(_kb(tmp_path))
    for surface, text in served.items():
        for secret in SECRETS:
            assert secret not in text, f"{surface} serves {secret!r}"
    whole = served["mcp whole"].splitlines()
    original = NOTE.splitlines()
    assert len(whole) == len(original)  # the comments' line breaks are kept
    assert whole[5] == "Public roadmap for the garden.  Spring first."
    assert whole[7:11] == ["", "", "", ""]
    assert whole[12:] == original[12:]  # headings, code (its %% and <!-- as written)
    assert served["mcp lines"].splitlines() == whole[5:11]


def test_the_index_never_held_them(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    for secret in SECRETS:
        found = app.search(secret, limit=5).results
        assert not [h for h in found if {"fts", "word"} & set(h.legs)], secret


def test_serve_comments_serves_the_file_as_written(tmp_path: Path) -> None:
    served = _served(_kb(tmp_path, "[index]\nserve_comments = true\n"))
    assert served["mcp whole"] == NOTE
    assert served["resource"] == NOTE
    assert all(s in served["cli get"] for s in SECRETS)


def test_commonmark_serves_what_it_indexes(tmp_path: Path) -> None:
    """commonmark cleans nothing: its comments are indexed, so they are served too."""
    kb = _kb(tmp_path, '[index]\ndialect = "commonmark"\n')
    served = _served(kb)
    assert served["mcp whole"] == NOTE


def test_serve_comments_takes_a_boolean_only(tmp_path: Path) -> None:
    kb = _kb(tmp_path, '[index]\nserve_comments = "yes"\n')
    with pytest.raises(ConfigError, match="serve_comments"):
        open_kb(kb)


PRIVATE = (
    "---\n"  # 1
    "title: Budget\n"  # 2
    "Salary: 9876\n"  # 3
    "contact:\n"  # 4
    "  - phone: 555-0199\n"  # 5
    "tags: [money]\n"  # 6
    "---\n"  # 7
    "# Budget\n\nThe household budget for the year.\n"  # 8-10
)


def test_private_front_matter_keys_are_neither_indexed_nor_served(tmp_path: Path) -> None:
    """``[index] private_keys`` (any case): the keys' lines are blank wherever the note is
    served, and nothing of them reaches the index (issue #44, item 1)."""
    config = FAST_CONFIG + '[index]\nprivate_keys = ["salary", "Contact", "tags"]\n'
    kb = make_kb(tmp_path / "kb", {"budget.md": PRIVATE}, config=config)
    app = open_kb(kb)
    [doc] = call_tools(build_mcp_server(app), ("get_document", {"path": "budget.md"}))
    served = doc.structured_content["content"].splitlines()
    assert served[:7] == ["---", "title: Budget", "", "", "", "", "---"]
    assert served[7:] == PRIVATE.splitlines()[7:]
    assert doc.structured_content["tags"] == []  # a private key is not read at all
    assert doc.structured_content["title"] == "Budget"
    for secret in ("9876", "555-0199"):
        found = app.search(secret, limit=3).results
        assert not [h for h in found if {"fts", "word"} & set(h.legs)], secret
