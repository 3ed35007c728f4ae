"""The ``groove`` command line: every command module, the options they share and the one
way they report errors (``groove_core.cli.common``).

``groove_core.cli:main`` is the console script. Only click and the light registry load when
this package is imported: ``groove --help`` builds every command and must stay fast.
"""

from groove_core.cli.main import build_cli, main

__all__ = ["build_cli", "main"]
