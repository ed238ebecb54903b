"""Built-in servers shipped with toolshell, registered in one place: `SHIPPED` (name -> factory).

Write your own with `toolshell.builtin.functions.function_server` (a function list and one execute
coroutine) or as an `mcp` `MCPServer`, and point a `type = "builtin"` server at it with
`module = "package.module:attribute"`.
"""

from __future__ import annotations

from toolshell.builtin.resolve import resolve_builtin

__all__ = ["SHIPPED", "resolve_builtin"]

SHIPPED: dict[str, str] = {
    "text_metrics": "toolshell.builtin.text_metrics:create",
    "runtime": "toolshell.builtin.runtime:create",
    "web": "toolshell.builtin.web_fetch:create",
}
"""Shipped built-in servers: name -> `module:factory`. Imported only when the server is opened."""
