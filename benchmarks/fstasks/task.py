"""What a filesystem task is: a question, its direct-call solution, its toolshell script, its verifier."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fstasks.world import snapshot

HERE = Path(__file__).resolve().parent


class Caller(Protocol):
    """Makes one direct tool call (one turn) and returns the text the model would read."""

    async def __call__(self, tool: str, arguments: dict[str, Any]) -> str: ...


@dataclass(frozen=True)
class FsTask:
    """One task, solved both ways against the filesystem server, checked byte for byte.

    `direct` plays the model calling the server's tools one per turn: it reads each result as text
    and picks the next call from it (it never looks at the folder itself). The toolshell way runs
    one `tools filesystem --help` turn, then `<name>.sh` beside this file. Under `scope` (paths
    relative to the files root: folders or files) the files must be exactly `expected()` afterwards,
    no more, no fewer, byte for byte; `answer`, when set, is what the agent must answer.
    """

    name: str
    kind: str
    prompt: str
    direct: Callable[[Caller, Path], Awaitable[str]]
    scope: tuple[str, ...]
    expected: Callable[[], dict[str, bytes]]
    answer: str | None = None

    def script(self) -> str:
        return (HERE / f"{self.name}.sh").read_text()

    def verify(self, files: Path, answer: str) -> list[str]:
        """What differs from the expected result (empty when the task was done exactly)."""
        got = {p: data for p, data in snapshot(files).items() if any(_under(p, s) for s in self.scope)}
        want = self.expected()
        problems = [f"{p}: missing" for p in sorted(want.keys() - got.keys())]
        problems += [f"{p}: not expected" for p in sorted(got.keys() - want.keys())]
        problems += [_difference(p, got[p], want[p]) for p in sorted(want.keys() & got.keys()) if got[p] != want[p]]
        if self.answer is not None and answer != self.answer:
            problems.append(f"answer {answer!r} is not {self.answer!r}")
        return problems


def _under(path: str, scope: str) -> bool:
    return path == scope or path.startswith(scope + "/")


def _difference(path: str, got: bytes, want: bytes) -> str:
    at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
    sizes = f"{len(got)} bytes, expected {len(want)}"
    return f"{path}: {sizes}; from byte {at}: {got[at : at + 30]!r} is not {want[at : at + 30]!r}"
