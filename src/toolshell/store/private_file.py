"""A secret made once in the state directory (the serve token, the local state key): created
whole and private, and refused when anyone else could have read or changed it."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from toolshell.errors import ErrorCode, ToolshellError


def private_secret(path: Path, what: str, risk: str, make: Callable[[], str]) -> str:
    """The secret in `path`, made with `make()` on first use.

    It is written to a private temporary file and linked into place, so a reader never sees part
    of it and of two processes starting at once the first one's secret wins.

    Args:
        path: the file (its directory is made 0700 if missing).
        what: how messages name it, e.g. "the serve token".
        risk: what a reader of it could do, said when its mode lets others in.
        make: a new secret.

    Raises:
        ToolshellError: `unavailable`, naming the file and the fix, when it cannot be made or read,
            belongs to another user, is readable or writable by others, or is empty.
    """
    if not path.exists():
        _create(path, what, make)
    try:
        info = path.stat()
        if info.st_uid != os.getuid():
            raise _unavailable(
                f"{what} {path} belongs to another user (uid {info.st_uid}); delete it to have a new one made, "
                f"or take it over: chown {os.getuid()} {path}"
            )
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise _unavailable(
                f"{what} {path} can be read or changed by other users; {risk}: run chmod 600 {path} "
                "(and delete it to have a new one made)"
            )
        value = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise _unavailable(f"cannot read {what} {path}: {e.strerror or e}") from None
    if not value:
        raise _unavailable(f"{what} {path} is empty; delete it to have a new one made")
    return value


def _create(path: Path, what: str, make: Callable[[], str]) -> None:
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(make() + "\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)
    except OSError as e:
        raise _unavailable(f"cannot write {what} {path}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()


def _unavailable(message: str) -> ToolshellError:
    return ToolshellError(ErrorCode.UNAVAILABLE, message)
