"""toolshell: an MCP host that gives an agent one sandboxed `bash` tool with a `tools` command inside."""

from __future__ import annotations

from toolshell.version import __version__

TYPE_CHECKING = False  # `typing` is not imported: the thin client (`frontends.daemon.client`) starts here
__all__ = ["Config", "Host", "Session", "Shells", "ToolshellError", "ErrorCode", "__version__"]

if TYPE_CHECKING:
    from toolshell.config import Config
    from toolshell.errors import ErrorCode, ToolshellError
    from toolshell.host import Host
    from toolshell.session import Session
    from toolshell.shells import Shells


def __getattr__(name: str) -> object:
    # Lazy: `import mcp` alone costs most of a second, and the CLI must start fast.
    if name == "Host":
        # lazy: the package root imports nothing heavy (`import mcp` alone takes most of a second)
        from toolshell.host import Host

        return Host
    if name == "Session":
        # lazy: the package root imports nothing heavy (`import mcp` alone takes most of a second)
        from toolshell.session import Session

        return Session
    if name == "Shells":
        # lazy: the package root imports nothing heavy (`import mcp` alone takes most of a second)
        from toolshell.shells import Shells

        return Shells
    if name == "Config":
        # lazy: the package root imports nothing heavy (`import mcp` alone takes most of a second)
        from toolshell.config import Config

        return Config
    if name in ("ToolshellError", "ErrorCode"):
        # lazy: the package root imports nothing heavy (`import mcp` alone takes most of a second)
        from toolshell import errors

        return getattr(errors, name)
    raise AttributeError(name)
