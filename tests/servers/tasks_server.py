"""An MCP server (the SDK's lowlevel server, 2026-07-28) that runs tools as tasks (SEP-2663).

Usage: `python tasks_server.py LOG [MODE ...]`; every request it gets is one JSON line in LOG
(`{"event": "call" | "get" | "update" | "cancel" | "refused", ...}`), for the tests to count.
Modes:

  require   a plain call (one that does not declare `io.modelcontextprotocol/tasks`) is refused
            with -32021 naming the extension: the server only runs its tools as tasks
  quiet     the extension is not advertised in `server/discover` (it is still served)
  rogue     run tools as tasks also for calls that do not declare the extension (it forbids that)
  floatpoll every task names `pollIntervalMs` 1.5 (not an integer: a malformed task)
  http      serve Streamable HTTP on 127.0.0.1 (a free port, logged as `{"event": "listening",
            "port": N}`) instead of stdio; `tasks/*` must then name their task in `Mcp-Name`

Tools (a call that declares the extension gets a `CreateTaskResult`, a plain one the result):
`slow` (done `seconds` after it started; polled at `poll_ms`), `ask` (asks for a name through
`inputRequests`, then greets; the answer shows on the second poll after it came, the question
still open on the first), `forever` (never done; a `tasks/cancel` ends it), `fail` (the
task fails with a JSON-RPC error), `sample` and `garble` (the task asks for a sampling, or for
something that is no request), `pester` (a new question on every poll, answered or not), `declared`
(answers at once, never as a task: whether this call declared the extension).
"""

from __future__ import annotations

import json
import secrets
import socket
import sys
import time
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from toolshell.frontends.serve.tasks.wire import declared, require_declared, require_name_header
from toolshell.tasks_wire import EXTENSION, TaskParams, UpdateParams

LOG = sys.argv[1]
MODES = set(sys.argv[2:])
TASKS: dict[str, dict[str, Any]] = {}
SAMPLING = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
GARBLE = {"method": "nope/never", "params": {"x": 1}}
QUESTION = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "What is your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
}


def log(event: str, **fields: Any) -> None:
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": event, **fields}) + "\n")


def _tool(name: str, description: str, props: dict[str, Any]) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object", "properties": props})


TOOLS = [
    _tool("slow", "Done after `seconds`.", {"seconds": {"type": "number"}, "poll_ms": {"type": "integer"}}),
    _tool("ask", "Asks for a name, then greets.", {}),
    _tool("forever", "Never done.", {}),
    _tool("fail", "The task fails.", {}),
    _tool("sample", "Asks for a sampling toolshell does not offer.", {}),
    _tool("garble", "Asks something that is not a request.", {}),
    _tool("pester", "Asks a new question on every poll.", {"poll_ms": {"type": "integer"}}),
    _tool("declared", "Whether this call declared the Tasks extension.", {}),
]


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_view(task_id: str) -> dict[str, Any]:
    """The task as `tasks/get` shows it, moved on by the time that passed."""
    task = TASKS[task_id]
    if task["status"] == "working" and task["tool"] == "slow" and time.monotonic() >= task["done_at"]:
        task.update(status="completed", result=text(f"slow done after {task['polls']} polls"))
    if task.get("answered", 0) > 1:  # an answer shows on the second poll after it came (as the SEP allows)
        task.update(status="completed", result=task.pop("greeting"))
    elif "answered" in task:
        task["answered"] += 1
    view = {"taskId": task_id, "status": task["status"], "createdAt": task["created"], "lastUpdatedAt": _now()}
    view["ttlMs"] = 600_000
    if task["status"] in ("working", "input_required"):
        view["pollIntervalMs"] = task["poll_ms"]
    if task["status"] == "input_required":
        key = f"q{task['polls']}" if task["tool"] == "pester" else "q1"
        view["inputRequests"] = {key: {"sample": SAMPLING, "garble": GARBLE}.get(task["tool"], QUESTION)}
    if task["status"] == "completed":
        view["result"] = task["result"]
    if task["status"] == "failed":
        view["error"] = {"code": types.INTERNAL_ERROR, "message": "the job broke"}
    return view


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    log("list", declared=declared(ctx))
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
    args = dict(params.arguments or {})
    tasks = declared(ctx)
    log("call", tool=params.name, declared=tasks)
    if params.name == "declared":
        return types.CallToolResult(content=[types.TextContent(text="declared" if tasks else "plain")])
    if not tasks and "rogue" not in MODES:
        if "require" in MODES:
            log("refused", tool=params.name)
            require_declared(ctx)
        if params.name == "slow":
            await anyio.sleep(float(args.get("seconds", 0)))
            return types.CallToolResult(content=[types.TextContent(text="slow done (plain)")])
        raise MCPError(types.INVALID_PARAMS, f"{params.name} runs only as a task")
    task_id = secrets.token_urlsafe(16)
    poll_ms: float = 1.5 if "floatpoll" in MODES else int(args.get("poll_ms", 200))
    asks = params.name in ("ask", "sample", "garble", "pester")
    status = "input_required" if asks else "failed" if params.name == "fail" else "working"
    done_at = time.monotonic() + float(args.get("seconds", 0))
    TASKS[task_id] = {"tool": params.name, "status": status, "created": _now(), "poll_ms": poll_ms}
    TASKS[task_id].update(done_at=done_at, polls=0)
    return {"resultType": "task", **{k: v for k, v in task_view(task_id).items() if k != "inputRequests"}}


def _find(ctx: ServerRequestContext[Any], task_id: str) -> dict[str, Any]:
    require_declared(ctx)
    require_name_header(ctx, task_id)  # over HTTP (stdio has no headers)
    if task_id not in TASKS:
        raise MCPError(types.INVALID_PARAMS, "Failed to retrieve task: Task not found")
    return TASKS[task_id]


async def get_task(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
    task = _find(ctx, params.task_id)
    task["polls"] += 1
    view = task_view(params.task_id)
    log("get", tool=task["tool"], status=view["status"])
    return {"resultType": "complete", **view}


async def update_task(ctx: ServerRequestContext[Any], params: UpdateParams) -> dict[str, Any]:
    task = _find(ctx, params.task_id)
    log("update", tool=task["tool"], responses=params.input_responses)
    answer = params.input_responses.get("q1")
    if task["tool"] == "ask" and task["status"] == "input_required" and isinstance(answer, dict):
        name = (answer.get("content") or {}).get("name") if answer.get("action") == "accept" else None
        task.update(greeting=text(f"hello {name}" if name else f"no name ({answer.get('action')})"), answered=0)
    return {"resultType": "complete"}


async def cancel_task(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
    task = _find(ctx, params.task_id)
    log("cancel", tool=task["tool"])
    if task["status"] in ("working", "input_required"):
        task["status"] = "cancelled"
    return {"resultType": "complete"}


async def main() -> None:
    server: Server[Any] = Server("tasks", on_list_tools=list_tools, on_call_tool=call_tool)
    server.add_request_handler("tasks/get", TaskParams, get_task)
    server.add_request_handler("tasks/update", UpdateParams, update_task)
    server.add_request_handler("tasks/cancel", TaskParams, cancel_task)
    if "quiet" not in MODES:
        server.extensions[EXTENSION] = {}
    if "http" in MODES:
        await _serve_http(server)
        return
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _serve_http(server: Server[Any]) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    web = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="error", lifespan="on"))
    log("listening", port=sock.getsockname()[1])
    await web.serve([sock])


if __name__ == "__main__":
    anyio.run(main)
