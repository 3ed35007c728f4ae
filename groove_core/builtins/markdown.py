"""The built-in loader: Markdown files (``[index] extensions``, plus ``.mdx`` where the
dialect cleans it) are read as strict UTF-8, as they always were. Registered like any
plugin's loader; the spec lives with the loader contract (``groove_core.loaders``)."""

from __future__ import annotations

from groove_core.hookspecs import hookimpl
from groove_core.loaders import MARKDOWN_SPEC, LoaderSpec

SPEC = MARKDOWN_SPEC


@hookimpl
def groove_loaders() -> list[LoaderSpec]:
    return [SPEC]
