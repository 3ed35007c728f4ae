"""groove over MCP: the server and its tools (the ``groove serve`` command is in the CLI).

- :mod:`~groove_core.mcp.server`: :func:`~groove_core.mcp.server.build_mcp_server`, the
  built-in tools registered on an MCP server for one KB or several, plugin tools added.
- :mod:`~groove_core.mcp.schemas`: the tools' argument limits, descriptions and output models.
- :mod:`~groove_core.mcp.budget`: keeping every response under the size budget.
- :mod:`~groove_core.mcp.tools`: the tools' bodies and their error messages.
- :mod:`~groove_core.mcp.threads`: the worker pool, the shared embedder, plugin tools.
- :mod:`~groove_core.mcp.http`: the streamable HTTP transport and its guards.
- :mod:`~groove_core.mcp.protocol`: the server class: compact schemas, argument errors.
- :mod:`~groove_core.mcp.resources`: documents as resources, prompts, change notifications.
Nothing is imported here: ``groove --help`` imports :mod:`groove_core.cli.serve`, which must
not pull in the MCP SDK.
"""

#: The MCP protocol revisions groove serves, over stdio and streamable HTTP: the
#: handshake ones (``initialize``) and the stateless one. tests/test_mcp_protocol.py drives
#: each with a client speaking exactly it (docs/mcp.md, "Protocol revisions").
PROTOCOL_REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
