"""Built-in servers shipped with toolshell, registered in one place: `SHIPPED` (name -> factory).

Write your own with `toolshell.builtin.functions.function_server` (a function list and one execute
coroutine) or as an `mcp` `MCPServer`, and point a `type = "builtin"` server at it with
`module = "package.module:attribute"`.
"""

from __future__ import annotations

from toolshell.builtin.resolve import as_factory, resolve_builtin
from toolshell.shipped import SHIPPED, TOP_LEVEL

__all__ = ["SHIPPED", "TOP_LEVEL", "as_factory", "resolve_builtin"]
