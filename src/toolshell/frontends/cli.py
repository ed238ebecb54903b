"""The `toolshell` command line: a thin click layer over the Python API.

Heavy modules (`mcp`, `bashkit`) are imported inside the commands that need them, so `toolshell
--help` and `toolshell config validate` start fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from toolshell.errors import ConfigError, ToolshellError

T = TypeVar("T")

_config_opt = click.option("--config", "config_path", metavar="PATH", help="Config file (TOML or mcpServers JSON).")
_state_opt = click.option("--state-dir", metavar="DIR", help="Where state (SQLite) lives.")
_role_opt = click.option("--role", metavar="NAME", help="The session's role (a [[roles]] name or an auto_bind tag).")


def _load(config_path: str | None) -> Any:
    from toolshell import config as cfg

    return cfg.load(config_path)


def _guard(fn: Callable[[], T]) -> T:
    """Turn known errors into a clear message and an exit code; never a traceback."""
    try:
        return fn()
    except ConfigError as e:
        click.echo(f"config error in {e.source or 'configuration'}:", err=True)
        for place, msg in e.problems:
            click.echo(f"  {place}: {msg}" if place else f"  {msg}", err=True)
        sys.exit(1)
    except ToolshellError as e:
        click.echo(json.dumps(e.to_json(), separators=(",", ":")), err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


def _run_async(factory: Callable[[], Awaitable[T]]) -> T:
    import anyio

    return _guard(lambda: anyio.run(factory))


def say_waiting(servers: list[str], wait: float) -> None:
    """Tell a person at the terminal why opening takes a moment."""
    click.echo(f"toolshell: waiting up to {wait:g} s for servers to start: {', '.join(servers)}", err=True)


def _script_text(command: str | None, file: str | None) -> str:
    if command is not None and file is not None:
        raise click.UsageError(f"give the script either with -c or as a FILE, not both (got FILE {file!r})")
    if command is not None:
        return command
    if file is None or file == "-":
        return sys.stdin.read()
    try:
        return Path(file).read_text(encoding="utf-8")
    except OSError as e:
        raise click.ClickException(f"cannot read {file}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise click.ClickException(f"{file} is not UTF-8 text (byte {e.start}); save the script as UTF-8") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="toolshell")
def main() -> None:
    """toolshell: every MCP tool behind one sandboxed shell command, `tools`."""


@main.command()
@_config_opt
@_state_opt
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: exit_code, success, stdout, stderr, tools."
)
@click.option("-c", "command", metavar="SCRIPT", help="The script text.")
@click.argument("file", required=False)
@_role_opt
def run(
    config_path: str | None,
    state_dir: str | None,
    as_json: bool,
    command: str | None,
    file: str | None,
    role: str | None = None,
) -> None:
    """Run a script in a new session (from -c, a FILE, or - for stdin)."""
    script = _script_text(command, file)

    async def go() -> Any:
        from toolshell.host import Host

        async with Host.open(_load(config_path), state_dir=state_dir, on_wait=say_waiting) as host:
            return await host.session(source="cli", role=role).run(script)

    result = _run_async(go)
    if as_json:
        click.echo(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        if result.tools and result.tools.get("stopped"):
            sys.stderr.write(json.dumps({"tools": result.tools}, ensure_ascii=False) + "\n")
    sys.exit(result.exit_code)


@main.command()
@_config_opt
@_state_opt
@click.option("-c", "command", metavar="SCRIPT", help="The script text.")
@click.argument("file", required=False)
@_role_opt
def plan(
    config_path: str | None, state_dir: str | None, command: str | None, file: str | None, role: str | None
) -> None:
    """Print every `tools` call a script would make, with input and risk. Runs nothing."""
    script = _script_text(command, file)

    async def go() -> dict[str, Any]:
        from toolshell.host import Host

        async with Host.open(_load(config_path), state_dir=state_dir, on_wait=say_waiting) as host:
            return await host.plan(script, role=role)

    click.echo(json.dumps(_run_async(go), indent=2, ensure_ascii=False))


@main.command()
@_config_opt
@_state_opt
@click.option("--json", "as_json", is_flag=True)
def servers(config_path: str | None, state_dir: str | None, as_json: bool) -> None:
    """Show each server's state, protocol version, tools, last error and stderr tail."""
    from toolshell.frontends.diagnostics import show_servers

    _run_async(lambda: show_servers(_load(config_path), state_dir, as_json))


@main.command()
@_config_opt
@_state_opt
@_role_opt
def shell(config_path: str | None, state_dir: str | None, role: str | None) -> None:
    """An interactive prompt over one session."""
    from toolshell.frontends.interactive import interactive

    _run_async(lambda: interactive(_load(config_path), state_dir, role))


