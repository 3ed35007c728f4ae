"""The one base of the errors a user can fix.

Every front-end (the command line, the MCP tools) shows such an error as its message alone,
one line and no traceback: the message names what is wrong and how to fix it. Standard
library only, so that every module can derive from it without weight.
"""

from __future__ import annotations


class GrooveError(Exception):
    """A problem the user can fix (configuration, index, query, file asked for); the message
    is the whole story."""
