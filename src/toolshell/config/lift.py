"""Literal secrets in another host's server list become `${VAR}` references when it is imported.

Host files (`mcpServers` JSON, Codex TOML) often hold a bearer token or an API key as plain text. A
`toolshell.toml` is meant to be read, shared and checked in, so `config import` and `setup --move`
write `${VAR}` in its place and name the variable to set; the value itself is never printed.

What is lifted is what the masking rule (`config.expansion`) would mask once written as a
variable, and every credential shape `secrets_scan` knows, wherever it stands:
- an `Authorization` header's credentials (its scheme stays: `Bearer ${GITHUB_TOKEN}`), and a
  header or `env` value whose name is a secret name;
- in `args`, the value a secret-named flag takes (`--token=X`, `--api-key X`);
- a URL's password, and a query value whose name is a secret name (`?api_key=`), in `url`,
  `args` and `env`;
- an AWS key, a GitHub, Slack or OpenAI token, a JWT, a private key (and the other shapes of
  detect-secrets) in `command`, `args`, `env`, `cwd`, `url` and `headers`.
Other values stay literal: once a variable, a plain header or query value (`eu`, `application/json`)
would be masked in every output. `*_env` settings name variables and hold no value to lift. A
lifted variable's name is a secret name (`SLACK` becomes `${SLACK_TOKEN}`), so its value is masked
wherever the config puts it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from toolshell.redact import secret_name
from toolshell.secrets_scan import find_credentials

_SCHEME = re.compile(r"(?i)^(bearer|basic|token)\s+(\S.*)$")
_NOT_NAME = re.compile(r"[^A-Za-z0-9]+")
_URL_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")


@dataclass(frozen=True)
class Lifted:
    """One literal secret taken out: where it was (`mcp.servers[github].headers.Authorization`)
    and the variable that now holds it."""

    place: str
    variable: str


class _Lifter:
    """Lifts the secrets of one server; `taken` (variable -> value) is shared by all servers, so
    two servers with one token share its variable and two tokens never share one."""

    def __init__(self, server: str, taken: dict[str, str]) -> None:
        self.server = server
        self.taken = taken
        self.lifted: list[Lifted] = []

    def variable(self, base: str, secret: str, place: str) -> str:
        name = _variable(base)
        if not secret_name(name):
            name += "_TOKEN"
        candidate, n = name, 1
        while self.taken.get(candidate, secret) != secret:
            n += 1
            prefixed = _variable(f"{self.server}_{name}")
            candidate = prefixed if n == 2 else f"{prefixed}_{n}"
        self.taken[candidate] = secret
        self.lifted.append(Lifted(place, candidate))
        return f"${{{candidate}}}"

    def whole(self, value: str, base: str, place: str) -> str:
        """`value` is a secret: all of it (an `Authorization` credential: all but its scheme)."""
        last = place.rpartition(".")[2].lower()
        scheme = _SCHEME.match(value) if last in ("authorization", "proxy-authorization") else None
        if scheme:
            return f"{scheme.group(1)} {self.variable(f'{self.server}_TOKEN', scheme.group(2), place)}"
        return self.variable(base, value, place)

    def parts(self, value: str, place: str, env_name: str | None = None) -> str:
        """A URL's password and query values, then each credential shape, in `value`."""
        value = self._url(value, place)
        for found in reversed(find_credentials(value)):
            if _in_reference(value, found.start, found.end):
                continue
            base = env_name or f"{self.server}_{found.kind}"
            secret = value[found.start : found.end]
            value = value[: found.start] + self.variable(base, secret, place) + value[found.end :]
        return value

    def _url(self, value: str, place: str) -> str:
        mark = value.find("://")
        if mark <= 0:
            return value
        start = mark
        while start > 0 and value[start - 1] in _URL_SCHEME_CHARS:
            start -= 1
        end = next((i for i in range(mark, len(value)) if value[i].isspace()), len(value))
        url = value[start:end]
        return value[:start] + self._query(self._password(url, place), place) + value[end:]

    def _password(self, url: str, place: str) -> str:
        begin = url.index("://") + 3
        stop = min((i for i in (url.find(c, begin) for c in "/?#") if i >= 0), default=len(url))
        userinfo, at, _ = url[begin:stop].rpartition("@")
        user, colon, password = userinfo.partition(":")
        if not (at and colon and password) or "${" in password:
            return url
        lifted = self.variable(f"{self.server}_PASSWORD", password, place)
        return url[:begin] + f"{user}:{lifted}" + url[begin + len(userinfo) :]

    def _query(self, url: str, place: str) -> str:
        begin = url.find("?")
        if begin < 0:
            return url
        stop = url.find("#", begin)
        stop = len(url) if stop < 0 else stop
        pairs = []
        for pair in url[begin + 1 : stop].split("&"):
            key, equals, value = pair.partition("=")
            if equals and value and "${" not in value and secret_name(key):
                pair = f"{key}={self.variable(f'{self.server}_{key}', value, place)}"
            pairs.append(pair)
        return url[: begin + 1] + "&".join(pairs) + url[stop:]


