"""Generate the configuration and CLI references from the code, so they cannot drift.

``python -m groove_core.docgen`` rewrites docs/configuration.md and docs/cli.md;
a test fails when the checked-in files differ from what this produces.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from groove_core.config import GrooveConfig

_CONFIG_INTRO = """\
# Configuration reference

groove reads `groove.toml` at the root of the knowledge base (or the file given with
`--config`). Every key is optional; the defaults below apply when it is absent. An unknown
key or a bad value stops groove with a message naming the key and the file.

Generated from `groove_core/config.py` and the installed plugins' sections by
`python -m groove_core.docgen`; do not edit by hand.
"""

_CLI_INTRO = """\
# Command-line reference

Generated from the `groove` command by `python -m groove_core.docgen`; do not edit by hand.
Plugins can add commands and `groove search` switches; those are listed by `groove --help`
and `groove search --help` once installed.

Every command answers `-h`; every command that works on a knowledge base takes `--kb`
(`index`, `doctor`, `watch` and `status` take it as their argument too); `NO_COLOR=1` turns
colour off. Shell completion: `_GROOVE_COMPLETE=bash_source groove` (or `zsh_source`,
`fish_source`) prints the script; see [getting-started.md](getting-started.md#the-command-line).
"""


def _toml_value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}"
    return str(value)


def _is_section(info: FieldInfo) -> bool:
    annotation = info.annotation
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _rows(model: type[BaseModel], instance: BaseModel) -> list[str]:
    rows = []
    for name, info in model.model_fields.items():
        if info.exclude or _is_section(info) or name == "plugin":
            continue
        key = info.alias or name
        default = getattr(instance, name)
        description = (info.description or "").replace("|", "\\|")
        rows.append(f"| `{key}` | `{_toml_value(default)}` | {description} |")
    return rows


def _section(prefix: str, model: type[BaseModel], instance: BaseModel) -> list[str]:
    """The table of ``model``'s plain keys, then one section per nested table."""
    out: list[str] = []
    rows = _rows(model, instance)
    if rows:
        doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
        title = f"[{prefix}]" if prefix else "Top level"
        out += [f"## {title}", "", doc, "", "| key | default | meaning |", "|---|---|---|"]
        out += rows
        out.append("")
    for name, info in model.model_fields.items():
        if _is_section(info):
            key = info.alias or name
            sub = getattr(instance, name)
            out += _section(f"{prefix}.{key}" if prefix else key, type(sub), sub)
    return out


def configuration_markdown() -> str:
    from groove_core.plugins import make_plugin_manager

    lines = [_CONFIG_INTRO]
    lines += _section("", GrooveConfig, GrooveConfig())
    lines += [
        "## [plugin.NAME]",
        "",
        "Settings of the plugin named NAME (as listed by `groove plugins list`), validated by",
        "the model the plugin declares through `groove_config_sections`.",
        "",
        "# Keys the plugins own",
        "",
        "The plugins of the groove repository (the example third-party plugin included)",
        "declare these keys (`groove_config_sections`); a key is an",
        "error while its plugin is not installed or is disabled.",
        "",
    ]
    settings = make_plugin_manager(GrooveConfig()).settings
    for section in sorted(settings.sections, key=lambda s: (s.plugin, s.path)):
        model = section.model
        block = _section(section.path, model, settings.values[model])
        if block:
            title = block[0].removeprefix("## ")
            block[0] = f"## {title} (plugin {section.plugin})"
        lines += block
    return "\n".join(lines).rstrip() + "\n"


def _command_lines(cmd: click.Command, path: str, parent: click.Context | None = None) -> list[str]:
    # Built like click builds it for a real invocation (parent chain, the command's own
    # context settings), at a fixed width, so the text never depends on the terminal or
    # on what ran before in the same process (click caches each command's help option).
    settings = {"terminal_width": 88, "max_content_width": 88, **cmd.context_settings}
    ctx = cmd.context_class(cmd, info_name=path.rsplit(" ", 1)[-1], parent=parent, **settings)
    out = [f"## `{path}`", "", "```text", cmd.get_help(ctx).rstrip(), "```", ""]
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            out += _command_lines(cmd.commands[name], f"{path} {name}", ctx)
    return out


def cli_markdown() -> str:
    from groove_core.cli import build_cli

    lines = [_CLI_INTRO, *_command_lines(build_cli(None), "groove")]
    return "\n".join(lines).rstrip() + "\n"


def generated_docs() -> dict[str, str]:
    return {"configuration.md": configuration_markdown(), "cli.md": cli_markdown()}


def main() -> None:
    docs = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs")
    for name, text in generated_docs().items():
        (docs / name).write_text(text, encoding="utf-8")
        print(f"wrote {docs / name}")


if __name__ == "__main__":
    main()
