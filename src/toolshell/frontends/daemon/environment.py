"""What of a caller's environment a daemon's answers depend on, and which client retires it."""

from __future__ import annotations

from typing import Any

ALWAYS_ENV = (
    *("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_NUMERIC", "LC_TIME", "LC_COLLATE"),
    *("XDG_CONFIG_HOME", "XDG_DATA_HOME", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"),
    *("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "all_proxy", "no_proxy"),
)
"""Read by every command (paths, locale, certificates, proxies). What only a terminal cares about
(`TERM`, `LC_TERMINAL`, `SHLVL`, `PWD`…) never keeps a command from its daemon."""
ENV_PREFIXES = ("TOOLSHELL_", "OTEL_")
_IN_THE_ADDRESS = ("TOOLSHELL_CONFIG", "TOOLSHELL_STATE_DIR", "TOOLSHELL_STATE_URL")
"""Already part of what a daemon serves (`address.Address`): a client may give them as options."""


def environment(env: Any, names: set[str]) -> dict[str, str | None]:
    """The part of an environment the answers depend on: `names`, and every `TOOLSHELL_*` and
    `OTEL_*` variable."""
    view: dict[str, str | None] = {name: _str(env.get(name)) for name in names}
    view.update({k: _str(v) for k, v in env.items() if isinstance(k, str) and k.startswith(ENV_PREFIXES)})
    for name in _IN_THE_ADDRESS:
        view.pop(name, None)
    return view


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def named_env(tree: object) -> set[str]:
    """The variable names a config's `*_env` settings give (OAuth secrets, keys)."""
    if isinstance(tree, dict):
        found = {v for k, v in tree.items() if isinstance(k, str) and k.endswith("_env") and isinstance(v, str)}
        return found.union(*(named_env(v) for v in tree.values()))
    if isinstance(tree, list):
        return set().union(*(named_env(v) for v in tree))
    return set()


def newer(theirs: object, ours: str) -> bool:
    """Whether the client's version is later than the daemon's (an older one only runs cold)."""

    def release(version: str) -> tuple[int, ...]:  # `0.2.0.dev1` → (0, 2, 0): a pre-release retires nothing
        numbers: list[int] = []
        for part in version.split("."):
            if not part.isdigit():
                break
            numbers.append(int(part))
        return tuple(numbers)

    return isinstance(theirs, str) and release(theirs) > release(ours)
