"""`GET /healthz` and `GET /readyz` of `serve --http`: for probes and load balancers.

- `/healthz` answers `200 ok` while the process serves requests at all (a liveness probe).
- `/readyz` answers `200 ready` when this worker can take work: the state store answers and has
  every migration this worker applied at start, the state key ring is there, the worker is not
  draining (`frontends.serve.drain`) and, under `serve --processes N`, every worker of the machine
  serves (`frontends.serve.processes`). Otherwise `503` and one line saying which.

Neither needs a token nor passes the Host check (a kubelet sends `Host: <pod IP>`); so they say
nothing about the configuration: no URL, no path, no error text of the store.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from toolshell.config.serve import ServeConfig
from toolshell.errors import ToolshellError
from toolshell.frontends.serve.drain import Drain
from toolshell.store.keys import KEY_FILE, key_ring
from toolshell.store.protocol import StateStore

LIVE_PATH = "/healthz"
READY_PATH = "/readyz"
STORE_SECONDS = 3.0
"""A store that does not answer `/readyz`'s query this fast counts as unreachable."""
_NO_CACHE = {"cache-control": "no-store"}


class Readiness:
    """What `/readyz` checks, for one serving worker.

    Args:
        store: the state store the worker serves from (its migrations are read now, at start).
        serve: `[serve]`, for the variable that holds the key ring.
        state_dir: where a local store keeps its own key.
        drain: the worker's drain; once it began, the worker is not ready.
        pod: why another worker of this machine is not (`serve --processes`); None when all are.
    """

    def __init__(
        self,
        store: StateStore,
        serve: ServeConfig,
        state_dir: Path,
        drain: Drain,
        pod: Callable[[], str | None] | None = None,
    ) -> None:
        self.store = store
        self.serve = serve
        self.state_dir = state_dir
        self.drain = drain
        self.pod = pod
        self.expected = self._migrated()

    def _migrated(self) -> dict[str, int]:
        rows = self.store.query(
            "SELECT component, MAX(version) AS version FROM toolshell_migrations GROUP BY component"
        )
        return {str(r["component"]): int(r["version"]) for r in rows}

    async def reason(self) -> str | None:
        """Why this worker should get no work now, in one line; None when it is ready."""
        if self.drain.draining:
            return "draining: this worker is shutting down"
        others = self.pod() if self.pod is not None else None
        if others is not None:
            return others
        if not self._ring_present():
            return "the state key ring is missing"
        try:
            with anyio.fail_after(STORE_SECONDS):
                found = await anyio.to_thread.run_sync(self._migrated, abandon_on_cancel=True)
        except TimeoutError:
            return "the state store does not answer"
        except Exception:  # what the store said may name hosts or users: not for an unauthenticated probe
            return "the state store is unreachable"
        if any(found.get(component, 0) < version for component, version in self.expected.items()):
            return "the state store is not migrated (it lost tables this worker uses)"
        return None

    def _ring_present(self) -> bool:
        value = os.environ.get(self.serve.state_keys_env)
        if not value:
            return not self.store.shared and (self.state_dir / KEY_FILE).is_file()
        try:
            return bool(key_ring(value, self.state_dir, shared=self.store.shared, env_name=self.serve.state_keys_env))
        except ToolshellError:
            return False


def health_routes(readiness: Readiness) -> list[Route]:
    """The two probe routes (GET and HEAD)."""

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok\n", headers=_NO_CACHE)

    async def readyz(_: Request) -> Response:
        reason = await readiness.reason()
        if reason is None:
            return PlainTextResponse("ready\n", headers=_NO_CACHE)
        return PlainTextResponse(f"not ready: {reason}\n", status_code=503, headers=_NO_CACHE)

    methods = ["GET", "HEAD"]
    return [Route(LIVE_PATH, healthz, methods=methods), Route(READY_PATH, readyz, methods=methods)]
