"""A small stdio MCP server (protocol 2025-11-25) that misbehaves on request, for connection tests.

It is plain JSON-RPC on purpose: it starts in milliseconds and can fail in ways a well-behaved SDK
server never would. Usage: `python stdio_server.py [MODE ...]` with modes:

  hang-startup   read requests but never answer (not even the handshake)
  only-noise     print non-JSON lines on stdout and never answer
  noise          print a non-JSON line on stdout before every answer (still works)
  spawn-child    start a child process (same process group) that sleeps; exit cleanly on stdin EOF

It logs `listing tools` on stderr for each tools/list. Tools: `echo` (text), `crash` (last words on
stderr, then exit 3), `hang` (never answers; logs `cancelled <id>` on stderr when the client cancels
it), `pids` (JSON: own pid, child pid).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

MODES = set(sys.argv[1:])
_out = threading.Lock()
_child: subprocess.Popen[bytes] | None = None

TOOLS = [
    {"name": name, "description": desc, "inputSchema": {"type": "object", "properties": props}}
    for name, desc, props in [
        ("echo", "Echo the text back.", {"text": {"type": "string"}}),
        ("crash", "Exit the server at once.", {}),
        ("hang", "Never answer.", {}),
        ("pids", "The server's and its child's pids.", {}),
    ]
]


def send(message: dict) -> None:
    with _out:
        if "noise" in MODES:
            sys.stdout.write("log: about to answer\n")
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def result(rid: object, value: dict) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def text(rid: object, value: str) -> None:
    result(rid, {"content": [{"type": "text", "text": value}], "isError": False})


def call_tool(rid: object, params: dict) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        text(rid, str(args.get("text", "")))
    elif name == "crash":
        sys.stderr.write("fatal: the crash tool was called\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "hang":
        return
    elif name == "pids":
        text(rid, json.dumps({"pid": os.getpid(), "child": _child.pid if _child else None}))
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})


def handle(message: dict) -> None:
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method == "notifications/cancelled":
        sys.stderr.write(f"cancelled {params.get('requestId')}\n")
        sys.stderr.flush()
    elif rid is None:
        return
    elif method == "initialize":
        result(
            rid,
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "stdio-test-server", "version": "1"},
            },
        )
    elif method == "tools/list":
        sys.stderr.write("listing tools\n")
        sys.stderr.flush()
        result(rid, {"tools": TOOLS})
    elif method == "tools/call":
        threading.Thread(target=call_tool, args=(rid, params), daemon=True).start()
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}})


def main() -> None:
    global _child
    sys.stderr.write("stdio-test-server starting\n")
    sys.stderr.flush()
    if "spawn-child" in MODES:
        _child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    for line in sys.stdin:
        if "hang-startup" in MODES:
            continue
        if "only-noise" in MODES:
            sys.stdout.write("hello from a server that logs to stdout\n")
            sys.stdout.flush()
            continue
        handle(json.loads(line))
    if "hang-startup" in MODES:
        time.sleep(300)


if __name__ == "__main__":
    main()
