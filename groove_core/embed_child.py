"""The child process of :mod:`groove_core.embed_worker`: ``python -m groove_core.embed_child FD``.

It builds the embedder from the configuration the parent sends, with the installed plugins
(as ``groove`` itself would), and answers batches over the socket ``FD`` until the parent
closes it. Kept apart from :mod:`groove_core.embed_worker`, which the indexer imports, so
that the indexer does not depend on the plugin manager.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Any

from groove_core.embed_worker import serve

if TYPE_CHECKING:
    from groove_core.config import GrooveConfig


def installed_embedder(config: GrooveConfig) -> Any:
    """The embedder ``[embedder] name`` names, from the built-in and installed plugins."""
    from groove_core.plugins import make_plugin_manager

    return make_plugin_manager(config).make_embedder()


def main(argv: list[str]) -> int:
    from multiprocessing.connection import Connection

    # The parent ends the child by closing the socket; an interrupt is the parent's.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(int(argv[1]))
    try:
        serve(conn, installed_embedder)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent went away mid-answer
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
