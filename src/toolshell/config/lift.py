"""Literal secrets in another host's server list become `${VAR}` references when it is imported.

Host files (`mcpServers` JSON, Codex TOML) often hold a bearer token or an API key as plain text. A
`toolshell.toml` is meant to be read, shared and checked in, so `config import` and `setup --move`
write `${VAR}` in its place and name the variable to set; the value itself is never printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from toolshell.redact import secret_name

_SCHEME = re.compile(r"(?i)^(bearer|basic|token)\s+(\S.*)$")
_NOT_NAME = re.compile(r"[^A-Za-z0-9]+")


@dataclass(frozen=True)
class Lifted:
    """One literal secret taken out: where it was (`mcp.servers[github].headers.Authorization`)
    and the variable that now holds it."""

    place: str
    variable: str


def lift_secrets(servers: list[dict[str, Any]]) -> list[Lifted]:
    """Replace, in place, each literal secret of these `[[mcp.servers]]` tables with `${VAR}`: an
    `Authorization` header's credentials, a header or `env` value whose name says it is a secret.
    A value that already references a variable is left alone."""
    lifted: list[Lifted] = []
    taken: dict[str, str] = {}  # variable -> the value it stands for (two servers may share one)
    for server in servers:
        name = str(server.get("name", ""))
        for field in ("headers", "env"):
            values = server.get(field)
            if isinstance(values, dict):
                lifted += _lift_table(name, field, values, taken)
    return lifted


def _lift_table(server: str, field: str, values: dict[str, Any], taken: dict[str, str]) -> list[Lifted]:
    lifted: list[Lifted] = []
    for key, value in values.items():
        if not isinstance(value, str) or "${" in value or not value.strip():
            continue
        scheme = _SCHEME.match(value) if key.lower() in ("authorization", "proxy-authorization") else None
        if scheme is None and not secret_name(key):
            continue
        secret = scheme.group(2) if scheme else value
        base = f"{server}_TOKEN" if scheme or field == "headers" else key
        variable = _free(_variable(base), secret, taken, server)
        values[key] = f"{scheme.group(1)} ${{{variable}}}" if scheme else f"${{{variable}}}"
        lifted.append(Lifted(f"mcp.servers[{server}].{field}.{key}", variable))
    return lifted


def _variable(text: str) -> str:
    name = _NOT_NAME.sub("_", text).strip("_").upper() or "TOKEN"
    return name if not name[0].isdigit() else f"_{name}"


def _free(variable: str, secret: str, taken: dict[str, str], server: str) -> str:
    """`variable`, unless another value took it already: then one prefixed with the server's name."""
    candidate, n = variable, 1
    while taken.get(candidate, secret) != secret:
        n += 1
        candidate = _variable(f"{server}_{variable}") if n == 2 else f"{_variable(f'{server}_{variable}')}_{n}"
    taken[candidate] = secret
    return candidate