def lift_secrets(servers: list[dict[str, Any]]) -> list[Lifted]:
    """Replace, in place, each literal secret of these `[[mcp.servers]]` tables with `${VAR}`
    (see the module's list). A value that already references a variable keeps it."""
    taken: dict[str, str] = {}
    lifted: list[Lifted] = []
    for server in servers:
        lifter = _Lifter(str(server.get("name", "")), taken)
        label = f"mcp.servers[{lifter.server}]"
        for key in ("command", "cwd", "url"):
            if isinstance(server.get(key), str):
                server[key] = lifter.parts(server[key], f"{label}.{key}")
        if isinstance(server.get("args"), list):
            _lift_args(lifter, server["args"], f"{label}.args")
        for field in ("headers", "env"):
            if isinstance(server.get(field), dict):
                _lift_table(lifter, field, server[field], f"{label}.{field}")
        lifted += lifter.lifted
    return lifted


def _lift_table(lifter: _Lifter, field: str, values: dict[str, Any], label: str) -> None:
    for key, value in values.items():
        if not isinstance(value, str) or not value.strip():
            continue
        place = f"{label}.{key}"
        authorization = field == "headers" and key.lower() in ("authorization", "proxy-authorization")
        if "${" not in value and (authorization or secret_name(key)):
            values[key] = lifter.whole(value, key if field == "env" else f"{lifter.server}_TOKEN", place)
        else:
            values[key] = lifter.parts(value, place, env_name=key if field == "env" else None)


def _lift_args(lifter: _Lifter, args: list[Any], label: str) -> None:
    after_flag: str | None = None  # the secret-named flag the previous argument was
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            after_flag = None
            continue
        place = f"{label}[{i}]"
        flag, equals, value = arg.partition("=")
        name = _flag_name(flag)
        if equals and name and secret_name(name) and value and "${" not in value:
            args[i] = f"{flag}={lifter.variable(f'{lifter.server}_{name}', value, place)}"
        elif after_flag and arg and "${" not in arg and not arg.startswith("-"):
            args[i] = lifter.variable(f"{lifter.server}_{after_flag}", arg, place)
        else:
            args[i] = lifter.parts(arg, place)
        after_flag = name if name and not equals and secret_name(name) else None


def _flag_name(text: str) -> str | None:
    """`api-key` for `--api-key` or `-api-key`; None when `text` is not a flag."""
    name = text[2:] if text.startswith("--") else text[1:] if text.startswith("-") else ""
    if name[:1].isalpha() and all(c.isalnum() or c in "_.-" for c in name):
        return name
    return None


def _in_reference(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` overlaps a `${…}` reference."""
    at = text.find("${")
    while at >= 0:
        close = text.find("}", at)
        close = len(text) if close < 0 else close + 1
        if at < end and start < close:
            return True
        at = text.find("${", close)
    return False


def _variable(text: str) -> str:
    name = _NOT_NAME.sub("_", text).strip("_").upper() or "TOKEN"
    return name if not name[0].isdigit() else f"_{name}"
