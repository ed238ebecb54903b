"""`resolve_builtin`: shipped names through `SHIPPED`, users' own `module = "pkg.mod:attr"`, and errors."""

from __future__ import annotations

import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.server import Server

import _builtin_support
from toolshell.builtin import SHIPPED, resolve_builtin
from toolshell.errors import ErrorCode, ToolshellError

HOST = object()
WHAT = "point module at an MCPServer, a mcp.server.Server, or a function returning one"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_shipped_servers_are_text_metrics_runtime_and_web() -> None:
    assert sorted(SHIPPED) == ["runtime", "text_metrics"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "tools"), [("text_metrics", ["text_length"]), ("runtime", ["mcp"]), ("web", ["web_fetch"])]
)
async def test_a_shipped_name_resolves_to_a_server_with_its_tools(name: str, tools: list[str]) -> None:
    server = resolve_builtin(name)(HOST)  # type: ignore[arg-type]
    assert isinstance(server, Server) and server.name == name
    async with Client(server) as client:
        assert [t.name for t in (await client.list_tools()).tools] == tools


@pytest.mark.anyio
async def test_a_user_mcpserver_instance_is_used_as_it_is() -> None:
    server = resolve_builtin("greeter", "_builtin_support:mcp_server")(HOST)  # type: ignore[arg-type]
    assert server is _builtin_support.mcp_server
    async with Client(server) as client:
        result = await client.call_tool("greet", {"name": "Ada"})
    assert result.content == [types.TextContent(type="text", text="hello Ada")]


def test_a_user_factory_taking_the_host_receives_it() -> None:
    host = object()
    server = resolve_builtin("echo", "_builtin_support:make_server")(host)  # type: ignore[arg-type]
    assert isinstance(server, Server) and server.name == "echo"
    assert _builtin_support.hosts_seen[-1] is host


def test_a_user_factory_taking_nothing_is_called_without_the_host() -> None:
    server = resolve_builtin("plain", "_builtin_support:make_plain")(HOST)  # type: ignore[arg-type]
    assert isinstance(server, Server) and server.name == "plain"


def test_a_module_wins_over_a_shipped_name() -> None:
    server = resolve_builtin("runtime", "_builtin_support:make_plain")(HOST)  # type: ignore[arg-type]
    assert isinstance(server, Server) and server.name == "plain"


@pytest.mark.parametrize(
    ("name", "module", "message"),
    [
        ("nothing", None,
         "no built-in server is named 'nothing' (shipped: runtime, text_metrics); "
         'for your own server add module = "my_package.my_server:mcp" to its [[mcp.servers]] entry'),
        ("mine", "_builtin_support",
         "server 'mine': module '_builtin_support' must be `package.module:attribute`, "
         'e.g. module = "my_package.my_server:mcp"'),
        ("mine", "no_such_pkg.sub:app",
         "server 'mine': cannot import 'no_such_pkg.sub': no 'no_such_pkg' on the import path; "
         "add the folder holding no_such_pkg/ to PYTHONPATH, install 'no_such_pkg', or fix the module path "
         '(e.g. module = "my_package.my_server:mcp")'),
        ("mine", "_builtin_support:missing",
         f"server 'mine': '_builtin_support' has no attribute 'missing'; {WHAT}"),
        ("mine", "_builtin_support:not_a_server",
         f"server 'mine': _builtin_support:not_a_server is of type int; {WHAT}"),
    ],
)  # fmt: skip
def test_a_wrong_name_or_module_is_unavailable_and_says_what_to_write(
    name: str, module: str | None, message: str
) -> None:
    with pytest.raises(ToolshellError) as info:
        resolve_builtin(name, module)
    assert (info.value.code, info.value.message) == (ErrorCode.UNAVAILABLE, message)


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("_builtin_support:make_wrong",
         "server 'mine': _builtin_support:make_wrong returned a value of type str; "
         "it must return an MCPServer or a mcp.server.Server"),
        ("_builtin_support:make_broken",
         "server 'mine': _builtin_support:make_broken raised RuntimeError: no token configured"),
    ],
)  # fmt: skip
def test_a_factory_that_fails_or_returns_no_server_is_unavailable_when_opened(module: str, message: str) -> None:
    factory = resolve_builtin("mine", module)
    with pytest.raises(ToolshellError) as info:
        factory(HOST)  # type: ignore[arg-type]
    assert (info.value.code, info.value.message) == (ErrorCode.UNAVAILABLE, message)


def test_a_module_missing_from_the_import_path_is_found_in_the_config_folder_and_only_for_that_import(
    tmp_path: Path,
) -> None:
    (tmp_path / "beside_config_pkg").mkdir()
    (tmp_path / "beside_config_pkg" / "srv.py").write_text(
        "from mcp.server import Server\n\ndef make():\n    return Server('beside')\n"
    )
    server = resolve_builtin("mine", "beside_config_pkg.srv:make", folder=tmp_path)(HOST)  # type: ignore[arg-type]
    assert isinstance(server, Server) and server.name == "beside"
    assert str(tmp_path) not in sys.path


def test_a_module_in_neither_place_names_the_config_folder_to_put_it_in(tmp_path: Path) -> None:
    with pytest.raises(ToolshellError) as info:
        resolve_builtin("mine", "not_beside_pkg.srv:make", folder=tmp_path)
    assert info.value.message == (
        f"server 'mine': cannot import 'not_beside_pkg.srv': no 'not_beside_pkg' on the import path or in "
        f"{tmp_path}; put the folder not_beside_pkg/ in {tmp_path}, install 'not_beside_pkg', or fix the "
        'module path (e.g. module = "my_package.my_server:mcp")'
    )


def test_a_missing_dependency_of_a_found_module_names_the_dependency(tmp_path: Path) -> None:
    (tmp_path / "needs_dep_pkg").mkdir()
    (tmp_path / "needs_dep_pkg" / "srv.py").write_text("import not_installed_dependency\n")
    with pytest.raises(ToolshellError) as info:
        resolve_builtin("mine", "needs_dep_pkg.srv:make", folder=tmp_path)
    assert info.value.message == (
        "server 'mine': importing 'needs_dep_pkg.srv' failed: No module named 'not_installed_dependency'; "
        "install 'not_installed_dependency'"
    )
