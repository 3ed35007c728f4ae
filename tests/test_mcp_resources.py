"""The served KBs' documents as MCP resources, the prompts, and change notifications while
``serve --watch`` re-indexes (issue #30), with the SDK's real client."""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

import groove_core.mcp.resources as resources
from groove_core.mcp.resources import WatchBus, change_events, document_uri
from groove_core.mcp.server import build_mcp_server
from groove_core.multi_kb import NamedKb
from groove_core.testing import drive_mcp, make_kb, open_kb
from groove_core.watch import Watcher

CONFIG = '[embedder]\nname = "hashing"\n[index]\nignore = ["private/**"]\n'
FILES = {
    "a.md": "# Alpha\n\nfirst note\n",
    "b.md": "# Beta\n\nsecond note\n",
    "日本語/メモ.md": "# メモ\n\n日本語のノート\n",
    "notes/c.md": "# Gamma\n\n" + "".join(f"line {i} of a long note\n" for i in range(400)),
    "private/secret.md": "# Secret\n\nnot served\n",
}


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    path = make_kb(tmp_path / "notes", FILES, config=CONFIG)
    open_kb(path)
    return path


def _all_pages(client: Client) -> Any:
    async def pages() -> tuple[list[Any], int]:
        listed, cursor, count = [], None, 0
        while True:
            page = await client.list_resources(cursor=cursor)
            listed += page.resources
            count += 1
            cursor = page.next_cursor
            if cursor is None:
                return listed, count

    return pages()


def test_documents_are_listed_in_pages_and_read_by_uri(
    kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "PAGE_SIZE", 2)

    async def scenario(client: Client) -> Any:
        listed, pages = await _all_pages(client)
        templates = (await client.list_resource_templates()).resource_templates
        read = await client.read_resource(document_uri("notes", "日本語/メモ.md"))
        return listed, pages, templates, read

    listed, pages, templates, read = drive_mcp(build_mcp_server(open_kb(kb)), scenario)
    assert [r.name for r in listed] == ["a.md", "b.md", "notes/c.md", "日本語/メモ.md"]
    assert pages == 2
    assert listed[0].uri == "groove://notes/a.md" and listed[0].title == "Alpha"
    assert listed[3].uri == "groove://notes/%E6%97%A5%E6%9C%AC%E8%AA%9E/%E3%83%A1%E3%83%A2.md"
    assert {r.mime_type for r in listed} == {"text/markdown"}
    assert [t.uri_template for t in templates] == ["groove://notes/{+path}"]
    [content] = read.contents
    assert content.text == FILES["日本語/メモ.md"]


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("groove://notes/../outside.md", ".."),
        ("groove://notes/%2E%2E/%2E%2E/etc/passwd", ".."),
        ("groove://notes/private/secret.md", "ignore"),
        ("groove://notes/missing.md", "missing.md"),
        ("groove://other/a.md", "no knowledge base 'other' is served ('notes')"),
        ("file:///etc/passwd", "file:///etc/passwd"),
    ],
)
def test_reading_is_confined_like_get_document(kb: Path, uri: str, message: str) -> None:
    async def scenario(client: Client) -> str:
        with pytest.raises(MCPError) as caught:
            await client.read_resource(uri)
        return str(caught.value)

    text = drive_mcp(build_mcp_server(open_kb(kb)), scenario)
    assert message in text, text
    assert str(kb) not in text  # never the server's folders


def test_a_long_document_is_cut_at_a_line_within_the_budget(kb: Path) -> None:
    budget = 2_000

    async def scenario(client: Client) -> Any:
        return await client.read_resource(document_uri("notes", "notes/c.md"))

    server = build_mcp_server(open_kb(kb), max_response_chars=budget)
    [content] = drive_mcp(server, scenario).contents
    assert len(content.text) <= budget
    body, _, last = content.text.rstrip("\n").rpartition("\n")
    assert body.endswith("\n") and FILES["notes/c.md"].startswith(body)
    assert "left out to fit the response size budget" in last
    following = body.count("\n") + 1
    assert f"get_document(path='notes/c.md', start_line={following})" in last


def test_a_bad_cursor_is_refused(kb: Path) -> None:
    async def scenario(client: Client) -> str:
        with pytest.raises(MCPError) as caught:
            await client.list_resources(cursor="not-a-cursor")
        return str(caught.value)

    assert "invalid cursor" in drive_mcp(build_mcp_server(open_kb(kb)), scenario)


