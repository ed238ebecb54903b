"""Turn a built-in server's config (`name`, optional `module`) into a factory the host calls.

Shipped servers are looked up in `SHIPPED`; a user's own server is `module = "pkg.mod:attr"`,
where `attr` is an `MCPServer` or lowlevel `Server` instance, or a factory returning one that
takes the `HostHandle` or nothing. Nothing is imported until the server is opened.

A module the import path does not have is looked for in the folder of the config file that names
it (`ServerConfig.folder`, a file the person chose or trusted), so `my_package/` beside
`toolshell.toml` works as written. That folder goes at the end of the path, for that one import
only: it never shadows an installed module.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.shipped import SHIPPED, TOP_LEVEL

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer

    from toolshell.builtin.host import HostHandle

    BuiltinFactory = Callable[[HostHandle], Server[Any] | MCPServer]

_EXAMPLE = 'module = "my_package.my_server:mcp"'


def _unavailable(message: str) -> ToolshellError:
    return ToolshellError(ErrorCode.UNAVAILABLE, message)


def _is_server(obj: object) -> TypeGuard[Server[Any] | MCPServer]:
    # lazy: `mcp.server` is imported only when a built-in server opens
    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer

    return isinstance(obj, Server | MCPServer)


def _load_attr(spec: str, name: str, folder: Path | None = None) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise _unavailable(f"server {name!r}: module {spec!r} must be `package.module:attribute`, e.g. {_EXAMPLE}")
    top = module_name.partition(".")[0]
    try:
        module = _import(module_name, top, folder)
    except ModuleNotFoundError as e:
        if e.name != top:  # the module is there; something it imports is not
            raise _unavailable(f"server {name!r}: importing {module_name!r} failed: {e}; install {e.name!r}") from None
        raise _not_found(name, module_name, top, folder) from None
    except Exception as e:  # a broken user module must not crash the host
        raise _unavailable(f"server {name!r}: importing {module_name!r} failed: {type(e).__name__}: {e}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise _unavailable(
                f"server {name!r}: {module_name!r} has no attribute {attr!r}; "
                "point module at an MCPServer, a mcp.server.Server, or a function returning one"
            )
        obj = getattr(obj, part)
    return obj


def _not_found(name: str, module_name: str, top: str, folder: Path | None) -> ToolshellError:
    if folder is None:
        where, put = "the import path", f"add the folder holding {top}/ to PYTHONPATH"
    else:
        where, put = f"the import path or in {folder}", f"put the folder {top}/ in {folder}"
    return _unavailable(
        f"server {name!r}: cannot import {module_name!r}: no {top!r} on {where}; "
        f"{put}, install {top!r}, or fix the module path (e.g. {_EXAMPLE})"
    )


def _import(module_name: str, top: str, folder: Path | None) -> Any:
    """`module_name` from the import path, else (its top package missing) from `folder`."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if folder is None or e.name != top:
            raise
    entry = str(folder)
    added = entry not in sys.path
    if added:
        sys.path.append(entry)
    importlib.invalidate_caches()  # the folder's finder must see files written since it was first read
    try:
        return importlib.import_module(module_name)
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)


def _takes_host(factory: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: assume the documented form
        return True
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in positional or p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


def as_factory(obj: Any, where: str, name: str) -> BuiltinFactory:
    """A factory taking the host, from a server instance, a factory of the host, or a factory of nothing.

    Raises:
        ToolshellError: `UNAVAILABLE` when `obj` is none of these (`where` names it in the message).
    """
    if _is_server(obj):
        return lambda host: obj
    if not callable(obj):
        raise _unavailable(
            f"server {name!r}: {where} is of type {type(obj).__name__}; "
            "point module at an MCPServer, a mcp.server.Server, or a function returning one"
        )
    takes_host = _takes_host(obj)

    def build(host: HostHandle) -> Server[Any] | MCPServer:
        try:
            server = obj(host) if takes_host else obj()
        except ToolshellError:
            raise
        except Exception as e:
            raise _unavailable(f"server {name!r}: {where} raised {type(e).__name__}: {e}") from None
        if not _is_server(server):
            raise _unavailable(
                f"server {name!r}: {where} returned a value of type {type(server).__name__}; "
                "it must return an MCPServer or a mcp.server.Server"
            )
        return server

    return build


def resolve_builtin(name: str, module: str | None = None, *, folder: Path | None = None) -> BuiltinFactory:
    """Find the factory for a built-in server.

    Args:
        name: The server's configured name; a shipped server needs nothing else.
        module: `package.module:attribute` for a user's own server; wins over a shipped name.
        folder: where else to look for `module`: the folder of the config file that names it.

    Returns:
        A callable taking the `HostHandle` and returning the server to connect to in-process.

    Raises:
        ToolshellError: `UNAVAILABLE` when the name is not shipped and no module is given, or the
            module, attribute or its type is wrong; the message says what to write instead.
    """

    spec = module or SHIPPED.get(name) or TOP_LEVEL.get(name)
    if spec is None:
        shipped = ", ".join(sorted(SHIPPED))
        raise _unavailable(
            f"no built-in server is named {name!r} (shipped: {shipped}); "
            f"for your own server add {_EXAMPLE} to its [[mcp.servers]] entry"
        )
    return as_factory(_load_attr(spec, name, folder if module else None), spec, name)
