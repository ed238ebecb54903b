"""`toolshell triggers`: schedules and webhooks that run saved scripts with no model call.

Runs are recorded in the timeline like any other shell call (source `trigger`) and are never
asked anything: a call that needs approval stops the run and leaves a pending request. Every
server on one state store claims its runs there, so each slot runs in one of them.

A trigger server registers as a worker and beats (`frontends.heartbeat`), so a run whose server
was killed is ended as lost instead of staying `running`. With webhooks it listens on one port for
`POST /hooks/<trigger>` and the probes `/healthz` and `/readyz` (`frontends.serve.health`); with
none it opens a port only when given one, for the probes alone, so several run on one host.
SIGTERM drains as `serve` does: not ready at once, webhook runs in flight finish.
"""

from __future__ import annotations

import signal
import sys

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount

from toolshell.config import Config
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.heartbeat import registered
from toolshell.frontends.serve.drain import CLOSE_SECONDS, Drain, DrainingServer
from toolshell.frontends.serve.health import Readiness, health_routes
from toolshell.frontends.webhook import webhook_app
from toolshell.host import Host, state_ring
from toolshell.scripts.claims import TriggerClaims
from toolshell.scripts.triggers import RunOutcome, Trigger, TriggerRunner, tokens_from_env
from toolshell.store.workers import Workers

WEBHOOK_PORT = 8766
"""The port webhooks are served on when `--port` is not given."""


def _triggers(config: Config) -> list[Trigger]:
    return [Trigger.from_config(t) for t in config.triggers]


async def fire(config: Config, state_dir: str | None, name: str) -> RunOutcome:
    found = {t.name: t for t in _triggers(config)}
    if name not in found:
        known = ", ".join(found) or "none"
        raise ToolshellError(ErrorCode.UNKNOWN_COMMAND, f"no trigger named {name!r} (configured: {known})")
    async with Host.open(config, state_dir=state_dir) as host:
        return await host.run_saved_script(found[name].script, dict(found[name].input))


def listened_port(config: Config, port: int | None) -> int | None:
    """The port `triggers serve` opens: `port`, or `WEBHOOK_PORT` when there are webhooks; none
    without webhooks unless one is given."""
    if port is None and any(t.webhook for t in config.triggers):
        return WEBHOOK_PORT
    return port


async def serve_triggers(config: Config, state_dir: str | None, bind: str, port: int | None) -> None:
    """Run the schedules, and listen on `listened_port(config, port)` if any."""
    port = listened_port(config, port)
    async with Host.open(config, state_dir=state_dir) as host:
        found = _triggers(config)
        hooks = [t.name for t in found if t.webhook]
        heartbeat = config.serve.heartbeat_seconds
        claims = TriggerClaims(host.store, workers=Workers(host.store, heartbeat), worker=host.worker_id)
        runner = TriggerRunner(found, host.run_saved_script, claims=claims)
        try:
            state_ring(host)  # a local store's key is made now; a missing shared one shows on /readyz
        except ToolshellError:
            pass
        drain = Drain(config.serve.drain_seconds)
        server = None if port is None else _server(runner, found, host, drain, bind, port)
        print(_started(found, hooks, bind, port), file=sys.stderr, flush=True)
        async with registered(host, heartbeat, claims), anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            if server is None:
                await _until_stopped()
            else:
                await server.serve()
            tg.cancel_scope.cancel()


def _server(
    runner: TriggerRunner, found: list[Trigger], host: Host, drain: Drain, bind: str, port: int
) -> DrainingServer:
    routes: list[BaseRoute] = [*health_routes(Readiness(host.store, host.config.serve, host.state_dir, drain))]
    if any(t.webhook for t in found):
        routes.append(Mount("/", app=drain.guard(webhook_app(runner, tokens_from_env(found)))))
    app = Starlette(routes=routes)
    # h11, not httptools (which `serve` uses): it lets a malformed Idempotency-Key through to the app, which
    # answers what is wrong with it in one JSON line; httptools refuses the request in plain text first.
    config = uvicorn.Config(
        app, host=bind, port=port, http="h11", log_level="warning", timeout_graceful_shutdown=CLOSE_SECONDS
    )
    return DrainingServer(config, drain)


def _started(found: list[Trigger], hooks: list[str], bind: str, port: int | None) -> str:
    scheduled = len(found) - len(hooks)
    if hooks:
        return (
            f"toolshell triggers: {scheduled} scheduled; webhooks at http://{bind}:{port}/hooks/{{{','.join(hooks)}}}"
        )
    if port is None:
        return f"toolshell triggers: {scheduled} scheduled, no webhooks, no port open"
    return f"toolshell triggers: {scheduled} scheduled, no webhooks; health at http://{bind}:{port}/healthz"


async def _until_stopped() -> None:
    """Wait for SIGTERM or SIGINT (no server runs to take them)."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            return
