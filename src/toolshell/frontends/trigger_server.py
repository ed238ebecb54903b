"""`toolshell triggers`: schedules and webhooks that run saved scripts with no model call.

Runs are recorded in the timeline like any other shell call (source `trigger`) and are never
asked anything: a call that needs approval stops the run and leaves a pending request. Every
server on one state store claims its runs there, so each slot runs in one of them.
"""

from __future__ import annotations

import sys

import anyio
import uvicorn

from toolshell.config import Config
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.webhook import webhook_app
from toolshell.host import Host
from toolshell.scripts.claims import TriggerClaims
from toolshell.scripts.triggers import RunOutcome, Trigger, TriggerRunner, tokens_from_env


def _triggers(config: Config) -> list[Trigger]:
    return [Trigger.from_config(t) for t in config.triggers]


async def fire(config: Config, state_dir: str | None, name: str) -> RunOutcome:
    found = {t.name: t for t in _triggers(config)}
    if name not in found:
        known = ", ".join(found) or "none"
        raise ToolshellError(ErrorCode.UNKNOWN_COMMAND, f"no trigger named {name!r} (configured: {known})")
    async with Host.open(config, state_dir=state_dir) as host:
        return await host.run_saved_script(found[name].script, dict(found[name].input))


async def serve_triggers(config: Config, state_dir: str | None, bind: str, port: int) -> None:
    async with Host.open(config, state_dir=state_dir) as host:
        found = _triggers(config)
        runner = TriggerRunner(found, host.run_saved_script, claims=TriggerClaims(host.store))
        app = webhook_app(runner, tokens_from_env(found))
        server = uvicorn.Server(uvicorn.Config(app, host=bind, port=port, log_level="warning"))
        hooks = [t.name for t in found if t.webhook]
        print(
            f"toolshell triggers: {len(found) - len(hooks)} scheduled; webhooks at http://{bind}:{port}/hooks/"
            f"{{{','.join(hooks)}}}"
            if hooks
            else f"toolshell triggers: {len(found)} scheduled, no webhooks",
            file=sys.stderr,
            flush=True,
        )
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            await server.serve()
            tg.cancel_scope.cancel()
