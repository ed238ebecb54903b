"""`notifications/progress` of a long `bash` call, for clients that reset their timeout on progress.

A `tools/call` that carries a `progressToken` (in either era) gets one progress notification each
time its script makes headway: a nested `tools` call ended, or the script wrote output. The
message says which (`tools github list-pulls: completed`, `1.2 kB of output`), never the output
itself. Notifications that pile up while one is being sent are folded into the next, so a
chatty script costs one notification per send, not one per line. A task (the call returned a
`CreateTaskResult`) sends none: the extension has no progress on tasks.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server import ServerRequestContext

from toolshell.frontends.serve.tasks.wire import declared
from toolshell.timeline.events import Event, NestedCall

logger = logging.getLogger(__name__)

BACKLOG = 64
"""Pending headway notes; past it, notes are dropped (the next one sent says where it is now)."""


@asynccontextmanager
async def reporting(
    ctx: ServerRequestContext[Any], also: Callable[[str, str], None] | None = None
) -> AsyncIterator[dict[str, Any]]:
    """The `Session.run` options that report this call's headway (the SDK sends nothing when the
    request carried no progress token); `also` sees the output too (yield-and-wait keeps it)."""
    # A Tasks client's long call is a task, and tasks have no progress; a call without a progress
    # token gets none either: no stream, no sending task (the common call pays for neither).
    if declared(ctx) or not asked_progress(ctx):
        yield {} if also is None else {"on_output": also}
        return
    send, receive = anyio.create_memory_object_stream[str](BACKLOG)
    written = 0

    def note(message: str) -> None:
        try:
            send.send_nowait(message)
        except anyio.WouldBlock:  # the client reads slowly: this note is folded into a later one
            pass
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):  # the client went: no more notes
            pass

    def on_output(stdout: str, stderr: str) -> None:
        nonlocal written
        if also is not None:
            also(stdout, stderr)
        written += len(stdout.encode()) + len(stderr.encode())
        note(f"{_size(written)} of output")

    def on_event(event: Event) -> None:
        if isinstance(event, NestedCall):
            note(f"{event.command}: {event.outcome}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(_send, ctx, receive)
        try:
            yield {"on_output": on_output, "on_event": on_event}
        finally:
            send.close()


def asked_progress(ctx: ServerRequestContext[Any]) -> bool:
    """Whether anyone hears this call's progress: the request carried a `progressToken` (every
    wire era), or the in-process dispatcher holds the caller's progress callback (no token there)."""
    meta = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken"))
    if isinstance(token, str | int) and not isinstance(token, bool):
        return True
    # In-process, the SDK's direct dispatch context (wrapped: `_inner`) calls the caller's callback
    # `_on_progress` instead; a change there shows in `test_tasks_progress` (in-process progress).
    outbound = getattr(ctx.session, "_request_outbound", None)
    for _ in range(4):
        if outbound is None:
            return False
        if getattr(outbound, "_on_progress", None) is not None:
            return True
        outbound = getattr(outbound, "_inner", None)
    return False


async def _send(ctx: ServerRequestContext[Any], receive: MemoryObjectReceiveStream[str]) -> None:
    """Send the notes in order, folding those that came meanwhile into one (the latest of each kind)."""
    count = 0
    async with receive:
        async for first in receive:
            notes = [first]
            while True:
                try:
                    notes.append(receive.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            count += len(notes)
            message = "; ".join(dict.fromkeys(_latest(notes)))
            try:
                await ctx.session.report_progress(count, message=message)
            except Exception:  # the client went away: the call goes on, unreported
                logger.debug("a progress notification was not delivered", exc_info=True)
                return


def _latest(notes: list[str]) -> list[str]:
    """Every call note, and only the last output note (it counts all output so far)."""
    output = [n for n in notes if n.endswith(" of output")]
    return [n for n in notes if not n.endswith(" of output")] + output[-1:]


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1000 else f"{n / 1000:.1f} kB"


__all__ = ["asked_progress", "reporting"]