@main.command()
@_config_opt
@_state_opt
@click.option("--http", "use_http", is_flag=True, help="Serve Streamable HTTP instead of stdio.")
@click.option("--host", "bind", default="127.0.0.1", show_default=True, help="Address to bind with --http.")
@click.option("--port", default=8765, show_default=True, help="Port with --http.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow --host to be a non-loopback address. There is no authentication: put it behind a proxy that has.",
)
def serve(
    config_path: str | None, state_dir: str | None, use_http: bool, bind: str, port: int, allow_remote: bool
) -> None:
    """Run an MCP server that exposes `bash` (plus `keep_visible` tools)."""
    from toolshell.frontends.mcp_server import is_loopback
    from toolshell.frontends.mcp_server import serve as serve_mcp

    if use_http and not is_loopback(bind) and not allow_remote:
        raise click.UsageError(
            f"--host {bind} would let other machines run scripts with your tools, and toolshell serve has no "
            "authentication; keep the default 127.0.0.1, or pass --allow-remote behind an authenticating proxy"
        )

    _run_async(lambda: serve_mcp(_load(config_path), state_dir, http=use_http, host=bind, port=port))


@main.group()
def config() -> None:
    """Check or convert configuration files."""


@config.command("validate")
@click.argument("path", required=False)
def config_validate(path: str | None) -> None:
    """Check a config file; print every problem with its place and what to write instead."""
    from toolshell import config as cfg

    found = cfg.find_config_path(path)
    if found is None:
        click.echo("no config file found; toolshell uses the embedded default (built-in servers only)")
        return
    loaded = _guard(lambda: cfg.load_file(found))
    names = ", ".join(s.name for s in loaded.mcp.servers) or "none"
    click.echo(f"{found}: ok ({len(loaded.mcp.servers)} servers: {names})")
    for place, message in loaded.warnings():
        click.echo(f"  warning: {place}: {message}", err=True)


@config.command("import")
@click.argument("file")
def config_import(file: str) -> None:
    """Convert another host's {"mcpServers": ...} JSON to toolshell TOML (printed)."""
    from toolshell import config as cfg

    loaded = _guard(lambda: cfg.load_file(file, expand=False))  # `${VAR}` stays as written: no secret printed
    click.echo(cfg.to_toml(loaded), nl=False)


@main.group(invoke_without_command=True)
@_config_opt
@_state_opt
@click.pass_context
def approvals(ctx: click.Context, config_path: str | None, state_dir: str | None) -> None:
    """List, grant or deny approval requests."""
    ctx.obj = (config_path, state_dir)
    if ctx.invoked_subcommand is None:
        ctx.invoke(approvals_list)


def _approvals(ctx: click.Context) -> Any:
    from toolshell import config as cfg
    from toolshell.policy.approvals import Approvals
    from toolshell.store import Store

    config_path, state_dir = ctx.obj or (None, None)
    loaded = _guard(lambda: _load(config_path))
    return Approvals(Store(cfg.state_dir(loaded, state_dir) / "toolshell.db"))


@approvals.command("list")
@click.pass_context
def approvals_list(ctx: click.Context) -> None:
    """Pending approval requests."""
    pending = _approvals(ctx).list_pending()
    if not pending:
        click.echo("no pending approval requests")
    for r in pending:
        click.echo(f"{r.id}  {r.command}  {json.dumps(r.input, ensure_ascii=False)}  ({r.why})")


@approvals.command("grant")
@click.argument("request_id")
@click.option("--always", is_flag=True, help="Allow this tool from now on (until it changes).")
@click.pass_context
def approvals_grant(ctx: click.Context, request_id: str, always: bool) -> None:
    """Grant a request once (that exact call) or --always (the tool)."""
    _guard(lambda: _approvals(ctx).grant(request_id, always=always))
    click.echo(f"granted {request_id}" + (" (always)" if always else " (once)"))


@approvals.command("grants")
@click.pass_context
def approvals_grants(ctx: click.Context) -> None:
    """The grants in force (once: that exact call; always: the tool until it changes)."""
    grants = _approvals(ctx).list_grants()
    if not grants:
        click.echo("no grants in force")
    for g in grants:
        shown = "" if g["input"] is None else "  " + json.dumps(g["input"], ensure_ascii=False)
        click.echo(f"{g['kind']:<7} {g['command']}{shown}")


