"""The conformance suite's client adapter: toolshell, through its public API, as the client under test.

    MCP_CONFORMANCE_SCENARIO=initialize python tests/conformance/client.py http://127.0.0.1:PORT/mcp

The suite starts a mock server for the scenario and runs this with the server's URL as the last
argument. The adapter configures one `http` server at that URL, opens a `toolshell.Host`, and runs
one script that lists the server's tools and calls each of them through `tools`. Elicitation is
accepted as the form shows it, defaults filled in (SEP-1034, what a person accepting it sends). Where a
scenario passes OAuth settings in `MCP_CONFORMANCE_CONTEXT`, they become the server's `oauth` settings.

It prints the script's result as JSON and exits 0 when the script succeeded, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    handle_protected_resource_response,
)

from toolshell import Config, Host

SERVER = "conformance"
ARGUMENTS = {"add_numbers": "a=5 b=3"}
"""Arguments for the scenarios' tools that take any; every other tool is called without."""
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""The client ID metadata document the suite's authorization servers accept (as its own clients use)."""
SECRET_ENV = "CONFORMANCE_CLIENT_SECRET"
KEY_ENV = "CONFORMANCE_CLIENT_KEY"
BROWSER = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).with_name('browser.py')))} %s"
ID_JAG_COMMAND = [sys.executable, str(Path(__file__).with_name("id_jag.py"))]
"""Leg 1 of cross-app access for the suite's IdP: the `assertion_command` of an `identity_assertion` grant."""
IDP_ENV = {
    "idp_id_token": "CONFORMANCE_IDP_ID_TOKEN",
    "idp_token_endpoint": "CONFORMANCE_IDP_TOKEN_ENDPOINT",
    "idp_client_id": "CONFORMANCE_IDP_CLIENT_ID",
}
"""What `id_jag.py` reads from its environment, by the context key it comes from."""


class AcceptDefaults:
    """A person who accepts every form as shown: each field the schema gives a default has that value."""

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        schema = getattr(params, "requested_schema", None) or {}
        fields = schema.get("properties", {})
        return types.ElicitResult(
            action="accept", content={k: f["default"] for k, f in fields.items() if "default" in f}
        )


def oauth_settings(scenario: str, context: dict[str, Any]) -> dict[str, Any] | None:
    """The server's `oauth` table for an `auth/*` scenario, from `MCP_CONFORMANCE_CONTEXT` where it
    gives a client; None (toolshell's defaults) for the others."""
    if not scenario.startswith("auth/"):
        return None
    # Nobody watches: a call that needs a login starts one, and `$BROWSER` (browser.py) approves it.
    settings: dict[str, Any] = {"login": "on_call"}
    if "client_id" in context:  # a client registered beforehand
        settings["client_id"] = context["client_id"]
    else:
        settings["client_metadata_url"] = CLIENT_METADATA_URL
    if "client_secret" in context:
        settings["client_secret_env"] = SECRET_ENV
    if "private_key_pem" in context:  # client credentials, authenticated by a signed JWT
        settings.update(
            grant="client_credentials",
            token_endpoint_auth_method="private_key_jwt",
            private_key_env=KEY_ENV,
            signing_algorithm=context.get("signing_algorithm", "RS256"),
        )
        settings.pop("client_metadata_url", None)
    if context.get("name") == "auth/client-credentials-basic":
        settings.update(grant="client_credentials", token_endpoint_auth_method="client_secret_basic")
    if "idp_id_token" in context:  # cross-app access (SEP-990): an ID-JAG from the IdP, for the issuer found
        settings.update(grant="identity_assertion", issuer=context["issuer"], assertion_command=ID_JAG_COMMAND)
        del settings["login"]
    return settings


async def authorization_server(url: str) -> str:
    """The issuer the server's protected-resource metadata names: the configured `issuer` a person
    would be given for cross-app access, which the SDK takes as configuration, never discovery."""
    async with httpx2.AsyncClient(timeout=30) as http:
        for candidate in build_protected_resource_metadata_discovery_urls(None, url):
            metadata = await handle_protected_resource_response(
                await http.send(create_oauth_metadata_request(candidate))
            )
            if metadata is not None:
                return str(metadata.authorization_servers[0]).rstrip("/")
    raise SystemExit(f"no protected-resource metadata for {url}")


def config(url: str, scenario: str, context: dict[str, Any]) -> Config:
    server: dict[str, Any] = {"name": SERVER, "type": "http", "url": url}
    oauth = oauth_settings(scenario, context)
    if oauth is not None:
        server["oauth"] = oauth
    return Config.model_validate(
        {
            "include_builtins": False,
            # The mock servers' tools declare nothing about themselves; nobody is here to approve.
            "approval": {"mode": "off"},
            "mcp": {"servers": [server]},
        }
    )


def script(tools: list[str]) -> str:
    lines = [f"tools {SERVER} --help"]
    lines += [f"tools {SERVER} {shlex.quote(t)} {ARGUMENTS.get(t, '')}".rstrip() for t in tools]
    return "set -e\n" + "\n".join(lines) + "\n"


async def run(url: str, scenario: str, context: dict[str, Any], state: str) -> int:
    if "idp_id_token" in context:
        context = {**context, "issuer": await authorization_server(url)}
    async with Host.open(config(url, scenario, context), state_dir=state) as host:
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
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    os.environ["BROWSER"] = BROWSER
    if "client_secret" in context:
        os.environ[SECRET_ENV] = context["client_secret"]
    if "private_key_pem" in context:
        os.environ[KEY_ENV] = context["private_key_pem"]
    os.environ.update({env: context[key] for key, env in IDP_ENV.items() if key in context})
    with tempfile.TemporaryDirectory() as state:
        os.environ["TOOLSHELL_STATE_DIR"] = state  # tokens and state of one run, never the user's
        return anyio.run(run, argv[-1], scenario, context, state)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
