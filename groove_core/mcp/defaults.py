"""Defaults of the MCP server that ``groove serve`` shows in its help: standard library
only, so that ``groove --help`` does not load the server to print them."""

#: Worker threads of the server, each with its own index connection. SQLite releases the
#: GIL while a statement runs and numpy while it multiplies, so on a 2-core machine a few
#: searches really do run at once; more workers than that only queue inside the process.
#: Two, not more, by default: each connection of an index over 5,000 chunks keeps its own
#: in-memory vector matrix (about 216 MiB at 100k chunks), not yet shared between them.
DEFAULT_READERS = 2
