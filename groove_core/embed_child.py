"""The child process of :mod:`groove_core.embed_worker`: ``python -m groove_core.embed_child FD``.

It builds the embedder from the configuration the parent sends, with the installed plugins
(as ``groove`` itself would), and answers batches over the socket ``FD`` until the parent
closes it. Kept apart from :mod:`groove_core.embed_worker`, which the indexer imports, so
that the indexer does not depend on the plugin manager.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from groove_core.embed_worker import serve

if TYPE_CHECKING:
    from groove_core.config import GrooveConfig


def installed_embedder(config: GrooveConfig) -> Any:
    """The embedder ``[embedder] name`` names, from the built-in and installed plugins."""
    from groove_core.plugins import make_plugin_manager

    return make_plugin_manager(config).make_embedder()


def _leave_with(parent: int) -> None:
    """Exit once the parent is gone, even in the middle of a batch (a stuck model, or a long
    one): a parent killed outright closes the socket, which a child busy embedding would
    only notice after its batch."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def main(argv: list[str]) -> int:
    from multiprocessing.connection import Connection

    # The parent ends the child by closing the socket; an interrupt is the parent process's.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch = threading.Thread(target=_leave_with, args=(os.getppid(),), daemon=True)
    watch.start()
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
