"""The operator's controls: the audit trail (`[audit]`) and the call limits (`[[limits]]`)."""

from __future__ import annotations

from typing import Literal

from toolshell.config.base import _Model


class AuditConfig(_Model):
    """One JSON line per shell call and per nested call, for a compliance log store.

    Off by default. `to = "file"` appends to `path` (default: `audit.jsonl` in the state
    directory), created 0600, one `write` per line so workers sharing the file never interleave and
    a crash loses at most the line being written; `"stdout"` writes the same lines to standard
    output (a container's log collector), never with `serve`'s stdio transport, whose stdout is the
    protocol. A server with `audit = false` leaves out its nested calls.
    """

    enabled: bool = False
    to: Literal["file", "stdout"] = "file"
    path: str | None = None
    """The file for `to = "file"`; relative paths are taken from the state directory."""
    input: Literal["masked", "digest", "none"] = "masked"
    """A nested call's input: the masked preview the timeline shows, its SHA-256 digest, or nothing."""


__all__ = ["AuditConfig"]
