"""What a benchmark task is: a question, its direct-call solution, its toolshell script, its answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tasks.world import World

HERE = Path(__file__).resolve().parent


class Caller(Protocol):
    """Makes one direct tool call (one turn) and returns the text the model would read."""

    async def __call__(self, server: str, tool: str, arguments: dict[str, Any]) -> str: ...


@dataclass(frozen=True)
class Task:
    """One task, solved both ways.

    `direct` plays the model of the direct way: it makes one call per turn through `call` and reads
    each result (as text, the way the model gets it) to choose the next call, then returns the answer.
    The toolshell way runs `before` (the turns an agent spends first: a `--help`, or a first try that
    fails) and then the script `<name>.sh` beside this file; the answer is what the script prints.
    `truth` computes the right answer from the world after the run.
    """

    name: str
    kind: str
    prompt: str
    direct: Callable[[Caller, World], Awaitable[str]]
    truth: Callable[[World], str]
    before: tuple[str, ...] = field(default_factory=tuple)

    @property
    def script_path(self) -> Path:
        return HERE / f"{self.name}.sh"

    def script(self) -> str:
        return self.script_path.read_text()


def preamble(world: World) -> str:
    """The paths the prompt gives the agent, as the first line of each of its scripts."""
    return f"FILES={world.files} REPO={world.repo}\n"


def prompt_paths(world: World) -> str:
    return f"Files are under {world.files}; the git repository is {world.repo}."
