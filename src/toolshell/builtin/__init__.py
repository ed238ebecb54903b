"""Built-in servers shipped with toolshell, registered in one place: `SHIPPED` (name -> factory)."""

from __future__ import annotations

SHIPPED: dict[str, str] = {
    "text_metrics": "toolshell.builtin.text_metrics:create",
    "runtime": "toolshell.builtin.runtime:create",
}
"""Shipped built-in servers: name -> `module:factory`. Imported only when the server is opened."""