def test_paging_goes_on_from_the_last_path_listed(
    kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents added or removed between two pages shift nothing: the cursor holds the
    last path listed, not a count. Across several KBs, each in turn."""
    monkeypatch.setattr(resources, "PAGE_SIZE", 2)
    other = make_kb(tmp_path / "handbook", {"x.md": "# X\n\nx\n", "y.md": "# Y\n\ny\n"},
                    config=CONFIG)  # fmt: skip
    notes = open_kb(kb)
    source = resources.DocumentSource(
        [NamedKb("notes", notes), NamedKb("handbook", open_kb(other))], pool=None, budget=1000
    )  # type: ignore[arg-type]
    first, cursor = source._page(*resources._position(None, 2))
    assert [r.name for r in first] == ["a.md", "b.md"]
    (kb / "0-new.md").write_text("# New\n\nnew\n", encoding="utf-8")  # before the cursor
    (kb / "a.md").unlink()
    notes.index()
    second, cursor = source._page(*resources._position(cursor, 2))
    assert [r.name for r in second] == ["notes/c.md", "日本語/メモ.md"]
    assert cursor is not None  # the next KB follows
    third, cursor = source._page(*resources._position(cursor, 2))
    assert [r.uri for r in third] == ["groove://handbook/x.md", "groove://handbook/y.md"]
    assert cursor is None


@pytest.mark.parametrize(
    "cursor",
    [
        resources._cursor(5, None),  # a KB not served
        resources._cursor(-1, "a.md"),
        "W1swLCAxXV0=",  # [[0, 1]]
        resources._cursor(0, "x" * 20_000),  # longer than any path
        base64.urlsafe_b64encode(b"[" * 5000).decode(),  # nested too deep
        base64.urlsafe_b64encode(b'[0, "\\ud800"]').decode(),  # a lone surrogate
        resources._cursor(0, "a\x00b"),  # a NUL no database takes
    ],
)
def test_a_forged_cursor_is_refused(cursor: str) -> None:
    with pytest.raises(resources.ResourceError, match="invalid cursor"):
        resources._position(cursor, 1)


def test_several_kbs_list_and_read_each_under_its_name(kb: Path, tmp_path: Path) -> None:
    other = make_kb(tmp_path / "handbook", {"a.md": "# Handbook A\n\nother text\n"}, config=CONFIG)
    kbs = [NamedKb("notes", open_kb(kb)), NamedKb("handbook", open_kb(other))]

    async def scenario(client: Client) -> Any:
        listed, _ = await _all_pages(client)
        read = await client.read_resource("groove://handbook/a.md")
        return listed, read

    listed, read = drive_mcp(build_mcp_server(kbs), scenario)
    uris = [r.uri for r in listed]
    assert "groove://notes/a.md" in uris and "groove://handbook/a.md" in uris
    assert read.contents[0].text == "# Handbook A\n\nother text\n"


def test_prompts_guide_an_agent_to_the_tools(kb: Path) -> None:
    async def scenario(client: Client) -> Any:
        names = [p.name for p in (await client.list_prompts()).prompts]
        got = await client.get_prompt("answer_from_notes", {"question": "何を書いた？"})
        return names, got

    names, got = drive_mcp(build_mcp_server(open_kb(kb)), scenario)
    assert names == ["answer_from_notes", "explore_topic"]
    text = got.messages[0].content.text
    assert "何を書いた？" in text and "`search`" in text and "cite" in text


def test_change_events_name_each_document_and_a_changed_list() -> None:
    events = change_events("notes", ["new.md"], ["a.md"], [])
    assert events == [
        ResourceUpdated(uri="groove://notes/a.md"),
        ResourceUpdated(uri="groove://notes/new.md"),
        ResourcesListChanged(),
    ]
    assert change_events("notes", [], ["a.md"], []) == [ResourceUpdated("groove://notes/a.md")]


def test_a_watched_edit_reaches_a_listening_client(kb: Path) -> None:
    """The whole path: the watcher re-indexes an edit on its thread, the server tells the
    client listening for that document (2026-07-28 subscriptions/listen)."""
    bus = WatchBus()
    app = open_kb(kb)
    server = build_mcp_server(app, bus=bus)
    heard: list[Any] = []
    watcher = Watcher(
        app,
        interval=0.1,
        debounce=0.1,
        on_changes=lambda a, m, r: bus.publish_from_thread(change_events("notes", a, m, r)),
    )
    uri = document_uri("notes", "a.md")

    async def scenario(client: Client) -> Any:
        async with client.listen(resource_subscriptions=[uri], resources_list_changed=True) as sub:
            thread = threading.Thread(target=watcher.run, daemon=True)
            thread.start()
            while watcher.runs < 1:  # the catch-up run: nothing changed, nothing said
                await anyio.sleep(0.05)
            (kb / "a.md").write_text("# Alpha\n\nedited note\n", encoding="utf-8")
            (kb / "d.md").write_text("# Delta\n\nnew note\n", encoding="utf-8")
            with anyio.fail_after(30):
                async for event in sub:
                    heard.append(event)
                    if len(heard) == 2:
                        break
            watcher.stop.set()
            return await client.read_resource(uri)

    read = drive_mcp(server, scenario)
    # Only what the client asked for: a.md (not d.md's own update), and the list change.
    assert heard == [ResourceUpdated(uri=uri), ResourcesListChanged()]
    assert read.contents[0].text == "# Alpha\n\nedited note\n"


def test_index_status_shows_a_running_re_index(kb: Path) -> None:
    app = open_kb(kb)
    seen: list[str | None] = []
    watcher = Watcher(app)
    original = watcher._on_progress

    def spy(event: Any) -> None:
        original(event)
        seen.append(watcher.progress())

    watcher._on_progress = spy  # type: ignore[method-assign]
    (kb / "e.md").write_text("# Epsilon\n\nanother note\n", encoding="utf-8")
    watcher._reindex()
    assert seen and all(line and line.startswith(("indexing", "embedding")) for line in seen)
    assert watcher.progress() is None  # idle again
    server = build_mcp_server(app, activity={"notes": lambda: "indexing 42% | 3 chunks"})

    async def scenario(client: Client) -> Any:
        return (await client.call_tool("index_status", {})).structured_content

    assert drive_mcp(server, scenario)["indexing"] == "indexing 42% | 3 chunks"
