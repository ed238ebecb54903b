"""The Python API's promises: errors reach the caller as themselves, and the API is typed."""

from __future__ import annotations

import inspect

import pytest

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.host import Host
from toolshell.result import RunResult

pytestmark = pytest.mark.anyio


async def test_a_toolshell_error_in_the_body_of_host_open_is_caught_outside_it_as_itself() -> None:
    with pytest.raises(ToolshellError) as caught:
        async with Host.open() as host:
            await host.call_tool("text_metrics", "no-such-tool")
    assert caught.type is ToolshellError
    assert caught.value.code == ErrorCode.UNKNOWN_COMMAND


async def test_any_exception_in_the_body_of_host_open_leaves_it_unwrapped() -> None:
    with pytest.raises(KeyError) as caught:
        async with Host.open():
            raise KeyError("mine")
    assert caught.type is KeyError


def test_the_public_entry_points_take_typed_keywords_not_kwargs() -> None:
    for fn in (Host.__init__, Host.open, Host.session, Host.run, Host.plan):
        kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, fn.__qualname__
    assert inspect.signature(Host.run).return_annotation in ("RunResult", RunResult)
