"""The MCP server class: the SDK's ``MCPServer`` with groove's wire manners.

- ``tools/list`` carries compact schemas: no generated titles, an optional argument is its
  type (absent means the default; ``null`` is still accepted), a nullable output field is
  one ``type`` list. A model reads every byte of the list on every turn.
- An argument error is said in groove's words, naming the argument and what it must be,
  never pydantic's report with its documentation links; an argument the tool does not
  take is refused, with why where the server knows (a plugin's option it cannot use).
- ``resources/list`` pages through the served KBs' documents, ``resources/read`` reads
  one (:mod:`groove_core.mcp.resources`).
- A prompt asked for by a name it does not have, without an argument it needs or with one
  it does not take is an invalid request said in groove's words, not an internal error.
- What a client sent is echoed back in an error only as far as :data:`ECHO_CHARS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    ListResourcesResult,
    PaginatedRequestParams,
    ResourceTemplate,
    Tool,
)
from pydantic import ValidationError

from groove_core.mcp.resources import MIME, SCHEME, DocumentSource

#: The most characters of a client's own name (an argument, a prompt) an error repeats.
ECHO_CHARS = 100

#: JSON Schema keywords whose value is one schema, a list of them, or a map of them.
_ONE = ("items", "additionalProperties", "not")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "$defs", "patternProperties")


def compact_schema(schema: Any, *, output: bool = False) -> Any:
    """``schema`` without what pydantic adds for humans reading Python: each ``title``
    keyword, ``default: null``, and ``anyOf [X, null]`` (an input's optional argument
    becomes X; an output's nullable field ``type: [X, "null"]``). An output schema keeps
    only its shape: what the fields mean is the tool description's to say."""
    if not isinstance(schema, dict):
        return schema
    node: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue  # a keyword here; a property named "title" is a schema (a dict)
        if key == "default" and (value is None or output):
            continue
        if output and key == "description" and isinstance(value, str):
            continue  # the tool's description says what it returns, once
        if key == "additionalProperties" and value is True:
            continue  # JSON Schema's own default
        if key in _ONE:
            node[key] = compact_schema(value, output=output)
        elif key in _MANY and isinstance(value, list):
            node[key] = [compact_schema(v, output=output) for v in value]
        elif key in _MAP and isinstance(value, dict):
            node[key] = {k: compact_schema(v, output=output) for k, v in value.items()}
        else:
            node[key] = value
    return _fold_null(node, output)


def _fold_null(node: dict[str, Any], output: bool) -> dict[str, Any]:
    options = node.get("anyOf")
    if not isinstance(options, list) or len(options) != 2 or {"type": "null"} not in options:
        return node
    (kept,) = [o for o in options if o != {"type": "null"}]
    if not isinstance(kept, dict) or any(k in node for k in kept if k != "anyOf"):
        return node
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    if not output:
        return {**kept, **rest}
    if isinstance(kept.get("type"), str):
        return {**kept, "type": [kept["type"], "null"], **rest}
    return node


def argument_error(tool: str, error: ValidationError) -> str:
    """One line naming each bad argument and what it must be."""
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where!r} {_what(item)}")
    return f"invalid argument for {tool}: " + "; ".join(problems)


def _what(item: Mapping[str, Any]) -> str:
    kind, ctx = item["type"], item.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    if kind == "string_too_short":
        return f"must be at least {ctx.get('min_length')} character(s)"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} items"
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        bound = next(iter(ctx.values()), "?")
        words = {
            "greater_than_equal": "at least",
            "less_than_equal": "at most",
            "greater_than": "more than",
            "less_than": "less than",
        }
        return f"must be {words[kind]} {bound}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "must be a whole number"
    if kind in ("bool_type", "bool_parsing"):
        return "must be true or false"
    if kind in ("string_type",):
        return "must be a string"
    if kind in ("list_type",):
        return "must be a list"
    if kind in ("float_type", "float_parsing"):
        return "must be a number"
    return str(item.get("msg", "is not valid")).lower()


