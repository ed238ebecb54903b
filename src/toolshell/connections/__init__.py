"""One connection per configured server, all through `mcp.client.Client`.

Imports are lazy: `import mcp` costs most of a second, and the CLI must start fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "SESSION_META_KEY",
    "ClientConnection",
    "ConnectionManager",
    "ElicitationRouter",
    "make_connection",
]

_WHERE = {
    "SESSION_META_KEY": "toolshell.connections.session_meta",
    "ClientConnection": "toolshell.connections.client_conn",
    "ConnectionManager": "toolshell.connections.manager",
    "ElicitationRouter": "toolshell.connections.elicitation",
    "make_connection": "toolshell.connections.factory",
}

if TYPE_CHECKING:
    from toolshell.connections.client_conn import ClientConnection
    from toolshell.connections.elicitation import ElicitationRouter
    from toolshell.connections.factory import make_connection
    from toolshell.connections.manager import ConnectionManager
    from toolshell.connections.session_meta import SESSION_META_KEY


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
