"""The conformance adapter's `assertion_command`: leg 1 of cross-app access (SEP-990) at the suite's IdP.

    CONFORMANCE_IDP_TOKEN_ENDPOINT=... CONFORMANCE_IDP_ID_TOKEN=... CONFORMANCE_IDP_CLIENT_ID=... \\
    TOOLSHELL_OAUTH_AUDIENCE=... TOOLSHELL_OAUTH_RESOURCE=... python tests/conformance/id_jag.py

The SDK leaves getting the ID-JAG to the deployment (its IdP login, then an RFC 8693 token
exchange), and toolshell to a command the person configures; this is that command for the suite's
mock IdP, as the reference SDK's own conformance client does it: the person's ID token (which the
scenario gives) is exchanged for an ID-JAG naming the authorization server and the MCP server that
toolshell passes in. Prints the ID-JAG; exits 1 with the IdP's answer on stderr otherwise.
"""

from __future__ import annotations

import os
import sys

import httpx2

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"


def main() -> int:
    env = os.environ
    form = {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG,
        "subject_token": env["CONFORMANCE_IDP_ID_TOKEN"],
        "subject_token_type": ID_TOKEN,
        "audience": env["TOOLSHELL_OAUTH_AUDIENCE"],
        "resource": env["TOOLSHELL_OAUTH_RESOURCE"],
        "client_id": env["CONFORMANCE_IDP_CLIENT_ID"],
    }
    try:
        response = httpx2.post(env["CONFORMANCE_IDP_TOKEN_ENDPOINT"], data=form, timeout=30)
    except httpx2.HTTPError as e:
        print(f"id_jag.py: {e}", file=sys.stderr)
        return 1
    if response.status_code != 200 or response.json().get("issued_token_type") != ID_JAG:
        print(f"id_jag.py: the IdP answered {response.status_code}: {response.text}", file=sys.stderr)
        return 1
    print(response.json()["access_token"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
