"""Reading configuration: TOML and other hosts' JSON, `${VAR}` expansion, located errors, lookup.

Every mistake is reported with its place (server name and key) and what to write instead; nothing
half-loads.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from toolshell import places
from toolshell.config.expansion import expand_servers, secret_variables
from toolshell.config.models import Config
from toolshell.config.trust import as_found, ignored_note, trust_database, trust_state
from toolshell.errors import ConfigError
from toolshell.places import LOCAL_CONFIG

# --- loading -----------------------------------------------------------------------------------


def _place(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    """Turn a pydantic error location into `mcp.servers[github].url` using the server's name."""
    parts: list[str] = []
    node: Any = raw
    for item in loc:
        if isinstance(item, int) and isinstance(node, list) and item < len(node):
            elem = node[item]
            label = elem.get("name", item) if isinstance(elem, dict) else item
            parts[-1] = f"{parts[-1]}[{label}]" if parts else f"[{label}]"
            node = elem
            continue
        parts.append(str(item))
        node = node.get(item) if isinstance(node, dict) else None
    return ".".join(p for p in parts if p and not p.startswith("function-") and p not in {"str", "list"})


_HINTS = {
    "extra_forbidden": "unknown key; check its spelling against the configuration reference",
    "missing": "this key is required",
}


def _known_keys() -> set[str]:
    keys: set[str] = set()
    models: list[type[BaseModel]] = [Config]
    while models:
        model = models.pop()
        for name, field in model.model_fields.items():
            keys.add(name)
            args = [field.annotation, *getattr(field.annotation, "__args__", ())]
            models += [a for a in args if isinstance(a, type) and issubclass(a, BaseModel) and a is not model]
    return keys


def _unknown_key(loc: tuple[Any, ...]) -> str:
    near = difflib.get_close_matches(str(loc[-1]), sorted(_known_keys()), n=1)
    hint = f"; did you mean `{near[0]}`?" if near else "; check its spelling against the configuration reference"
    return f"unknown key `{loc[-1]}`{hint}"


