"""Where toolshell looks for its config and keeps its state: the rules every command shares.

Standard library only, and only `os` of it (paths are strings here), so the thin client of a warm
CLI (`frontends.daemon.client`) finds its daemon without importing the config models or pathlib;
`config.loading` builds on the same rules.
"""

from __future__ import annotations

import os

LOCAL_CONFIG = "toolshell.toml"
"""A checkout's own config, in the working directory (used once trusted: `config.trust`)."""


def user_config_dir() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "toolshell")


def user_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "toolshell")


def config_candidate(explicit: str | None = None, cwd: str | None = None) -> str | None:
    """The config file a command run in `cwd` (default: this process's) looks at first:
    `--config PATH`, `$TOOLSHELL_CONFIG`, `./toolshell.toml`, the user config; None when there is
    none. A relative result is relative to `cwd`. (`config.loading` then skips an untrusted
    `./toolshell.toml` for the user config.)"""
    if explicit:
        return explicit
    if env_path := os.environ.get("TOOLSHELL_CONFIG"):
        return env_path
    if os.path.isfile(os.path.join(cwd or os.curdir, LOCAL_CONFIG)):
        return LOCAL_CONFIG
    user = os.path.join(user_config_dir(), LOCAL_CONFIG)
    return user if os.path.isfile(user) else None


def state_dir(explicit: str | None = None, configured: str | None = None) -> str:
    """`--state-dir`, `$TOOLSHELL_STATE_DIR`, the config's `[state] dir`, then the user data dir."""
    chosen = explicit or os.environ.get("TOOLSHELL_STATE_DIR") or configured
    return os.path.expanduser(chosen) if chosen else user_data_dir()


def trust_dir(data_dir: str | None = None) -> str:
    """Where the records of trusted checkout configs are kept (`config.trust`): `$TOOLSHELL_STATE_DIR`,
    else the user data dir. Never `--state-dir` nor a config's `[state] dir`: an untrusted file must
    not choose where its trust is looked up."""
    return os.path.expanduser(os.environ.get("TOOLSHELL_STATE_DIR") or data_dir or user_data_dir())
