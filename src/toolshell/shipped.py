"""The built-in servers shipped with toolshell, by name: a map of strings, so importing it loads no server."""

from __future__ import annotations

SHIPPED: dict[str, str] = {
    "text_metrics": "toolshell.builtin.text_metrics:create",
    "runtime": "toolshell.builtin.runtime:create",
}
"""Shipped built-in servers: name -> `module:factory`. Imported only when the server is opened."""

TOP_LEVEL: dict[str, str] = {"web": "toolshell.builtin.web_fetch:create"}
"""Servers whose tools are top-level commands (`web_fetch` is `tools web-fetch`), not `tools <server> …`."""
