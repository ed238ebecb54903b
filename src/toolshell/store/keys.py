"""The key ring that seals what one process hands another: shell snapshots (bashkit's HMAC) and
the SDK's `requestState`.

Every worker on one store must hold the same ring. It comes from an environment variable
(`TOOLSHELL_STATE_KEYS`, or the one `[serve] state_keys_env` names): base64url keys of at least 32
bytes, comma-separated, newest first. The first seals; every one opens, so rotation is: put a new
key first, and drop the old one once nothing sealed with it is alive (an idle shell's lifetime).
Without it, a process on the local SQLite store uses one key generated once in
`<state-dir>/state-key` (0600); a process on a shared store refuses to start, since a key of its
own would make every other worker's state unreadable.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from pathlib import Path

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.store.private_file import private_secret

DEFAULT_ENV = "TOOLSHELL_STATE_KEYS"
MIN_BYTES = 32
KEY_FILE = "state-key"


def for_purpose(ring: list[bytes], purpose: str) -> list[bytes]:
    """The ring's keys for one use (`"request-state"`, `"shell-seal"`, …): each derived with HKDF,
    so no key serves two purposes; the order (newest first) is kept."""
    # lazy: cryptography is only needed once a ring is used
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    info = f"toolshell {purpose}".encode()
    return [HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(key) for key in ring]


def new_key() -> str:
    """A fresh key as the ring spells it (what `toolshell serve --new-state-key` prints)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(MIN_BYTES)).decode().rstrip("=")


def key_ring(value: str | None, state_dir: Path, *, shared: bool, env_name: str = DEFAULT_ENV) -> list[bytes]:
    """The ring: from `value` (the environment variable's text), else the state dir's key file.

    Raises:
        ToolshellError: `invalid_input` for a malformed ring, or none on a shared store.
    """
    if value:
        return [_decode(part.strip(), env_name) for part in value.split(",") if part.strip()]
    if shared:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"a shared state store needs one key ring for every worker: set {env_name} to the same value "
            f"everywhere (make one with: python -c 'import secrets,base64;"
            f"print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())')",
        )
    return [_local_key(state_dir / KEY_FILE)]


def _decode(text: str, env_name: str) -> bytes:
    try:
        key = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        key = b""
    if len(key) < MIN_BYTES:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"{env_name} holds a key that is not base64url of at least {MIN_BYTES} bytes; "
            "each comma-separated key must be, e.g. the output of toolshell's new_key()",
        )
    return key


def _local_key(path: Path) -> bytes:
    """The state dir's own key, made on first use; refused if anyone else could read or write it."""
    risk = "anyone who read it can forge this host's shells and rounds"
    return _decode(private_secret(path, "the key file", risk, new_key), str(path))
