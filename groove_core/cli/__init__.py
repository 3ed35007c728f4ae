"""The ``groove`` command line: every command module, the options they share and the one
way they report errors (``groove_core.cli.common``).

``groove_core.cli:main`` is the console script. It first offers ``search``, ``get`` and
``status`` to a running server that holds the KB (:mod:`groove_core.cli.warm`: the
standard library only, so that answer costs next to nothing); only then is the command
line built (click and the light registry: ``groove --help`` must stay fast too).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["build_cli", "main"]


def main(argv: list[str] | None = None) -> None:
    # The console script and ``python -m groove_core`` fetch this before anything imports
    # the submodule of the same name (which then takes the name on the package).
    from groove_core.cli.warm import forward

    code = forward(sys.argv[1:] if argv is None else argv)
    if code is not None:
        sys.exit(code)
    from groove_core.cli.main import main as run

    run(argv)


def __getattr__(name: str) -> Any:
    if name == "build_cli":
        from groove_core.cli.main import build_cli

        return build_cli
    raise AttributeError(name)
