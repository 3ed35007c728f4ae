"""Which HTML parser for the HTML loader (issue #46): each candidate's speed on a folder of
real pages, and its time on hostile inputs (markup that never closes; the formatting
elements that HTML's tree-building rules reopen; deep nesting).

    python plugins/groove_documents/bench_html_parsers.py FOLDER_OF_PAGES

Candidates not installed are skipped: ``pip install selectolax html5-parser`` (html5-parser
also needs lxml built from source against the system's libxml2: ``pip install --no-binary
lxml lxml``; it refuses the lxml wheel python-docx pulls). CPU seconds, best of two; a
hostile input runs in a process of its own, given up on past 30 s ("-").

- ``stdlib``: ``html.parser`` fed the page and closed, as the loader did before #46.
- ``groove``: the HTML loader (``html.parser`` fed once, never closed on open markup), the
  page turned into Markdown (the others only parse, or parse and walk the tree).
- ``lxml``: libxml2's HTML parser, events to a Python target (what a converter would use).
- ``selectolax``: lexbor, a tree walked node by node. ``html5-parser``: gumbo, to a tree.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import time
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

from groove_documents import plugin

from groove_core.config import GrooveConfig
from groove_core.plugins import make_plugin_manager


class _Null(HTMLParser):
    def handle_starttag(self, tag: str, attrs: object) -> None:
        pass


def _stdlib(text: str) -> None:
    parser = _Null(convert_charrefs=True)
    parser.feed(text)
    parser.close()


_TABLE = make_plugin_manager(GrooveConfig(), extra=[("documents", plugin)]).loaders()


def _groove(text: str) -> None:
    with contextlib.suppress(Exception):
        _TABLE.load("page.html", text.encode("utf-8", "replace"))


def _candidates(quiet: bool = False) -> dict[str, Callable[[str], object]]:
    found: dict[str, Callable[[str], object]] = {"stdlib": _stdlib, "groove": _groove}
    try:
        from lxml import etree

        class Target:
            def start(self, tag: str, attrib: object) -> None:
                pass

            def end(self, tag: str) -> None:
                pass

            def data(self, data: str) -> None:
                pass

            def close(self) -> None:
                pass

        def lxml(text: str) -> None:
            parser = etree.HTMLParser(target=Target(), huge_tree=True, encoding="utf-8")
            parser.feed(text.encode("utf-8", "replace") or b" ")
            parser.close()

        found["lxml"] = lxml
    except ImportError:
        pass
    try:
        from selectolax.lexbor import LexborHTMLParser

        def selectolax(text: str) -> None:
            for _ in LexborHTMLParser(text).root.traverse(include_text=True):
                pass

        found["selectolax"] = selectolax
    except ImportError:
        pass
    try:
        import html5_parser

        found["html5-parser"] = html5_parser.parse
    except (ImportError, RuntimeError) as err:
        if not quiet:
            print(f"html5-parser: not measured ({str(err)[:80]})")
    return found


def _seconds(parse: Callable[[str], object], texts: list[str], limit: float = 30.0) -> float:
    started = time.process_time()
    for text in texts:
        parse(text)
        if time.process_time() - started > limit:
            return float("inf")
    return time.process_time() - started


def _hostile_seconds(parser: str, label: str, n: int, limit: float = 30.0) -> float:
    """CPU seconds of one parser on one hostile input, in a child process (forked) killed
    past ``limit``: inf then."""

    def child(out: multiprocessing.Queue[float]) -> None:
        parse = _candidates(quiet=True)[parser]
        out.put(_seconds(parse, [HOSTILE[label][0](n)], limit=float("inf")))

    out: multiprocessing.Queue[float] = multiprocessing.Queue()
    worker = multiprocessing.get_context("fork").Process(target=child, args=(out,))
    worker.start()
    worker.join(limit * 1.5)
    if worker.is_alive():
        worker.kill()
        worker.join()
        return float("inf")
    spent = out.get()
    return spent if spent <= limit else float("inf")


HOSTILE: dict[str, tuple[Callable[[int], str], tuple[int, ...]]] = {
    **{
        f"{opener!r} to the end (bytes)": (
            lambda n, o=opener: "<html><body><p>x</p>" + o * (n // len(o)),
            (200_000, 400_000, 8_000_000),
        )
        for opener in ("<a", "<!", "</", "<?", "<![CDATA[")
    },
    "<b n> x n, <i n> x n, x</b> x n": (
        lambda n: (
            "".join(f"<b {i}>" for i in range(n))
            + "".join(f"<i {i}>" for i in range(n))
            + "x</b>" * n
        ),
        (1000, 2000, 4000),
    ),
    "<div> nested n deep": (lambda n: "<div>" * n + "x" + "</div>" * n, (25_000, 50_000, 100_000)),
}


def main() -> None:
    folder = Path(sys.argv[1])
    texts = []
    for page in sorted(folder.iterdir()):
        data = page.read_bytes()
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(data.decode("cp1252", errors="replace"))
    size = sum(len(t.encode("utf-8", "replace")) for t in texts) / 1e6
    parsers = _candidates()
    print(f"{len(texts)} pages, {size:.1f} MB")
    for name, parse in parsers.items():
        spent = min(_seconds(parse, texts, limit=600) for _ in range(2))
        print(f"  {name:14s} {spent:6.2f} s  {size / spent:6.1f} MB/s")
    for label, (_, sizes) in HOSTILE.items():
        print(f"{label} at {', '.join(map(str, sizes))}")
        for name in parsers:
            row = []
            for n in sizes:
                row.append(_hostile_seconds(name, label, n))
                if row[-1] == float("inf"):
                    break
            shown = " ".join("     -" if s == float("inf") else f"{s:6.2f}" for s in row)
            print(f"  {name:14s} {shown}")


if __name__ == "__main__":
    main()
