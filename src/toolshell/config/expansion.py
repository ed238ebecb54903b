"""`${VAR}` expansion in a config's server settings, and which expanded values are secrets.

A value is a secret when its variable's name says so (`redact.is_secret`), when it fills a header,
a secret-named flag in `args` (`--token=${X}`) or a URL's password or query, or when a `*_env`
setting names its variable. `loading.parse_config` collects them so the redactor masks them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel

from toolshell.errors import ConfigError
from toolshell.redact import MASK, is_secret, secret_name

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}")


def referenced_vars(text: str) -> set[str]:
    """The variables a config text names as `${VAR}` (what its meaning depends on)."""
    return {m.group(1) for m in _VAR_RE.finditer(text)}


def expand_vars(
    value: str, env: Mapping[str, str], place: str, seen: dict[str, str] | None = None, *, secret: bool = False
) -> str:
    """Expand `${VAR}` and `${VAR:-default}`; an undefined `${VAR}` is an error naming it and the place.

    `seen` collects the value of each secret expansion (`redact.is_secret`, or every one with
    `secret`, as in headers) and the text it came from (`${VAR}`), so secrets can be redacted and
    config errors can quote the text as written.
    """

    def sub(m: re.Match[str]) -> str:
        name, has_default, default = m.group(1), m.group(2), m.group(3)
        if name in env and (env[name] != "" or not has_default):
            if seen is not None and (is_secret(name, env[name]) or (secret and env[name])):
                seen[env[name]] = m.group(0)
            return env[name]
        if has_default is not None:
            return default or ""
        raise ConfigError([(place, f"${{{name}}} is not set; export {name}=… or write ${{{name}:-default}}")])

    return _VAR_RE.sub(sub, value)


def _expand_tree(data: Any, env: Mapping[str, str], place: str, seen: dict[str, str], secret: bool = False) -> Any:
    if isinstance(data, str):
        expanded = expand_vars(data, env, place, seen, secret=secret)
        if expanded != data and "://" in expanded:  # a URL built from a variable: its credentials
            seen.update(dict.fromkeys(_url_secrets(expanded), MASK))
        return expanded
    if isinstance(data, list):
        return [_expand_tree(v, env, place, seen, secret) for v in data]
    if isinstance(data, dict):
        return {k: _expand_tree(v, env, f"{place}.{k}" if place else k, seen, secret) for k, v in data.items()}
    return data


def expand_servers(raw: dict[str, Any], env: Mapping[str, str], seen: dict[str, str]) -> list[tuple[str, str]]:
    """Expand variables in every server in place; collect each failure instead of stopping at one."""
    problems: list[tuple[str, str]] = []
    servers = raw.get("mcp", {}).get("servers", []) if isinstance(raw.get("mcp"), dict) else []
    for i, server in enumerate(servers if isinstance(servers, list) else []):
        if not isinstance(server, dict):
            continue
        label = f"mcp.servers[{server.get('name', i)}]"
        for key in ("command", "args", "env", "cwd", "url", "headers"):
            if key in server:
                try:
                    written = server[key]
                    server[key] = _expand_tree(written, env, f"{label}.{key}", seen, key == "headers")
                    if key == "args" and isinstance(written, list):
                        seen.update(dict.fromkeys(_flag_secrets(written, server[key]), MASK))
                except ConfigError as e:
                    problems.extend(e.problems)
    return problems


def _url_secrets(url: str) -> list[str]:
    """The parts of an expanded URL that carry credentials: its password and its query's values."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    values = [v for _, v in parse_qsl(parts.query)]
    return [s for s in (password, *values) if s]


_FLAG = re.compile(r"-{1,2}([A-Za-z][\w.-]*)")


def _flag_secrets(written: list[Any], expanded: list[Any]) -> Iterator[str]:
    """The expanded values a secret-named flag takes in `args`: `--token=${X}`, or `--api-key`
    followed by `${X}` (`redact.secret_name` reads the flag's name)."""
    previous = ""
    for raw, value in zip(written, expanded, strict=True):
        if isinstance(raw, str) and isinstance(value, str) and _VAR_RE.search(raw):
            flag, equals, _ = raw.partition("=")
            if equals and (m := _FLAG.fullmatch(flag)) and secret_name(m.group(1)):
                if rest := value.partition("=")[2]:
                    yield rest
            elif (m := _FLAG.fullmatch(previous)) and secret_name(m.group(1)) and value:
                yield value
        previous = raw if isinstance(raw, str) else ""


def secret_variables(model: BaseModel) -> Iterator[str]:
    """The variables every `*_env` setting in `model` names, at any depth (`secret_env`,
    `client_secret_env`, `state_keys_env`, …): their values are secrets by the setting's meaning."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, BaseModel):
                yield from secret_variables(item)
            elif name.endswith("_env") and isinstance(item, str) and item:
                yield item


__all__ = ["expand_servers", "expand_vars", "referenced_vars", "secret_variables"]