@approvals.command("revoke")
@click.argument("tool", nargs=-1, required=True)
@click.pass_context
def approvals_revoke(ctx: click.Context, tool: tuple[str, ...]) -> None:
    """Withdraw the grants of a tool, e.g. `toolshell approvals revoke github delete-branch`."""
    n = _approvals(ctx).revoke(" ".join(tool))
    click.echo(f"revoked {n} grant{'s' if n != 1 else ''} of tools {' '.join(tool)}")


@approvals.command("deny")
@click.argument("request_id")
@click.pass_context
def approvals_deny(ctx: click.Context, request_id: str) -> None:
    """Deny a request."""
    _guard(lambda: _approvals(ctx).deny(request_id))
    click.echo(f"denied {request_id}")


@main.command()
@_config_opt
@_state_opt
@click.option("--session", "session_id", help="Only this session.")
@click.option("--limit", default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def timeline(config_path: str | None, state_dir: str | None, session_id: str | None, limit: int, as_json: bool) -> None:
    """Shell calls and the tool calls under them (never shown to the model)."""
    from toolshell import config as cfg
    from toolshell.store import Store
    from toolshell.timeline.sinks import query, render_timeline

    loaded = _guard(lambda: _load(config_path))
    store = Store(cfg.state_dir(loaded, state_dir) / "toolshell.db")
    rows = query(store, session_id=session_id, limit=limit)
    if not rows and session_id and not as_json:
        click.echo(f"no shell calls recorded for session {session_id}")
        return
    click.echo(json.dumps(rows, indent=2) if as_json else render_timeline(rows))


@main.group()
def triggers() -> None:
    """Run saved scripts on a schedule or a webhook, with no model involved."""


@triggers.command("list")
@_config_opt
def triggers_list(config_path: str | None) -> None:
    """The configured triggers and when each schedule runs next."""
    from toolshell.scripts.triggers import Trigger, TriggerRunner

    loaded = _guard(lambda: _load(config_path))
    found = [Trigger.from_config(t) for t in loaded.triggers]
    nexts = TriggerRunner(found, _never_run).next_runs()
    if not found:
        click.echo("no [[triggers]] in the config")
    for t in found:
        when = f"next {nexts[t.name]:%Y-%m-%d %H:%M}" if t.name in nexts else "webhook only"
        hook = f"POST /hooks/{t.name}" if t.webhook else ""
        click.echo(f"{t.name:<20} script={t.script:<20} {t.schedule or '-':<16} {when}  {hook}".rstrip())


async def _never_run(*_: Any) -> Any:
    raise AssertionError("listing triggers runs nothing")


@triggers.command("fire")
@_config_opt
@_state_opt
@click.argument("name")
def triggers_fire(config_path: str | None, state_dir: str | None, name: str) -> None:
    """Run one trigger now (its saved script with its input); prints the outcome as JSON."""
    from toolshell.frontends.trigger_server import fire

    outcome = _run_async(lambda: fire(_load(config_path), state_dir, name))
    click.echo(json.dumps(outcome.to_dict(), ensure_ascii=False))
    sys.exit(outcome.exit_code)


@triggers.command("serve")
@_config_opt
@_state_opt
@click.option("--host", "bind", default="127.0.0.1", show_default=True)
@click.option("--port", default=8766, show_default=True)
def triggers_serve(config_path: str | None, state_dir: str | None, bind: str, port: int) -> None:
    """Run schedules, and serve webhooks at POST /hooks/<trigger> (loopback by default)."""
    from toolshell.frontends.trigger_server import serve_triggers

    _run_async(lambda: serve_triggers(_load(config_path), state_dir, bind, port))


@main.command(context_settings={"ignore_unknown_options": True})
@_config_opt
@_state_opt
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def scripts(config_path: str | None, state_dir: str | None, args: tuple[str, ...]) -> None:
    """Saved scripts, as `tools scripts` does them: list, `save NAME --description … --input-schema …`
    (the script on stdin), `NAME k=v …` to run one, `delete NAME`."""
    words = " ".join(_shell_quote(a) for a in ("tools", "scripts", *args))
    if not sys.stdin.isatty():
        piped = sys.stdin.read()
        if piped:
            words += _heredoc(piped)
    ctx = click.get_current_context()
    ctx.invoke(run, config_path=config_path, state_dir=state_dir, as_json=False, command=words, file=None)


def _heredoc(text: str) -> str:
    """Feed `text` to the command as stdin through a quoted here-document (a final newline is added
    when missing)."""
    end = "TOOLSHELL_STDIN"
    while end in text:
        end += "_"
    return f" <<'{end}'\n{text}{'' if text.endswith(chr(10)) else chr(10)}{end}\n"


def _shell_quote(word: str) -> str:
    import shlex

    return shlex.quote(word)