def _problems_from(err: ValidationError, raw: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for e in err.errors():
        msg = _HINTS.get(e["type"]) or e["msg"].removeprefix("Value error, ").replace("Input should be", "must be")
        if e["type"] == "extra_forbidden":
            msg = _unknown_key(tuple(e["loc"]))
        if e["type"] == "literal_error":
            msg = f"{e['msg'].replace('Input should be', 'must be')} (you wrote {e['input']!r})"
        out.append((_place(tuple(e["loc"]), raw), msg))
    return out


def parse_config(
    raw: dict[str, Any], *, env: Mapping[str, str] | None = None, source: str = "", expand: bool = True
) -> Config:
    """Validate a decoded config (TOML tables or imported JSON) into a `Config`, or raise `ConfigError`.

    `expand=False` keeps `${VAR}` as written (for converting a file without reading any secret).
    """
    if "mcpServers" in raw or ("servers" in raw and "mcp" not in raw):
        raw = import_mcp_json(raw, source=source)
    raw = json.loads(json.dumps(raw))  # a private copy: expansion writes into it
    seen: dict[str, str] = {}
    problems = expand_servers(raw, os.environ if env is None else env, seen) if expand else []
    try:
        config = Config.model_validate(raw)
    except ValidationError as e:
        problems.extend(_problems_from(e, raw))
        raise ConfigError(_as_written(problems, seen), source) from None
    problems.extend(config.reference_problems())
    if problems:
        raise ConfigError(_as_written(problems, seen), source)
    for variable in secret_variables(config):  # read later (OAuth at connect time, tokens at start)
        if value := (os.environ if env is None else env).get(variable):
            seen.setdefault(value, f"${{{variable}}}")
    config.set_secrets(seen)
    return config


def _as_written(problems: list[tuple[str, str]], seen: dict[str, str]) -> list[tuple[str, str]]:
    """Problems that quote config text as written (`${TOKEN}`), never an expanded secret."""
    for value, written in sorted(seen.items(), key=lambda kv: len(kv[0]), reverse=True):
        problems = [(place, msg.replace(value, written)) for place, msg in problems]
    return problems


def import_mcp_json(data: dict[str, Any], *, source: str = "") -> dict[str, Any]:
    """Convert another host's `{"mcpServers": {name: {...}}}` (or VS Code's `servers`) to our tables."""
    servers = data.get("mcpServers", data.get("servers"))
    if not isinstance(servers, dict):
        raise ConfigError([("mcpServers", "must be an object mapping server names to their settings")], source)
    out: list[dict[str, Any]] = []
    for name, spec in servers.items():
        if not isinstance(spec, dict):
            raise ConfigError([(f"mcpServers.{name}", "must be an object with `command` or `url`")], source)
        entry: dict[str, Any] = {"name": name}
        kind = spec.get("type", "")
        if "url" in spec or kind in ("http", "streamable-http", "streamableHttp", "sse"):
            entry.update(type="http", url=spec.get("url", ""), headers=spec.get("headers", {}))
        else:
            entry.update(type="stdio", command=spec.get("command", ""), args=spec.get("args", []))
            if spec.get("env"):
                entry["env"] = spec["env"]
            if spec.get("cwd"):
                entry["cwd"] = spec["cwd"]
        if spec.get("disabled"):
            entry["enabled"] = False
        out.append(entry)
    return {"mcp": {"servers": out}}


_TOO_DEEP = "nested too deeply to read; a config is a few tables deep (flatten it, or remove what repeats)"


def load_text(text: str, *, source: str = "", env: Mapping[str, str] | None = None, expand: bool = True) -> Config:
    """Parse config text: JSON when it starts with `{`, TOML otherwise."""
    try:
        return _load_text(text, source=source, env=env, expand=expand)
    except RecursionError:  # decoding, copying or expanding a hostile, deeply nested file
        raise ConfigError([("", _TOO_DEEP)], source) from None


def _load_text(text: str, *, source: str, env: Mapping[str, str] | None, expand: bool) -> Config:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError([(f"line {e.lineno}", f"not valid JSON: {e.msg}")], source) from None
    else:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError([("", f"not valid TOML: {e}")], source) from None
    if not isinstance(raw, dict):
        raise ConfigError([("", "the top level must be a table / object")], source)
    return parse_config(raw, env=env, source=source, expand=expand)


def load_file(path: str | Path, *, env: Mapping[str, str] | None = None, expand: bool = True) -> Config:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ConfigError([("", f"cannot read the file: {e.strerror or e}")], str(p)) from None
    return load_bytes(data, source=str(p), env=env, expand=expand)


def load_bytes(data: bytes, *, source: str = "", env: Mapping[str, str] | None = None, expand: bool = True) -> Config:
    """Parse a config file's bytes (UTF-8: JSON or TOML)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError([("", f"not UTF-8 text (byte {e.start}); save the file as UTF-8")], source) from None
    return load_text(text, source=source, env=env, expand=expand)


def user_config_dir() -> Path:
    return Path(places.user_config_dir())


def user_data_dir() -> Path:
    return Path(places.user_data_dir())


@dataclass(frozen=True)
class Source:
    """The config file a command uses, read once: the bytes its trust was checked on are the bytes
    it parses, and the digest a daemon keeps is of them too (an edit saved meanwhile is a change)."""

    path: Path | None
    """None: the embedded default."""
    data: bytes | None
    """The file's bytes as read (None: the embedded default, or it could not be read: `error`)."""
    trusted_for: Path | None = None
    """For a trusted checkout config, the directory it was trusted for."""
    note: str | None = None
    """What a command says first when it skips an untrusted `./toolshell.toml`."""
    error: str | None = None
    """Why the file could not be read."""

    @property
    def digest(self) -> str | None:
        """The SHA-256 of the bytes (None: no file; "unreadable": it could not be read)."""
        if self.path is None:
            return None
        return "unreadable" if self.data is None else hashlib.sha256(self.data).hexdigest()


def find_config_path(explicit: str | None = None) -> Path | None:
    """`--config PATH`, then `$TOOLSHELL_CONFIG`, `./toolshell.toml` once trusted (`config.trust`),
    the user config dir; else None. An untrusted `./toolshell.toml` is skipped with a note on stderr."""
    return _find(explicit).path


def config_in_use(explicit: str | None = None) -> tuple[Path | None, str | None]:
    """The config file `load` would read (None: the embedded default), and the note it prints
    when it skips an untrusted `./toolshell.toml` (None when it skips nothing); prints nothing."""
    source = config_source(explicit)
    return source.path, source.note


def _find(explicit: str | None) -> Source:
    source = config_source(explicit)
    if source.note is not None:
        print(source.note, file=sys.stderr)
    return source


def _read(path: Path, **known: Any) -> Source:
    try:
        return Source(path, path.read_bytes(), **known)
    except OSError as e:
        return Source(path, None, error=e.strerror or str(e), **known)


def config_source(explicit: str | None = None) -> Source:
    """The config a command run here uses, read once (prints nothing)."""
    found = places.config_candidate(explicit)
    candidate = None if found is None else Path(found)
    if candidate is None:
        return Source(None, None)
    if explicit or os.environ.get("TOOLSHELL_CONFIG") or found != LOCAL_CONFIG:
        return _read(candidate)
    local, user = Path(LOCAL_CONFIG), user_config_dir() / LOCAL_CONFIG
    if user.is_file() and as_found(local) == as_found(user):
        return _read(local)  # the working directory is the user config dir
    read = _read(local)
    if read.data is not None:
        checked = trust_state(local, trust_database(user_data_dir()), data=read.data)
        if checked.state == "trusted":
            return Source(local, read.data, trusted_for=checked.directory)
        note = ignored_note(local, checked.state)
    else:
        note = ignored_note(local, "untrusted")
    return _read(user, note=note) if user.is_file() else Source(None, None, note=note)


def rebase(config: Config, directory: Path) -> Config:
    """Anchor each stdio server's relative `cwd` and `command` (one with a `/`) in `directory`, the
    directory a checkout's config was trusted for, so they never depend on where the process runs."""
    for server in config.mcp.servers:
        if server.type != "stdio":
            continue
        cwd = directory / (server.cwd or ".")  # an absolute `cwd` replaces `directory`
        server.cwd = str(cwd)
        if server.command and "/" in server.command and not Path(server.command).is_absolute():
            server.command = str(cwd / server.command)  # as exec would resolve it from `cwd`
    return config


def load(explicit: str | None = None) -> Config:
    """Load the config the CLI would use; the embedded default when there is no file."""
    return load_source(_find(explicit))


def load_source(source: Source) -> Config:
    """The config `source` holds, parsed from the bytes it was read as."""
    if source.path is None:
        return Config()
    if source.data is None:
        raise ConfigError([("", f"cannot read the file: {source.error}")], str(source.path))
    config = load_bytes(source.data, source=str(source.path))
    folder = source.trusted_for or as_found(source.path).parent  # every file a `Source` names is trusted
    for server in config.mcp.servers:
        server.declared_in(folder)  # a built-in's `module` is looked for next to its config too
    return rebase(config, source.trusted_for) if source.trusted_for is not None else config


def state_dir(config: Config, explicit: str | None = None) -> Path:
    """`--state-dir`, `$TOOLSHELL_STATE_DIR`, `[state] dir`, then the user data dir."""
    return Path(places.state_dir(explicit, config.state.dir))


STATE_FILE = "toolshell.db"


def state_location(config: Config, explicit_dir: str | None = None) -> str:
    """Where the shared state is: `$TOOLSHELL_STATE_URL`, `[state] url`, else the SQLite file in
    the state directory. `store.engines.open_store` opens either."""
    url = os.environ.get("TOOLSHELL_STATE_URL") or config.state.url
    return url if url else str(state_dir(config, explicit_dir) / STATE_FILE)


def to_toml(config: Config) -> str:
    """Write a config as TOML (what `toolshell config import` prints): its top-level keys, the
    servers, then every other section that differs from the defaults, so a converted file means
    what the original did."""
    rest = config.model_dump(exclude_defaults=True, exclude_none=True, exclude={"mcp"})
    lines = [f"{key} = {_inline(value)}" for key, value in rest.items() if not isinstance(value, dict | list)]
    if lines:
        lines.append("")
    lines += _servers_toml(config)
    for key, value in rest.items():
        if isinstance(value, dict):
            lines += [f"[{key}]", *(f"{_key_toml(k)} = {_inline(v)}" for k, v in value.items()), ""]
        elif isinstance(value, list):
            for entry in value:
                items = entry.items() if isinstance(entry, dict) else []
                lines += [f"[[{key}]]", *(f"{_key_toml(k)} = {_inline(v)}" for k, v in items), ""]
    return "\n".join(lines)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key_toml(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def _inline(value: Any) -> str:
    """A TOML value on one line: JSON's string, number and boolean forms are TOML's too; tables
    become inline tables."""
    if isinstance(value, dict):
        inner = ", ".join(f"{_key_toml(str(k))} = {_inline(v)}" for k, v in value.items())
        return f"{{ {inner} }}" if inner else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _servers_toml(config: Config) -> list[str]:
    lines: list[str] = []
    for s in config.mcp.servers:
        lines.append("[[mcp.servers]]")
        dumped = s.model_dump(exclude_defaults=True)
        dumped.setdefault("type", s.type)
        for key in ("name", "type", *[k for k in dumped if k not in ("name", "type")]):
            value = dumped[key]
            if isinstance(value, dict):
                inner = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {inner} }}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    return lines
