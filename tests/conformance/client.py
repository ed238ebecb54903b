"""The conformance suite's client adapter: toolshell, through its public API, as the client under test.

    MCP_CONFORMANCE_SCENARIO=initialize python tests/conformance/client.py http://127.0.0.1:PORT/mcp

The suite starts a mock server for the scenario and runs this with the server's URL as the last
argument. The adapter configures one `http` server at that URL, opens a `toolshell.Host`, and runs
one script that lists the server's tools and calls each of them through `tools`. Elicitation is
accepted as the form shows it, defaults filled in (SEP-1034, what a person accepting it sends). Where a
scenario passes OAuth settings in `MCP_CONFORMANCE_CONTEXT`, they become the server's `auth` settings.

It prints the script's result as JSON and exits 0 when the script succeeded, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Any

import anyio
import mcp_types as types

from toolshell import Config, Host

SERVER = "conformance"
ARGUMENTS = {"add_numbers": "a=5 b=3"}
"""Arguments for the scenarios' tools that take any; every other tool is called without."""


class AcceptDefaults:
    """A person who accepts every form as shown: each field the schema gives a default has that value."""

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        schema = getattr(params, "requested_schema", None) or {}
        fields = schema.get("properties", {})
        return types.ElicitResult(
            action="accept", content={k: f["default"] for k, f in fields.items() if "default" in f}
        )


def server_config(url: str, context: dict[str, Any]) -> dict[str, Any]:
    """One `http` server at `url`, with the OAuth settings of a scenario that gives any."""
    server: dict[str, Any] = {"name": SERVER, "type": "http", "url": url}
    auth = auth_settings(context)
    if auth:
        server["auth"] = auth
    return server


def auth_settings(context: dict[str, Any]) -> dict[str, Any]:
    """`MCP_CONFORMANCE_CONTEXT` as the server's `auth` table (empty when the scenario gives none)."""
    return {}


def config(url: str, context: dict[str, Any]) -> Config:
    return Config.model_validate(
        {
            "include_builtins": False,
            # The mock servers' tools declare nothing about themselves; nobody is here to approve.
            "approval": {"mode": "off"},
            "mcp": {"servers": [server_config(url, context)]},
        }
    )


def script(tools: list[str]) -> str:
    lines = [f"tools {SERVER} --help"]
    lines += [f"tools {SERVER} {shlex.quote(t)} {ARGUMENTS.get(t, '')}".rstrip() for t in tools]
    return "set -e\n" + "\n".join(lines) + "\n"


async def run(url: str, context: dict[str, Any]) -> int:
    async with Host.open(config(url, context)) as host:
        session = host.session(answerer=AcceptDefaults())
        entries = [e for e in await host.list_tools(session) if e.server == SERVER]
        result = await session.run(script([e.name for e in entries]))
        session.close()
    print(json.dumps(result.to_json(), ensure_ascii=False))
    return 0 if result.success else 1


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: client.py [args...] SERVER_URL (the conformance suite appends the URL)", file=sys.stderr)
        return 2
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    return anyio.run(run, argv[-1], context)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
