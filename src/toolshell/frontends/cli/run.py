"""`toolshell run`, `plan`, `shell` and `scripts`: a script in a new session."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from toolshell.frontends.cli.options import (
    SCRIPT,
    Utf8Text,
    config_opt,
    guard,
    load_config,
    no_daemon_opt,
    read_stdin,
    role_opt,
    run_async,
    script_text,
    state_opt,
    warm_later,
)
from toolshell.frontends.console import say_waiting
from toolshell.frontends.daemon.client import scripts_script
from toolshell.frontends.daemon.client import write_chunk as write
from toolshell.frontends.daemon.outcome import plan_output, run_output


@click.command()
@config_opt
@state_opt
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: exit_code, success, stdout, stderr, tools."
)
@click.option("-c", "command", metavar="SCRIPT", type=SCRIPT, help="The script text (UTF-8).")
@click.argument("file", required=False)
@role_opt
@no_daemon_opt
def run(
    config_path: str | None,
    state_dir: str | None,
    as_json: bool,
    command: str | None,
    file: str | None,
    role: str | None = None,
    no_daemon: bool = False,
) -> None:
    """Run a script in a new session (from -c, a FILE, or - for stdin)."""
    script = script_text(command, file)

    async def go() -> Any:
        # lazy: a command imports what it needs, so `toolshell --help` starts fast
        from toolshell.calls.approval import name_process_options
        from toolshell.host import Host

        name_process_options(config_path, state_dir)  # the grant hint names them
        config = load_config(config_path)
        warm_later(config, config_path, state_dir, no_daemon)
        start = _reach(script, config, state_dir)  # only what the script can reach, when it says
        async with Host.open(config, state_dir=state_dir, on_wait=say_waiting, start=start) as host:
            # Without --json the output goes out as the script writes it, stdout and stderr in order.
            return await host.session(source="cli", role=role).run(script, on_output=None if as_json else write)

    result = run_async(go)
    stdout, stderr = run_output(result, as_json)
    write(stdout, stderr)
    sys.exit(result.exit_code)


def _reach(script: str, config: Any, state_dir: str | None) -> set[str] | None:
    """The servers to start for this script (`policy.reach`); a saved script it runs is read from
    the store, opened only when the script names one."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.policy.reach import servers_a_script_names
    from toolshell.scripts.store import ScriptStore
    from toolshell.store.engines import open_store

    opened: list[Any] = []

    def body(name: str) -> str | None:
        if not opened:
            opened.append(open_store(cfg.state_location(config, state_dir)))
        found = ScriptStore(opened[0]).get(name)
        return None if found is None else found.body

    try:
        return servers_a_script_names(script, config, body)
    finally:
        for store in opened:
            store.close()


@click.command()
@config_opt
@state_opt
@click.option("-c", "command", metavar="SCRIPT", type=SCRIPT, help="The script text (UTF-8).")
@click.argument("file", required=False)
@role_opt
@no_daemon_opt
def plan(
    config_path: str | None,
    state_dir: str | None,
    command: str | None,
    file: str | None,
    role: str | None,
    no_daemon: bool,
) -> None:
    """Print every `tools` call a script would make, with input and risk. Runs nothing."""
    script = script_text(command, file)

    async def go() -> dict[str, Any]:
        # lazy: a command imports what it needs, so `toolshell --help` starts fast
        from toolshell.host import Host

        config = load_config(config_path)
        warm_later(config, config_path, state_dir, no_daemon)
        start = _reach(script, config, state_dir)  # only what the script names, when it says
        async with Host.open(config, state_dir=state_dir, on_wait=say_waiting, start=start) as host:
            return await host.plan(script, role=role)

    click.echo(plan_output(run_async(go)), nl=False)


@click.command()
@config_opt
@state_opt
@role_opt
def shell(config_path: str | None, state_dir: str | None, role: str | None) -> None:
    """An interactive prompt over one session."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.calls.approval import name_process_options
    from toolshell.frontends.interactive import interactive

    name_process_options(config_path, state_dir)  # the grant hint names them
    run_async(lambda: interactive(load_config(config_path), state_dir, role))


_HELP = ("--help", "-h")


@click.command(context_settings={"ignore_unknown_options": True}, add_help_option=False)
@config_opt
@state_opt
@click.option("--json", "as_json", is_flag=True, help="With `list`: print a JSON array of the saved scripts.")
@no_daemon_opt
@click.argument("args", nargs=-1, type=Utf8Text("an argument"))
def scripts(
    config_path: str | None, state_dir: str | None, as_json: bool, no_daemon: bool, args: tuple[str, ...]
) -> None:
    """Saved scripts, as `tools scripts` does them: list, `save NAME --description … --input-schema …`
    (the script on stdin), `NAME k=v …` to run one, `NAME --help` to describe one, `delete NAME`.

    Saving and deleting here need no `manage_scripts`: that setting is about what an agent's
    scripts may do; the person at the command line may always save."""
    ctx = click.get_current_context()
    if args[:1] in [(h,) for h in _HELP]:  # this command's help; `NAME --help` is the script's own, below
        click.echo(ctx.get_help())
        return
    if as_json:
        if args not in ((), ("list",)):
            raise click.UsageError("--json goes with `toolshell scripts list`; a run prints what the script prints")
        click.echo(json.dumps(_saved_scripts(config_path, state_dir), indent=2, ensure_ascii=False))
        return
    saving = args[:1] == ("save",)
    piped = ""
    if sys.stdin is not None and not sys.stdin.isatty():
        piped = read_stdin("the script on stdin" if saving else "the input on stdin", script=saving)
    if args[:1] in (("save",), ("delete",)) and not set(args[1:]) & set(_HELP):
        click.echo(_manage(config_path, state_dir, args, piped), nl=False)
        return
    words = scripts_script(list(args), piped)
    ctx.invoke(
        run, config_path=config_path, state_dir=state_dir, as_json=False, command=words, file=None, no_daemon=no_daemon
    )


def _manage(config_path: str | None, state_dir: str | None, args: tuple[str, ...], body: str) -> str:
    """`save` and `delete` straight on the store, with the grammar and checks of `tools scripts`."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.errors import ErrorCode, ToolshellError
    from toolshell.policy.plan import syntax_error
    from toolshell.scripts.store import ScriptStore
    from toolshell.scripts.verbs import parse_scripts_args
    from toolshell.store.engines import open_store

    def do() -> str:
        request = parse_scripts_args(args)
        name = request.name or ""  # `save` and `delete` always name one
        if request.verb == "save" and not body.strip():
            raise click.UsageError(f"pipe the script on stdin: cat script.sh | toolshell scripts save {name} …")
        if request.verb == "save" and (problem := syntax_error(body)) is not None:
            raise ToolshellError(ErrorCode.INVALID_INPUT, f"the script does not parse ({problem}); nothing was saved")
        store = open_store(cfg.state_location(load_config(config_path), state_dir))
        try:
            if request.verb == "delete":
                ScriptStore(store).delete(name)
                return f"deleted script {name}\n"
            saved = ScriptStore(store).save(name, body, request.description, request.input_schema)
            return f"saved script {saved.name}\n"
        finally:
            store.close()

    return guard(do)


def _saved_scripts(config_path: str | None, state_dir: str | None) -> list[dict[str, Any]]:
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.frontends.listings import script_json
    from toolshell.scripts.store import ScriptStore
    from toolshell.store.engines import open_store

    loaded = guard(lambda: load_config(config_path))
    store = guard(lambda: open_store(cfg.state_location(loaded, state_dir)))
    try:
        return [script_json(s) for s in ScriptStore(store).list()]
    finally:
        store.close()