class GrooveServer(MCPServer):
    """``MCPServer`` with compact tool schemas, argument errors in groove's words, and the
    served KBs' documents as resources."""

    def __init__(self, *args: Any, refused: Mapping[str, Mapping[str, str]] | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        #: tool -> argument -> why a client cannot use it (not in the schema).
        self.refused = {k: dict(v) for k, v in (refused or {}).items()}
        self._listed: list[Tool] | None = None
        #: The documents served as resources (set by build_mcp_server).
        self.documents: DocumentSource | None = None

    # -- resources: the served documents, read on the worker pool ------------------------

    async def _handle_list_resources(
        self, ctx: Any, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        # The SDK's handler lists registered resources in one page; a KB's documents are
        # many and change, so this one pages through them.
        if self.documents is None:
            return await super()._handle_list_resources(ctx, params)
        try:
            resources, following = await self.documents.page(params.cursor if params else None)
        except ResourceError as err:
            raise MCPError(code=INVALID_PARAMS, message=str(err)) from None
        return ListResourcesResult(resources=resources, next_cursor=following)

    async def list_resource_templates(self) -> list[ResourceTemplate]:
        listed = await super().list_resource_templates()
        return listed + (self.documents.templates() if self.documents else [])

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        if self.documents is None or not str(uri).startswith(f"{SCHEME}://"):
            return await super().read_resource(uri, context)
        text = await self.documents.read(str(uri))
        return [ReadResourceContents(content=text, mime_type=MIME)]

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Any = None) -> Any:  # fmt: skip
        prompts = {p.name: p for p in await self.list_prompts()}
        if name not in prompts:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"no prompt {_echo(name)}; the prompts: {', '.join(prompts)}",
            )
        takes = prompts[name].arguments or []
        given = arguments or {}
        names = [a.name for a in takes]
        if unknown := [a for a in given if a not in names]:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"{name} takes no argument {_echo(unknown[0])}; its arguments: "
                + ", ".join(names),
            )
        if missing := [a.name for a in takes if a.required and a.name not in given]:
            raise MCPError(code=INVALID_PARAMS, message=f"{name} needs the argument {missing[0]!r}")
        return await super().get_prompt(name, arguments, context)

    async def list_tools(self) -> list[Tool]:
        # Every tool is registered before the server serves (build_mcp_server).
        if self._listed is None:
            self._listed = [_compact(tool) for tool in await super().list_tools()]
        return self._listed

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = {t.name: t for t in await self.list_tools()}
        if name not in known:
            raise ToolError(f"no tool {_echo(name)}; the tools: {', '.join(known)}")
        _check_names(name, arguments, known[name], self.refused.get(name, {}))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as err:
            if isinstance(err.__cause__, ValidationError):
                raise ToolError(argument_error(name, err.__cause__)) from None
            raise


def _compact(tool: Tool) -> Tool:
    return tool.model_copy(
        update={
            "input_schema": compact_schema(tool.input_schema),
            "output_schema": compact_schema(tool.output_schema, output=True)
            if tool.output_schema is not None
            else None,
        }
    )


def _check_names(
    name: str, arguments: Mapping[str, Any] | None, tool: Tool, refused: Mapping[str, str]
) -> None:
    taken = list((tool.input_schema or {}).get("properties", {}))
    unknown = [a for a in (arguments or {}) if a not in taken]
    if not unknown:
        return
    first = unknown[0]
    if first in refused:
        raise ToolError(f"argument {first!r} of {name} cannot be used: {refused[first]}; omit it")
    raise ToolError(f"{name} takes no argument {_echo(first)}; its arguments: {', '.join(taken)}")


def _echo(given: str) -> str:
    """A name a client sent, quoted, cut to :data:`ECHO_CHARS` (a megabyte of it must not
    come back, nor fill the log)."""
    if len(given) <= ECHO_CHARS:
        return repr(given)
    return f"{given[:ECHO_CHARS]!r}... ({len(given)} characters)"
