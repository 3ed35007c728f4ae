"""The ``groove`` command line: index, search, plugins (and whatever plugins add)."""

from __future__ import annotations

import difflib
import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from groove_core import __version__
from groove_core.cli import render
from groove_core.cli.common import handle_errors, open_app, search_folders
from groove_core.cli.options import (
    KB,
    all_option,
    config_option,
    defaulted,
    kb_argument,
    kb_option,
    kbs_option,
    one_kb,
)
from groove_core.cli.terminal import aligned, dumps, no_color, printable, style
from groove_core.config import ConfigError, GrooveConfig, describe_key, load_config
from groove_core.context import SearchOption
from groove_core.errors import GrooveError
from groove_core.plugins import PluginError, Plugins, make_plugin_manager
from groove_core.rows import Backlink, OutgoingLink


def _open(kb: Path, config_path: Path | None) -> Any:
    return open_app(kb, config_path)


# -- index -------------------------------------------------------------------------------


@click.command("index")
@kb_argument(exact=True)
@config_option
@click.option(
    "--rebuild",
    is_flag=True,
    help="Build a new index from scratch beside the old one; it replaces the old one only "
    "when complete.",
)
@click.option(
    "--reembed",
    is_flag=True,
    help="Re-embed a copy of the index with the configured embedder (after changing it); "
    "the old index serves searches until the copy is complete and replaces it.",
)
@click.option(
    "--copy-from",
    metavar="BACKEND",
    help="Build the index from this KB's index in another storage backend ('sqlite', "
    "'postgres'), copying its vectors instead of re-embedding; then index as usual.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--quiet",
    "-q",
    is_flag=True,
    help="No progress on stderr (skipped files, warnings and the summary still print).",
)
@handle_errors
def index_cmd(
    kb: Path | None,
    kb_opt: Path | None,
    config_path: Path | None,
    rebuild: bool,
    reembed: bool,
    copy_from: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Index every Markdown file under KB: a registered name or a folder (default: the
    current folder, or the indexed KB above it).

    Only new and changed files are embedded; deleted files leave the index. Every changed
    file is written searchable by its words first, then its chunks are embedded, so a
    large first index can be searched long before it ends (status and search say how much
    is embedded). Interrupting a run is safe: the next run continues where it stopped. A
    subfolder of an indexed KB is refused: index the KB itself.

    Progress goes to stderr: a bar on a terminal (chunks indexed, then embedded, rate,
    ETA), otherwise one line every 5 seconds ($GROOVE_PROGRESS_INTERVAL seconds).
    """
    from groove_core.progress import IndexProgressDisplay

    app = _open(_index_target(one_kb(kb, kb_opt)), config_path)
    display = None
    if not quiet:
        display = IndexProgressDisplay(sys.stderr, terminal=sys.stderr.isatty())
    try:
        report = app.index(rebuild=rebuild, reembed=reembed, copy_from=copy_from, progress=display)
    finally:
        if display is not None:
            display.close()
    if as_json:
        click.echo(dumps(report.to_json()))
        return
    for path, reason in report.skipped:
        click.echo(f"skipped {printable(path)}: {printable(reason)}", err=True)
    for path, warning in report.warnings:
        click.echo(f"warning {printable(path)}: {printable(warning)}", err=True)
    for note in report.notes:
        click.echo(f"note: {printable(note)}", err=True)
    click.echo(_summary(report))


def _index_target(kb: Path | None) -> Path:
    """The folder ``groove index`` indexes: named, or the current one (the indexed KB above
    it, as git finds its repository). A named subfolder of an indexed KB would become a
    second index nested in the first, its files indexed twice: refused, naming the KB."""
    from groove_core.registry import enclosing_kb, has_index

    if kb is None:
        return KB.convert(".", None, None)
    if has_index(kb) or (kb / "groove.toml").exists():
        return kb
    parent = enclosing_kb(kb)
    if parent is not None:
        raise ConfigError(
            f"{kb} lies inside the indexed knowledge base {parent}: run 'groove index {parent}' "
            "to index it (its files are part of that KB), or give this folder a groove.toml "
            "of its own to make it a separate KB"
        )
    return kb


def _rate(per_second: float) -> str:
    """Whole numbers, but a slow embedder's rate (under 10/s) keeps its tenths: 0.7, not 0."""
    return f"{per_second:.0f}" if per_second >= 10 else f"{per_second:.1f}"


def _summary(report: Any) -> str:
    files = (
        f"{report.added} added, {report.changed} changed, {report.removed} removed, "
        f"{report.unchanged} unchanged, {len(report.skipped)} skipped"
    )
    if report.chunks_embedded:
        work = (
            f"{report.chunks_embedded} chunks embedded in {report.seconds:.1f} s "
            f"({_rate(report.chunks_per_second)} chunks/s; the embedder alone "
            f"{_rate(report.embed_chunks_per_second)} chunks/s)"
        )
    else:
        work = f"nothing to embed ({report.seconds:.2f} s)"
    index = f"index: {report.documents_total} documents, {report.chunks_total} chunks"
    if report.vectors_pending:
        index += f" ({report.vectors_pending} not embedded yet: the next run embeds them)"
    copied = f"{report.copied} documents copied with their vectors; " if report.copied else ""
    return f"{copied}{files}; {work}; {index}"


@click.command("doctor")
@kb_argument()
@config_option
@click.option("--repair", is_flag=True, help="Re-index what is inconsistent (or rebuild).")
@handle_errors
def doctor_cmd(
    kb: Path | None, kb_opt: Path | None, config_path: Path | None, repair: bool
) -> None:
    """Check the index of KB for damage; --repair fixes it.

    Checks SQLite's integrity and that documents, chunks, the legs' indexes and vectors
    agree one to one. Exit status 0 when healthy (or repaired), 1 when problems remain.
    """
    app = _open(one_kb(kb, kb_opt) or KB.convert(".", None, None), config_path)
    result = app.doctor(repair=repair)
    for problem in result.problems:
        click.echo(f"problem: {printable(problem)}")
    for problem in result.environment:
        click.echo(f"environment: {printable(problem)}")
    for check in result.skipped:
        click.echo(f"skipped: {printable(check)}")
    for note in result.notes:
        click.echo(f"note: {printable(note)}")
    if result.healthy:
        checked = " as far as checked" if result.skipped else ""
        click.echo(f"index {printable(app.index_label)} is healthy{checked}")
        return
    if not repair or not result.repaired:
        fix = "fix the environment, then " if result.environment else ""
        fix = fix or ("make the index writable, then " if result.skipped else "")
        click.echo(f"{fix}run 'groove doctor --repair' to fix the index", err=True)
        sys.exit(1)
    if result.rebuilt:
        click.echo("the index file was damaged: rebuilt from the knowledge base")
    elif result.reindexed:
        paths = ", ".join(printable(p) for p in result.reindexed)
        click.echo(f"re-indexed {len(result.reindexed)} documents: {paths}")
    if result.report is not None:
        click.echo(_summary(result.report))


@click.command("links")
@click.argument("path")
@kb_option
@config_option
@defaulted("--limit", click.IntRange(1, 100_000), 1000, "Links listed per direction.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def links_cmd(path: str, kb: Path, config_path: Path | None, limit: int, as_json: bool) -> None:
    """List the links PATH makes and the backlinks to it (Markdown links and wikilinks).

    PATH is KB-relative, as search prints it, or a note's name as a wikilink gives it. A link
    to a file that is not a note (an image, a PDF) names the file as an attachment; one that
    leads nowhere is listed with '(unresolved)'. Embeds (![[...]]) are marked.
    """
    from groove_core.cli.get import CLI_MISSING, Target, by_name
    from groove_core.kb_files import DocumentError, attachments, resolve_markdown

    app = _open(kb, config_path)
    named = by_name(app, Target(path=path)).path or path
    rel = resolve_markdown(app, named, missing=CLI_MISSING).rel
    found = app.store.links_of(rel, limit)
    if found is None:
        raise DocumentError(f"{rel!r} is not indexed yet: run 'groove index' first")
    files = attachments(app, (link.target for link in found.outgoing if link.path is None))
    if as_json:
        payload = found.to_json()
        for link in payload["outgoing"]:
            link["attachment"] = files.get(link["target"])
        click.echo(dumps({"path": rel, **payload}))
        return
    _print_links("links from", rel, found.outgoing, found.outgoing_total, files)
    _print_links("backlinks to", rel, found.backlinks, found.backlinks_total)


def _print_links(
    label: str,
    rel: str,
    items: Sequence[OutgoingLink | Backlink],
    total: int,
    files: Mapping[str, str] | None = None,
) -> None:
    click.echo(f"{label} {printable(rel)} ({total}):")
    for item in items:
        if isinstance(item, OutgoingLink):
            if item.path is not None:
                where = printable(item.path)
            elif files and item.target in files:
                where = f"{printable(files[item.target])} (attachment)"
            else:
                where = "(unresolved)"
            mark = "embed " if item.kind == "embed" else ""
            click.echo(f"  {mark}{printable(item.target)} -> {where}  line {item.line}")
        else:
            click.echo(f"  {printable(item.path)}:{item.line}  {printable(item.target)}")
    if total > len(items):
        click.echo(f"  ... {total - len(items)} more (raise --limit)")


@click.command("watch")
@kb_argument()
@config_option
@click.option(
    "--interval", type=float, default=1.0, show_default=True, help="Seconds between polls."
)
@defaulted("--debounce", float, 0.5, "Quiet seconds before re-indexing.")
@handle_errors
def watch_cmd(
    kb: Path | None,
    kb_opt: Path | None,
    config_path: Path | None,
    interval: float,
    debounce: float,
) -> None:
    """Keep the index of KB current as files are created, edited, renamed and deleted."""
    from groove_core.watch import Watcher

    app = _open(one_kb(kb, kb_opt) or KB.convert(".", None, None), config_path)
    watcher = Watcher(
        app,
        interval=interval,
        debounce=debounce,
        on_report=lambda report: click.echo(_summary(report)),
    )
    click.echo(f"watching {printable(str(app.kb))} (Ctrl-C to stop)", err=True)
    try:
        watcher.run()
    except KeyboardInterrupt:
        watcher.stop.set()


# -- search ------------------------------------------------------------------------------


#: The click type of each non-boolean option type.
_OPTION_KINDS: dict[str, Any] = {"str": str, "int": int, "float": float}


def _add_option(command: click.Command, option: SearchOption) -> None:
    flag = option.name.replace("_", "-")
    kinds = _OPTION_KINDS
    text = option.help
    if option.setting:
        # The user at the terminal writes groove.toml: name the key that sets the default.
        text += f" (overrides {describe_key(option.setting)})."
    if option.type == "bool":
        param = click.Option([f"--{flag}/--no-{flag}", option.name], default=None, help=text)
    else:
        param = click.Option(
            [f"--{flag}", option.name], type=kinds[option.type], default=None, help=text
        )
    command.params.append(param)


def _values_taken(param: click.Parameter) -> int:
    """How many of the following arguments an option consumes (0 for a flag)."""
    if not isinstance(param, click.Option) or param.is_flag or param.count:
        return 0
    return max(param.nargs, 1)


def reject_unknown_long_options(ctx: click.Context, args: Sequence[str]) -> list[str]:
    """Raise click's "No such option" for a ``--word`` that is not an option of the command.

    Before the ``--`` that ends the options, skipping each option's own values (a
    ``--path`` glob may start with ``--`` too). Suggestions are made as click makes them.
    Returns ``args`` with a lone ``-h`` there read as ``--help``, as every other command
    reads it (a one-letter exclusion would match nothing anyway).
    """
    takes: dict[str, int] = {}
    for param in ctx.command.get_params(ctx):
        if isinstance(param, click.Option):
            takes.update((name, _values_taken(param)) for name in param.opts + param.secondary_opts)
    skip = 0
    out = list(args)
    for i, token in enumerate(args):
        if skip:
            skip -= 1
            continue
        if token == "--":
            break
        if token == "-h":
            out[i] = "--help"
        if not token.startswith("--"):
            continue
        name, equals, _ = token.partition("=")
        if name not in takes:
            known = [n for n in takes if n.startswith("--")]
            raise click.NoSuchOption(
                name, possibilities=difflib.get_close_matches(name, known), ctx=ctx
            )
        skip = 0 if equals else takes[name]
    return out


class SearchCommand(click.Command):
    """``search`` keeps unknown ``-word`` tokens as query text, but not unknown ``--words``
    (nor ``-h``, which asks for help).

    A query such as ``rust -async`` is text, not flags, so the command ignores unknown
    options (and has no short options: click would read "-async" as "-a -s -y -n c"). A
    mistyped ``--limt 2`` must not silently become the query "... 2" with "limt" excluded.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, reject_unknown_long_options(ctx, args))


def build_search_command(
    plugins: Plugins | None, warn: Callable[[str], None] | None = None
) -> click.Command:
    """``groove search`` with the per-query options of ``plugins``. A plugin whose options
    cannot be had (:func:`_search_options`) is left out, said by ``warn`` (default: at
    once on stderr)."""

    @click.command(
        "search",
        cls=SearchCommand,
        context_settings={"ignore_unknown_options": True, "help_option_names": ["--help"]},
    )
    @click.argument("query", nargs=-1, required=True)
    @kbs_option
    @all_option
    @config_option
    @click.option("--limit", type=int, default=None, help="Number of results (default 10).")
    @click.option("--path", "path_glob", default=None, help="Only files matching this glob.")
    @click.option(
        "--tag",
        "tags",
        multiple=True,
        help="Only files with this tag (front matter, or an inline #tag in a vault).",
    )
    @click.option(
        "--json", "as_json", is_flag=True, help="Print {results, low_confidence, filter_applied}."
    )
    @click.option(
        "--explain",
        is_flag=True,
        help="Show the compiled query and each leg's ranks (with --json: an explain key).",
    )
    @click.option("--full", is_flag=True, help="Print each hit's whole chunk, not a snippet.")
    @click.option(
        "--files",
        "by_file",
        is_flag=True,
        help="One line per file (its path), best first; --limit counts files "
        "(with --json: a files list).",
    )
    @click.option(
        "--min-score",
        type=float,
        default=None,
        help="Drop hits whose fused score is below this (see the scores --explain prints).",
    )
    @handle_errors
    def search_cmd(
        query: tuple[str, ...],
        kbs: tuple[Path, ...],
        all_kbs: bool,
        config_path: Path | None,
        limit: int | None,
        path_glob: str | None,
        tags: tuple[str, ...],
        as_json: bool,
        explain: bool,
        full: bool,
        by_file: bool,
        min_score: float | None,
        **stage_options: Any,
    ) -> None:
        """Search the knowledge base.

        QUERY: words and "quoted phrases"; -word or -"phrase" excludes the passages
        (chunks) that hold it, not their whole notes. A --word is an option (a mistyped one
        is an error), and -h is help, unless after a lone --. See docs/query-syntax.md.
        With several --kb (or --all) every hit names its KB.
        """
        from groove_core.cli import search_views as views
        from groove_core.search_request import SearchRequest

        folders = search_folders(kbs, all_kbs)
        request = SearchRequest.of(
            " ".join(query),
            limit=limit,
            path=path_glob,
            tags=tags,
            options={k: v for k, v in stage_options.items() if v is not None},
        )
        found = _run_search(folders, config_path, request, by_file)
        payload = views.above(found.payload, min_score)
        if by_file:
            payload = views.by_file(payload, found.wanted)
        if as_json:
            # One JSON document on stdout, whatever else was asked for.
            if explain:
                payload["explain"] = found.explain()
            click.echo(dumps(payload, sort_keys=True))
            return
        if explain:
            found.print_explain()
        if by_file:
            views.print_files(payload, found.folders)
        else:
            render.print_human(payload, full=full)

    if plugins is not None:
        say = warn or _warn_now
        for option in _search_options(plugins, say):
            if option.type == "bool" or option.type in _OPTION_KINDS:
                _add_option(search_cmd, option)
            else:
                say(
                    f"the plugin {option.plugin!r} declares the search option "
                    f"{option.name!r} of unknown type {option.type!r}: left out"
                )
    return search_cmd


def _warn_now(message: str) -> None:
    click.echo(f"groove: warning: {printable(message)}", err=True)


def _left_out(plugin: str, hook: str, err: GrooveError, what: str) -> str:
    """The warning for ``plugin`` failing in ``hook`` with ``err``: ``what`` is left out."""
    if isinstance(err, PluginError):  # it names the plugin, the hook and the fix
        return f"{err}; {what} left out"
    return f"the plugin {plugin!r} failed in {hook}: {err}; {what} left out"


def _search_options(plugins: Plugins, warn: Callable[[str], None]) -> list[SearchOption]:
    """Every plugin's per-query options (:meth:`Plugins.search_options`); where a plugin's
    stage switches or options cannot be had, the others', each failing plugin warned.

    The command line stays usable (``groove plugins list``, the other commands, a KB whose
    groove.toml disables that plugin); a search with the plugin enabled still stops with
    its one line, since it asks for the options again (``check_flags``)."""
    try:
        return plugins.search_options()
    except GrooveError:  # a PluginError, or a plugin's own error: plugin by plugin below
        pass
    options: list[SearchOption] = []
    for plugin, _ in plugins.pm.list_name_plugin():
        try:
            options.extend(_options_of(plugins, plugin))
        except GrooveError as err:
            hook = "groove_stage_switches or groove_search_options"
            warn(_left_out(plugin, hook, err, "its search options are"))
    order = {name: i for i, (name, _) in enumerate(plugins.pm.list_name_plugin())}
    return sorted(options, key=lambda o: order.get(o.plugin, len(order)))


def _options_of(plugins: Plugins, plugin: str) -> list[SearchOption]:
    """``plugin``'s stage switches, then its search options, as
    :meth:`Plugins.search_options` reads them (a PluginError where its code fails)."""
    options: list[SearchOption] = []
    for hook in ("groove_stage_switches", "groove_search_options"):
        for impl in getattr(plugins.pm.hook, hook).get_hookimpls():
            if impl.plugin_name != plugin:
                continue
            with plugins.calling(plugin, hook):
                found = impl.function()
                if found is not None and not isinstance(found, (list, tuple)):
                    raise TypeError(f"returned {type(found).__name__}, not a list")
                for item in found or []:
                    if hook == "groove_stage_switches":
                        item = SearchOption(
                            item.name, "bool", item.help, plugin=plugin,
                            setting=item.setting, requires=item.requires,
                        )  # fmt: skip
                    options.append(item if item.plugin else replace(item, plugin=plugin))
    return options


@dataclass(frozen=True)
class _Found:
    """A search's payload, for one KB or several, and what --explain and --files need."""

    payload: dict[str, Any]
    wanted: int  # results (with --files: files) asked for
    #: (KB name, or None for one KB; response, legs, query context) of each KB searched.
    runs: Sequence[tuple[str | None, Any, Sequence[Any], Any]]
    folders: dict[str, Path]  # each KB's folder by name (several KBs only)

    def explain(self) -> Any:
        """One KB: its explanation; several: a list of them, each naming its KB."""
        explained = [(kb, render.explain(r, legs, ctx)) for kb, r, legs, ctx in self.runs]
        if len(explained) == 1 and explained[0][0] is None:
            return explained[0][1]
        return [{"kb": kb, **one} for kb, one in explained]

    def print_explain(self) -> None:
        for kb, response, legs, ctx in self.runs:
            if kb is not None:
                click.echo(style(f"kb {printable(kb)}:", bold=True))
            render.print_explain(render.explain(response, legs, ctx))


def _run_search(
    folders: list[Path], config_path: Path | None, request: Any, by_file: bool
) -> _Found:
    """The search over one KB (hits as they are) or several (merged, each naming its KB).
    With --files the limit counts files, and more hits are fetched to fill them."""
    from dataclasses import replace

    from groove_core.cli import search_views as views
    from groove_core.config import MAX_LIMIT
    from groove_core.multi_kb import open_kbs, search_kbs
    from groove_core.pipeline import check_flags

    if len(folders) > 1:
        from groove_core.cli.warm_server import refuse_if_held

        refuse_if_held("several KBs")  # a server answering the command line: one KB each
        kbs = open_kbs(folders, config_path)
        apps = [kb.app for kb in kbs]
    else:
        apps = [_open(folders[0], config_path)]
    for app in apps:
        check_flags(app.plugins, request.options)
    wanted = apps[0].config.search.default_limit if request.limit is None else request.limit
    if by_file:
        request = replace(request, limit=views.hits_to_fetch(wanted, by_file, MAX_LIMIT))
    if len(folders) == 1:
        response, legs, ctx = apps[0].search_explained(request)
        return _Found(response.to_json(), wanted, [(None, response, legs, ctx)], {})
    merged = search_kbs(kbs, request)
    runs = [(run.kb, run.response, run.legs, run.ctx) for run in merged.runs]
    return _Found(merged.to_json(), wanted, runs, {kb.name: kb.app.kb for kb in kbs})


# -- plugins -----------------------------------------------------------------------------


@click.group("plugins")
def plugins_group() -> None:
    """Inspect plugins."""


@plugins_group.command("list")
@kb_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@handle_errors
def plugins_list(kb: Path, config_path: Path | None, as_json: bool) -> None:
    """Every plugin: name, distribution, version, hooks, and whether it is enabled."""
    from groove_core.plugins import list_plugins

    config = load_config(kb, config_path)
    infos, problem = list_plugins(config)
    if as_json:
        payload = {"plugins": [i.to_json() for i in infos], "config_problem": problem}
        click.echo(dumps(payload))
        return
    rows = []
    for info in infos:
        hooks = ", ".join(h.removeprefix("groove_") for h in info.hooks) or "-"
        last = f"hooks: {hooks}" + (f"  ({info.reason})" if info.reason else "")
        if info.embedders:
            last += f"  embedders: {', '.join(info.embedders)}"
        if info.loaders:
            last += f"  loaders: {'; '.join(info.loaders)}"
        if info.licence:
            last += f"  licence: {info.licence}"
        # Names and versions come from installed distributions' metadata: untrusted too.
        cells = [info.name, info.distribution, info.version, f"[{info.status_text}]", last]
        rows.append([printable(cell) for cell in cells])
    for line in aligned(rows):
        click.echo(line)
    if problem:
        click.echo(f"\nconfiguration problem: {printable(problem)}", err=True)


# -- assembly ----------------------------------------------------------------------------


class GrooveGroup(click.Group):
    """The ``groove`` group. What a plugin could not add as it was built (its commands, its
    search options) is left out, and each run says so first, one line each on stderr: the
    command line stays usable, ``groove plugins list`` and the fix included, and a command
    a server answers (:mod:`groove_core.cli.warm_server`) says it too."""

    #: The warnings of the build, said by every run.
    startup_warnings: tuple[str, ...] = ()
    #: How a server this group starts builds the command line it answers with
    #: (:func:`startup_cli`; groove_core.cli.warm_server).
    cli_factory: Callable[[], click.Group] | None = None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if not os.environ.get("_GROOVE_COMPLETE"):  # shell completion reads our output
            for message in self.startup_warnings:
                _warn_now(message)
        return super().main(*args, **kwargs)


def build_cli(plugins: Plugins | None) -> click.Group:
    """The ``groove`` group with the built-in commands and those plugins add. A plugin
    whose commands or search options fail to be made is left out, with a warning
    (:class:`GrooveGroup`)."""

    # Commands inherit these settings, plugins' ones too: -h everywhere, and under
    # NO_COLOR click strips the styling of whatever a command prints.
    settings: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
    if no_color():
        settings["color"] = False

    @click.group(cls=GrooveGroup, context_settings=settings)
    @click.version_option(__version__, prog_name="groove")
    def cli() -> None:
        """groove: semantic search over a Markdown knowledge base, for people and agents."""

    # Command modules import only click at module level: `groove --help` stays fast.
    from groove_core.cli.evaluate import eval_cmd, tune_cmd
    from groove_core.cli.get import get_cmd
    from groove_core.cli.kb import kb_group
    from groove_core.cli.serve import serve_cmd
    from groove_core.cli.status import status_cmd

    cli.add_command(index_cmd)
    cli.add_command(doctor_cmd)
    cli.add_command(watch_cmd)
    cli.add_command(links_cmd)
    warnings: list[str] = []
    cli.add_command(build_search_command(plugins, warnings.append))
    cli.add_command(get_cmd)
    cli.add_command(status_cmd)
    cli.add_command(serve_cmd)
    cli.add_command(eval_cmd)
    cli.add_command(tune_cmd)
    cli.add_command(plugins_group)
    cli.add_command(kb_group)
    if plugins is not None:
        _add_plugin_commands(cli, plugins, warnings.append)
    cli.startup_warnings = tuple(warnings)
    cli.cli_factory = startup_cli
    return cli


def _add_plugin_commands(cli: click.Group, plugins: Plugins, warn: Callable[[str], None]) -> None:
    """Each plugin's ``groove_cli_commands``, in pluggy's order, guarded
    (:meth:`Plugins.calling`): a plugin that fails adds nothing (what it added before
    failing is taken back) and is warned; the others' commands are added. A hook some
    plugin wraps is called through pluggy, a failure leaving out all its implementations
    and blamed on the one it came from (:func:`~groove_core.plugins.blame`)."""
    from groove_core.plugins import blame

    hook = "groove_cli_commands"
    caller = plugins.pm.hook.groove_cli_commands
    impls = list(reversed(caller.get_hookimpls()))
    args = {"cli": cli}
    calls: list[tuple[str | None, Callable[[], object]]]
    if any(impl.hookwrapper or impl.wrapper for impl in impls):
        calls = [(None, functools.partial(caller, **args))]  # None: whichever failed
    else:  # each as pluggy calls it: the arguments it names, by position
        calls = [
            (i.plugin_name, functools.partial(i.function, *[args[n] for n in i.argnames]))
            for i in impls
        ]
    for plugin, call in calls:
        before = dict(cli.commands)
        guard = plugins.calling(plugin, hook) if plugin else plugins.calling_through(impls, hook)
        try:
            with guard:
                call()
        except GrooveError as err:
            cli.commands.clear()
            cli.commands.update(before)
            warn(_left_out(plugin or blame(impls, err), hook, err, "its commands are"))


def _startup_plugins() -> Plugins | None:
    """Plugins for assembling the command line (their commands and search switches).

    Uses the current folder's groove.toml when valid; a broken config must not break
    ``--help``, so problems surface later, when a command loads its KB's config.
    """
    try:
        config = load_config(Path("."))
    except ConfigError:
        config = GrooveConfig()
    try:
        return make_plugin_manager(config, validate=False)
    except Exception:  # plugin discovery problems are reported by `groove plugins list`
        return None


def startup_cli() -> click.Group:
    """The command line as ``groove`` builds it in the current folder (the plugins its
    groove.toml enables): what the console script runs, and what a server answering the
    command line builds for each request's folder."""
    return build_cli(_startup_plugins())


def main(argv: list[str] | None = None) -> None:
    startup_cli().main(args=argv, prog_name="groove")
