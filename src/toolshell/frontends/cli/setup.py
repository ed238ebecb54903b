"""`toolshell setup HOST`: add `toolshell serve` to an agent host's MCP config (or `--print` it)."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from toolshell.frontends.cli.options import config_opt, guard, state_opt
from toolshell.frontends.hosts.formats import HOSTS, HostFormat
from toolshell.safe_text import escape

if TYPE_CHECKING:
    from toolshell.frontends.hosts.files import HostFile
    from toolshell.frontends.hosts.launch import Launch
    from toolshell.frontends.hosts.move import Move
    from toolshell.frontends.hosts.writing import Writer

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@click.command("setup")
@click.argument("host", type=click.Choice(list(HOSTS)), metavar="HOST")
@click.option(
    "--scope",
    type=click.Choice(["user", "project"]),
    default="user",
    show_default=True,
    help="The host's file for you (user) or for the project in the working directory (project).",
)
@click.option("--print", "show", is_flag=True, help="Print the entry and the file it belongs in; write nothing.")
@click.option("--name", default="toolshell", show_default=True, help="The server's name in the host's config.")
@click.option("--move", is_flag=True, help="Also move the host's other MCP servers into toolshell.toml.")
@click.option("--yes", is_flag=True, help="With --move: move without asking (what moves is still printed).")
@click.option(
    "--follow-link",
    "follow",
    multiple=True,
    metavar="FILE",
    help="Write through a symbolic link that points to FILE (a dotfile manager's); other links are refused.",
)
@config_opt
@state_opt
def setup(
    host: str,
    scope: str,
    show: bool,
    name: str,
    move: bool,
    yes: bool,
    follow: tuple[str, ...],
    config_path: str | None,
    state_dir: str | None,
) -> None:
    """Add toolshell to HOST's MCP servers: claude-code, claude-desktop, codex, cursor, vscode, gemini, opencode.

    The entry runs `toolshell serve` by its absolute path (through `uvx` when toolshell runs from
    uv's cache), with the config and the state directory named. Other servers in the file are kept
    as they were; the previous file is kept as <file>.toolshell.bak (.bak.1, … when one is there
    already); running it again changes nothing. A file, backup or project folder that is a
    symbolic link is refused unless --follow-link names the file it points to.
    """
    from toolshell.frontends.hosts import files  # lazy: tomlkit only for the command that edits files
    from toolshell.frontends.hosts.writing import Writer  # lazy: CLI start-up

    fmt = HOSTS[host]
    if not _NAME.fullmatch(name):
        raise click.UsageError(f"--name {escape(repr(name))}: use letters, digits, '-', '_' or '.' (e.g. toolshell)")
    if scope not in fmt.scopes:
        raise click.UsageError(f"{fmt.title} has a {' and a '.join(fmt.scopes)} file only; drop --scope {scope}")
    path = fmt.scopes[scope](Path.cwd(), Path.home(), os.environ)
    config = _config_file(config_path, move)
    launch = _launch(config, state_dir)
    entry = fmt.entry(launch)
    if show:
        click.echo(f"# {fmt.title}, {scope}: {path}", err=True)
        click.echo(_snippet(fmt, name, entry))
        return
    writer = Writer(frozenset(Path(f).expanduser().resolve() for f in follow))
    target = _guarded(lambda: writer.target(path, inside=Path.cwd() if scope == "project" else None))
    hf = _read(files.read, target, fmt)
    moved = _move(writer, hf, name, config, yes) if move else []
    was = "updated" if name in hf.servers() else "added"
    text = _guarded(lambda: hf.with_entry(name, entry, removing=moved))
    if text is None:
        click.echo(f"{path} runs toolshell already as {name!r}: {escape(shlex.join(launch.argv))}")
    else:
        backup = _guarded(lambda: writer.write(target, text))
        kept = f" (the previous file: {backup})" if backup else ""
        click.echo(f"{was} {name!r} in {path}{kept}: {escape(shlex.join(launch.argv))}")
    if note := _note(fmt, scope):
        click.echo(note)


def _config_file(explicit: str | None, move: bool) -> Path | None:
    """The config the host's toolshell should read, absolute (None: the embedded default). With
    --move and no config yet: the user config, which the move creates."""
    from toolshell import config as cfg  # lazy: CLI start-up

    found, note = cfg.config_in_use(explicit)
    if note:
        click.echo(note, err=True)
    if found is not None:
        guard(lambda: cfg.load_file(found, expand=False))  # a broken config would fail in the host, unseen
        return found.absolute()
    return (cfg.user_config_dir() / "toolshell.toml") if move else None


def _launch(config: Path | None, explicit_state: str | None) -> Launch:
    from toolshell import config as cfg  # lazy: CLI start-up
    from toolshell import places  # lazy: CLI start-up
    from toolshell.frontends.hosts.launch import launch, serve_args  # lazy: CLI start-up

    configured = cfg.load_file(config, expand=False).state.dir if config is not None and config.exists() else None
    state = None if configured and not explicit_state else Path(places.state_dir(explicit_state))
    return launch(serve_args(config, state))


def _snippet(fmt: HostFormat, name: str, entry: dict[str, Any]) -> str:
    if fmt.kind == "toml":
        import tomlkit  # lazy: only to print a TOML entry

        return tomlkit.dumps({fmt.key: {name: entry}}).rstrip("\n")
    return json.dumps({fmt.key: {name: entry}}, indent=2, ensure_ascii=False)


def _read(read: Any, path: Path, fmt: HostFormat) -> HostFile:
    found: HostFile = _guarded(lambda: read(path, fmt))
    _guarded(found.servers)
    return found


def _guarded(fn: Any) -> Any:
    from toolshell.frontends.hosts.files import HostFileError  # lazy: CLI start-up

    try:
        return fn()
    except HostFileError as e:
        raise click.ClickException(escape(str(e))) from None


def _move(writer: Writer, hf: HostFile, own: str, config: Path | None, yes: bool) -> list[str]:
    """Write the host's other servers into the toolshell config; returns their names, for the
    caller to take out of the host's file in its one write."""
    from toolshell.frontends.hosts.move import plan_move, toml_mode  # lazy: CLI start-up

    assert config is not None  # `_config_file` names one with --move
    target = _guarded(lambda: writer.target(config))
    plan: Move = _guarded(lambda: plan_move(hf, own, target))
    for name in plan.kept:
        click.echo(f"kept {name!r} in {hf.path}: {config} has a server of that name already", err=True)
    if not plan.moved:
        click.echo(f"no other servers to move from {hf.path}")
        return []
    click.echo(f"moving to {config}: {', '.join(plan.moved)}")
    if not yes and not _confirmed(hf):
        return []
    mode = toml_mode(target, hf.path)
    backup = _guarded(lambda: writer.write(target, plan.text, mode=mode))
    click.echo(f"moved {len(plan.moved)} servers to {config}" + (f" (the previous file: {backup})" if backup else ""))
    for item in plan.lifted:
        click.echo(f"note: {item.place} held a secret; written as ${{{item.variable}}}: set {item.variable}")
    if config.name == "toolshell.toml" and config.parent == Path.cwd():
        click.echo(f"{config} changed: run `toolshell config trust` to use it again")
    return plan.moved


def _note(fmt: HostFormat, scope: str) -> str | None:
    """What to do next in the host for it to start the server."""
    if fmt.name == "gemini":
        from toolshell.frontends.hosts.gemini_trust import trust_note  # lazy: CLI start-up

        return trust_note(Path.cwd(), Path.home(), os.environ, scope)
    return fmt.notes.get(scope)


def _confirmed(hf: HostFile) -> bool:
    if not sys.stdin.isatty():
        click.echo("nothing moved: there is no terminal to ask on; to move them, run this again with --yes", err=True)
        sys.exit(1)
    if click.confirm(f"Move them out of {hf.path}?", default=False):
        return True
    click.echo("nothing moved", err=True)
    sys.exit(1)
