"""Built-in servers shipped with toolshell, registered in one place: `SHIPPED` (name -> factory).

Write your own with `toolshell.builtin.functions.function_server` (a function list and one execute
coroutine) or as an `mcp` `MCPServer`, and point a `type = "builtin"` server at it with
`module = "package.module:attribute"`.
"""

from __future__ import annotations

from toolshell.builtin.resolve import as_factory, resolve_builtin

__all__ = ["SHIPPED", "TOP_LEVEL", "as_factory", "resolve_builtin"]

SHIPPED: dict[str, str] = {
    "text_metrics": "toolshell.builtin.text_metrics:create",
    "runtime": "toolshell.builtin.runtime:create",
}
"""Shipped built-in servers: name -> `module:factory`. Imported only when the server is opened."""

TOP_LEVEL: dict[str, str] = {"web": "toolshell.builtin.web_fetch:create"}
"""Servers whose tools are top-level commands (`web_fetch` is `tools web-fetch`), not `tools <server> …`."""
