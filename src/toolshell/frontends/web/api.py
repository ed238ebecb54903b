"""The JSON API the page uses, and that anything holding the token can use too.

    GET    /api/approvals                  pending requests (the `approvals list --json` shape)
    POST   /api/approvals/{id}             {"answer": "once" | "always" | "deny"}
    GET    /api/grants                     the grants in force
    POST   /api/grants/revoke              {"tool": "tools github delete-branch"}
    GET    /api/timeline?session=&limit=&outcome=&server=
                                           shell calls with their tool.nested_call rows (every worker's)
    GET    /api/workers                    the workers on the store, alive or not
    GET    /api/servers                    state, protocol, tool count, last error, stderr tail
    GET    /api/stats?since=1h&server=     per server and tool: calls, errors, approvals, p50/p95/max
    GET    /api/scripts                    saved scripts, their triggers and trigger runs
    GET|PUT|DELETE /api/scripts/{name}     one script (saving and deleting need manage_scripts)
    POST   /api/scripts/{name}/run         run it with a JSON input, as a webhook trigger does

Answers go through the same stores the CLI uses, so a script parked in another process (serve)
sees the answer in the state database.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
from starlette.requests import Request
from starlette.routing import Route

from toolshell.config.names import fold
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.listings import approval_json, grant_json, runs_of, script_json, server_rows
from toolshell.frontends.web.http import ApiError, endpoint, json_body
from toolshell.host import Host
from toolshell.policy.approvals import EXPIRED, PENDING, Approvals
from toolshell.registry.server_identity import configured_identities
from toolshell.scripts.store import SavedScript, ScriptStore
from toolshell.scripts.verbs import check_can_save
from toolshell.session import Session
from toolshell.store.workers import Workers
from toolshell.timeline.events import OUTCOMES
from toolshell.timeline.sinks import LOST, query, session_workers
from toolshell.timeline.stats import parse_duration, stats_json, tool_stats

ANSWERS = ("once", "always", "deny")
ON_THE_PAGE = "the person on the web page"
MAX_TIMELINE = 500
RUNS_SHOWN = 10
_RUNS_SCANNED = 500  # shell calls looked through for a script's trigger runs


class Api:
    """The endpoints over one open `Host` (its state database, config and servers)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.approvals: Approvals = host.policy.approvals
        self.scripts = ScriptStore(host.store)
        self._viewer: Session | None = None

    def routes(self) -> list[Route]:
        return [
            Route("/api/approvals", endpoint(self.list_approvals)),
            Route("/api/approvals/{id}", endpoint(self.answer), methods=["POST"]),
            Route("/api/grants", endpoint(self.list_grants)),
            Route("/api/grants/revoke", endpoint(self.revoke), methods=["POST"]),
            Route("/api/timeline", endpoint(self.timeline)),
            Route("/api/workers", endpoint(self.workers)),
            Route("/api/servers", endpoint(self.servers)),
            Route("/api/stats", endpoint(self.stats)),
            Route("/api/scripts", endpoint(self.list_scripts)),
            Route("/api/scripts/{name}", endpoint(self.get_script), methods=["GET"]),
            Route("/api/scripts/{name}", endpoint(self.put_script), methods=["PUT"]),
            Route("/api/scripts/{name}", endpoint(self.delete_script), methods=["DELETE"]),
            Route("/api/scripts/{name}/run", endpoint(self.run_script), methods=["POST"]),
        ]

    # --- approvals and grants ----------------------------------------------------------------

    async def list_approvals(self, request: Request) -> Any:
        """Every worker's pending requests, each naming the worker its session's call ran on."""
        pending = self.approvals.list_pending()
        workers = session_workers(self.host.store, sorted({r.session_id for r in pending}))
        return [{**approval_json(r), "worker": workers.get(r.session_id)} for r in pending]

    async def answer(self, request: Request) -> Any:
        request_id = request.path_params["id"]
        body = await json_body(request, example='{"answer": "once"}') or {}
        answer = body.get("answer")
        if answer not in ANSWERS:
            raise ApiError(
                400, ErrorCode.INVALID_INPUT, f'answer with {{"answer": "once"}}, "always" or "deny"; got {answer!r}'
            )
        try:
            found = self.approvals.get(request_id)
        except ToolshellError:
            raise ApiError(404, ErrorCode.INVALID_INPUT, f"there is no approval request {request_id!r}") from None
        if found.status != PENDING:
            said = "expired unanswered" if found.status == EXPIRED else f"was already answered ({found.answer})"
            raise ApiError(409, ErrorCode.INVALID_INPUT, f"approval request {request_id!r} {said}")
        if answer == "deny":
            decided = self.approvals.deny(request_id, by=ON_THE_PAGE)
        else:
            decided = self.approvals.grant(request_id, always=answer == "always", by=ON_THE_PAGE)
        return approval_json(decided)

    async def list_grants(self, request: Request) -> Any:
        return [grant_json(g) for g in self.approvals.list_grants(configured_identities(self.host.config))]

    async def revoke(self, request: Request) -> Any:
        body = await json_body(request, example='{"tool": "tools github delete-branch"}') or {}
        tool = body.get("tool")
        if not isinstance(tool, str) or not tool.strip():
            raise ApiError(400, ErrorCode.INVALID_INPUT, 'name the tool, e.g. {"tool": "tools github delete-branch"}')
        return {"tool": tool, "revoked": self.approvals.revoke(tool)}

    # --- what happened and what is running ---------------------------------------------------

    async def timeline(self, request: Request) -> Any:
        session = request.query_params.get("session") or None
        raw = request.query_params.get("limit") or "50"
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 4) or not 1 <= int(raw) <= MAX_TIMELINE:
            raise ApiError(
                400, ErrorCode.INVALID_INPUT, f"limit must be a whole number from 1 to {MAX_TIMELINE}; got {raw!r}"
            )
        outcome = request.query_params.get("outcome") or None
        if outcome is not None and outcome not in (*OUTCOMES, LOST):
            raise ApiError(
                400, ErrorCode.INVALID_INPUT, f"outcome is one of {', '.join((*OUTCOMES, LOST))}; got {outcome!r}"
            )
        server = request.query_params.get("server") or None
        return query(self.host.store, session_id=session, limit=int(raw), outcome=outcome, server=server)

    async def workers(self, request: Request) -> Any:
        """The workers sharing this store (a dead one is listed until another worker ends what it left)."""
        listed = Workers(self.host.store, self.host.config.serve.heartbeat_seconds).listed()
        return [{**w, "this": w["id"] == self.host.worker_id} for w in listed]

    async def stats(self, request: Request) -> Any:
        """The `toolshell stats --json` shape: `{"since": unix seconds or null, "rows": […]}`, and
        `quotas` (each caller's calls and result bytes today) where `[[quotas]]` are configured."""
        raw, server = request.query_params.get("since"), request.query_params.get("server") or None
        try:
            since = None if not raw else time.time() - parse_duration(raw)
        except ValueError as e:
            raise ApiError(400, ErrorCode.INVALID_INPUT, f"since: {e}") from None
        shown = stats_json(tool_stats(self.host.store, since, server), since)
        if self.host.config.quotas:  # each caller's use of the day, as `toolshell stats` shows it
            shown["quotas"] = await anyio.to_thread.run_sync(self.host.policy.limits.usage)
        return shown

    async def servers(self, request: Request) -> Any:
        # Listing the catalog fills in the tool counts (lists are cached, so this is cheap).
        self._viewer = self._viewer or self.host.session(source="cli")
        await self.host.catalog(self._viewer)
        return server_rows(self.host.statuses(), self.host.redact)

    # --- saved scripts -----------------------------------------------------------------------

    async def list_scripts(self, request: Request) -> Any:
        rows = query(self.host.store, limit=_RUNS_SCANNED)
        return [self._script(s, rows) for s in self.scripts.list()]

    async def get_script(self, request: Request) -> Any:
        script = self.scripts.require(request.path_params["name"])
        return self._script(script, query(self.host.store, limit=_RUNS_SCANNED), body=True)

    async def put_script(self, request: Request) -> Any:
        name = request.path_params["name"]
        check_can_save(self.host.config.tools_in_shell.manage_scripts, "save")
        body = await json_body(request, example='{"body": "echo hi", "description": "…"}') or {}
        text, description, schema = body.get("body"), body.get("description", ""), body.get("input_schema")
        if not isinstance(text, str) or not isinstance(description, str):
            raise ApiError(400, ErrorCode.INVALID_INPUT, 'send {"body": "<bash script>", "description": "<one line>"}')
        if schema is not None and not isinstance(schema, dict):
            raise ApiError(
                400, ErrorCode.INVALID_INPUT, 'input_schema must be a JSON Schema object, e.g. {"type": "object"}'
            )
        saved = self.scripts.save(name, text, description, schema)
        return self._script(saved, [], body=True)

    async def delete_script(self, request: Request) -> Any:
        check_can_save(self.host.config.tools_in_shell.manage_scripts, "delete")
        name = self.scripts.require(request.path_params["name"]).name
        self.scripts.delete(name)
        return {"deleted": name}

    async def run_script(self, request: Request) -> Any:
        script = self.scripts.require(request.path_params["name"])
        arguments = await json_body(request, required=False, example='{"repo": "acme/api"}') or {}
        self.scripts.check_input(script, arguments)
        outcome = await self.host.run_saved_script(script.name, arguments, "trigger")
        return {"script": script.name, **outcome.to_dict()}

    def _script(self, script: SavedScript, rows: list[dict[str, Any]], *, body: bool = False) -> dict[str, Any]:
        triggers = [
            {"name": t.name, "schedule": t.schedule, "webhook": t.webhook}
            for t in self.host.config.triggers
            if fold(t.script) == fold(script.name)
        ]
        runs = runs_of(script.name, rows)[:RUNS_SHOWN]
        return {**script_json(script, body=body), "triggers": triggers, "runs": runs}
