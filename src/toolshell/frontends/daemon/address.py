"""Which daemon serves a command: one per config, working directory and state, found by its socket.

A daemon serves what a cold command run in the same place would use (checked on every request,
`server`): the same config file, named the same way (given with `--config` or `$TOOLSHELL_CONFIG`,
which is used as it is, or found, which a checkout's `toolshell.toml` is only once trusted), the
same trust records for a found one, the same working directory (stdio servers started without a
`cwd` run there, and sessions are told about it) and the same state. Its socket, lock and log
live in `<state-dir>/daemons/` (0700), named by a hash of them. Standard library only: the thin
client computes this before deciding whether to import anything heavy.
"""

from __future__ import annotations

import json
import os

from toolshell import places

TYPE_CHECKING = False  # `typing` is not imported here: every millisecond of start-up counts
if TYPE_CHECKING:
    from typing import Any

MAX_SOCKET_PATH = 107
"""The longest path a Unix socket can be bound to on Linux (`sun_path` holds 108 bytes)."""


class Address:
    """Where the daemon for one config, working directory and state listens.

    Attributes:
        config: the config file as a command would find it (resolved), or None (the embedded default).
        explicit: whether it was named (`--config`, `$TOOLSHELL_CONFIG`): then it is used as it
            is; a found `./toolshell.toml` is used only while trusted.
        trust: the folder of the trust records a found config is checked against
            (`places.trust_dir`); None for a named one, which needs none.
        cwd: the working directory (resolved).
        state_dir: the state directory the daemon's files live in.
        state_url: `$TOOLSHELL_STATE_URL` when set (it overrides the config's `[state] url`).
    """

    __slots__ = ("config", "cwd", "explicit", "state_dir", "state_url", "trust")

    def __init__(
        self,
        config: str | None,
        cwd: str,
        state_dir: str,
        state_url: str | None,
        *,
        explicit: bool = False,
        trust: str | None = None,
    ) -> None:
        self.config, self.cwd, self.state_dir, self.state_url = config, cwd, state_dir, state_url
        self.explicit, self.trust = explicit, trust

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Address) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def key(self) -> str:
        what = json.dumps([self.config, self.cwd, self.state_url, self.explicit, self.trust], ensure_ascii=False)
        return str(_sha256()(what.encode("utf-8", "surrogateescape")).hexdigest()[:20])

    @property
    def folder(self) -> str:
        return os.path.join(self.state_dir, "daemons")

    @property
    def socket(self) -> str:
        return os.path.join(self.folder, f"{self.key}.sock")

    @property
    def lock(self) -> str:
        return os.path.join(self.folder, f"{self.key}.lock")

    @property
    def log(self) -> str:
        return os.path.join(self.folder, f"{self.key}.log")

    def socket_too_long(self) -> str | None:
        """Why the socket cannot be bound here, or None."""
        size = len(os.fsencode(self.socket))
        if size <= MAX_SOCKET_PATH:
            return None
        return (
            f"the daemon's socket path would be {size} bytes, more than a Unix socket allows ({MAX_SOCKET_PATH}); "
            "give a shorter --state-dir (or TOOLSHELL_STATE_DIR)"
        )

    def to_json(self) -> dict[str, str | bool | None]:
        """Every field: what a request says it is for (only over the private socket)."""
        return {**self.shown(), "state_url": self.state_url}

    def shown(self) -> dict[str, str | bool | None]:
        """What may be printed: the state URL can hold a password, so only whether one is set."""
        url = "set by TOOLSHELL_STATE_URL" if self.state_url else None
        return {
            "config": self.config,
            "explicit": self.explicit,
            "trust": self.trust,
            "cwd": self.cwd,
            "state_dir": self.state_dir,
            "state_url": url,
        }


def _sha256() -> Any:
    """SHA-256 without `hashlib`, which loads OpenSSL: a tenth of the thin client's start-up."""
    try:
        # lazy: CPython up to 3.11 has it built in
        from _sha256 import sha256  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - 3.12 and later, or another interpreter
        # lazy: the standard one where the built-in is not there
        from hashlib import sha256
    return sha256


def address_for(config: str | None, state_dir: str | None, cwd: str | None = None) -> Address | None:
    """The daemon address for `--config` and `--state-dir` (either may be None) in `cwd`; None when
    it cannot be told without loading the config (its `[state] dir` uses `${VAR}`, or the file
    cannot be read): then the command runs cold, which reports any problem itself."""
    where = os.path.realpath(cwd or os.getcwd())
    candidate = places.config_candidate(config, where)
    # A checkout's own file may be untrusted (telling needs the trust records): it never chooses
    # where the socket is. Its daemon listens in the state dir the options or the defaults give.
    explicit = bool(config or os.environ.get("TOOLSHELL_CONFIG"))
    checkout = candidate == places.LOCAL_CONFIG and not explicit
    found = None if candidate is None else os.path.realpath(os.path.join(where, candidate))
    configured: str | None = None
    if found is not None and not checkout and not state_dir and not os.environ.get("TOOLSHELL_STATE_DIR"):
        try:
            configured = _configured_state_dir(found)
        except (OSError, ValueError):  # unreadable, not UTF-8, not TOML/JSON: the cold path says so
            return None
        if configured is not None and "$" in configured:
            return None
    return Address(
        config=found,
        cwd=where,
        state_dir=os.path.realpath(os.path.join(where, places.state_dir(state_dir, configured))),
        state_url=os.environ.get("TOOLSHELL_STATE_URL") or None,
        explicit=explicit,
        trust=None if explicit else os.path.realpath(os.path.join(where, places.trust_dir())),
    )


def _configured_state_dir(path: str) -> str | None:
    """The `[state] dir` a config file names, read without the config models (TOML, or JSON when
    it starts with `{`, as `config.loading` reads it)."""
    with open(path, "rb") as f:
        data = f.read()
    if b"state" not in data:  # most files name no state dir: no parser needed
        return None
    text = data.decode("utf-8")
    if text.lstrip().startswith("{"):
        raw = json.loads(text)
    else:
        # lazy: TOML is read only for a config that may name a state dir
        import tomllib

        raw = tomllib.loads(text)
    state = raw.get("state") if isinstance(raw, dict) else None
    chosen = state.get("dir") if isinstance(state, dict) else None
    return chosen if isinstance(chosen, str) and chosen else None
