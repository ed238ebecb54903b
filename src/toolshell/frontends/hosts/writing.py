"""Writing a file on the user's behalf without following a link toolshell did not choose.

A checkout can ship any name as a symbolic link: `.mcp.json.toolshell.bak` pointing at
`~/.bashrc`, `.mcp.json` at `~/.claude.json`, `.vscode` at a folder elsewhere. So:

- the file to write, and (`inside`: the project) each folder between the project and it, must not
  be a link, unless the user named the file the link points to (`allowed`, `setup --follow-link`);
- the backup of the previous file and the temporary file are created exclusively
  (`O_CREAT|O_EXCL|O_NOFOLLOW`): a link or a file already at that name is never written through;
  a link at a backup's name is refused, an earlier backup is kept and the next number taken;
- the new text goes into that temporary file beside the target, which is then renamed over it
  (a rename replaces a name, never writes through a link);
- one `Writer` is one run: each file gets one backup of what it held before the run, however many
  times the run writes it.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from toolshell.frontends.hosts.files import HostFileError

BACKUP_SUFFIX = ".toolshell.bak"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # not on Windows, where creating a link takes a privilege
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_MAX_BACKUPS = 1000


@dataclass
class Writer:
    """Writes files for one run of `toolshell setup`. `allowed`: links the user named (the files
    they point to, resolved); `backups`: the backup this run made of each file it wrote."""

    allowed: frozenset[Path] = frozenset()
    backups: dict[Path, Path] = field(default_factory=dict)

    def target(self, path: Path, *, inside: Path | None = None) -> Path:
        """The file to write for `path`: itself, or the file its link points to when the user named
        that file. Refuses a link the user did not name, in the file or (with `inside`) in a folder
        between `inside` and it, saying what to do."""
        for link in _links(path, inside):
            pointed = link.resolve()
            if link == path and pointed in self.allowed:
                return pointed
            what = "is a symbolic link" if link == path else f"is inside {link}, a symbolic link"
            raise HostFileError(
                f"{path} {what} to {pointed}; toolshell does not write through a link it did not choose. "
                f"If that is the file you mean, run this again with --follow-link {pointed}; nothing was written"
            )
        return path

    def write(self, path: Path, text: str, *, mode: int | None = None) -> Path | None:
        """Replace `path` (a `target`) with `text`; returns the backup of what it held before this
        run (None: it did not exist). `mode`: the new file's permission bits (default: the old
        file's, or what the umask allows for a new one)."""
        try:
            return self._write(path, text, mode)
        except OSError as e:
            raise HostFileError(f"cannot write {path}: {e.strerror}") from None

    def _write(self, path: Path, text: str, mode: int | None) -> Path | None:
        path.parent.mkdir(parents=True, exist_ok=True)
        old = _read_old(path)
        if old is not None and path not in self.backups:
            self.backups[path] = _backup(path, *old)
        if mode is None:
            mode = old[1] if old is not None else 0o666 & ~_umask()
        temp, fd = _create_temp(path)
        try:
            _fill(fd, text.encode("utf-8"), mode)
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return self.backups.get(path)


def _links(path: Path, inside: Path | None) -> list[Path]:
    """The links among `path` and the folders from `inside` (exclusive) down to it."""
    found = [path] if path.is_symlink() else []
    if inside is not None:
        try:
            parts = path.parent.relative_to(inside).parts
        except ValueError:
            parts = ()
        here = inside
        for part in parts:
            here = here / part
            if here.is_symlink():
                found.append(here)
    return found


def _read_old(path: Path) -> tuple[bytes, int] | None:
    """The file's bytes and permission bits, read without following a link (None: no file)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise HostFileError(f"cannot read {path}: {e.strerror}; nothing was written") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise HostFileError(f"{path} is not a regular file; nothing was written")
        return f.read(), stat.S_IMODE(info.st_mode)


def _backup(path: Path, data: bytes, mode: int) -> Path:
    """A new backup of `data` beside `path`: `<name>.toolshell.bak`, else `.bak.1`, `.bak.2`, …
    (an earlier backup is never replaced). Refuses a link at one of those names."""
    for n in range(_MAX_BACKUPS):
        name = path.with_name(path.name + BACKUP_SUFFIX + (f".{n}" if n else ""))
        try:
            fd = os.open(name, _CREATE, mode & 0o777)
        except FileExistsError:
            if name.is_symlink():
                raise HostFileError(
                    f"{name} is a symbolic link (to {os.readlink(name)}); toolshell never writes a backup "
                    f"through a link: remove it (rm {name}) and run this again; nothing was written"
                ) from None
            continue
        _fill(fd, data, mode)
        return name
    raise HostFileError(f"{path} has {_MAX_BACKUPS} backups beside it already; remove old ones; nothing was written")


def _create_temp(path: Path) -> tuple[Path, int]:
    """A new file beside `path` under a random name, created exclusively, and its descriptor."""
    for _ in range(100):
        temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return temp, os.open(temp, _CREATE, 0o600)
        except FileExistsError:
            continue
    raise HostFileError(f"cannot create a temporary file beside {path}; nothing was written")


def _fill(fd: int, data: bytes, mode: int) -> None:
    """Write `data` through the descriptor of a file just created, with exactly `mode` (not what
    the umask leaves), and close it."""
    with os.fdopen(fd, "wb") as f:
        if hasattr(os, "fchmod"):
            os.fchmod(f.fileno(), mode & 0o777)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
