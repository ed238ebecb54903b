"""Reading `key=@path` values from the shell's own filesystem (`command.inputs.FileReader`).

The path is the script's, relative to its working directory; the file is read whole and exactly
(no newline added or dropped), as UTF-8 text, up to the shell's memory guard.
"""

from __future__ import annotations

import posixpath
from typing import Any

from toolshell.command.inputs import FileReader


def shell_reader(fs: Any, cwd: str, limit: int) -> FileReader:
    """A reader of the files of one shell (bashkit's `ctx.fs`), relative to `cwd`, of at most `limit` bytes."""

    def read(path: str) -> str:
        full = posixpath.normpath(posixpath.join(cwd, path))
        try:
            data: bytes = fs.read_file(full)
        except RuntimeError as err:  # bashkit's io errors: not found, a directory
            raise ValueError(f"it cannot be read ({str(err).removeprefix('io error: ')})") from None
        if len(data) > limit:
            raise ValueError(f"it holds {len(data):,} bytes, past the shell's limit of {limit:,}")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("it is not UTF-8 text (tools take JSON text)") from None

    return read
