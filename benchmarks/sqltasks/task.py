"""What a PostgreSQL task is: a request, its direct-call solution, its toolshell scripts, its verifier."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psycopg

from sqltasks import world
from sqltasks.world import Shop

HERE = Path(__file__).resolve().parent
DATABASE = (
    "The shop's PostgreSQL database has the tables customers, products, orders, order_items and payments;"
    " an order's items total is the sum of quantity × unit_price of its order_items."
)


class Caller(Protocol):
    """Makes one direct tool call (one turn) and returns the text the model would read."""

    async def __call__(self, tool: str, arguments: dict[str, Any]) -> str: ...


Verifier = Callable[["psycopg.Connection[tuple[Any, ...]]", Shop, str], list[str]]


@dataclass(frozen=True)
class PgTask:
    """One task, solved both ways against the PostgreSQL server, checked in the database afterwards.

    `direct` plays the model calling the server's tools one per turn, reading the results as text:
    an answer is what it read (it never looks at the database itself). The toolshell way runs
    `<name>.look.sh` (the schema and data the task touches, as the direct way looks first), then
    `<name>.sh` (the work and its check), after one `tools postgres --help` turn unless the `bash`
    description already lists the tools with their arguments. `setup` changes the shop's rows before
    they are loaded (the faults the task is about); `verify` queries the database afterwards and says
    what is wrong, from the rows the database was loaded with; the answer is checked where the task
    asks for one.
    """

    name: str
    kind: str
    request: str
    direct: Callable[[Caller], Awaitable[str]]
    verify: Verifier
    setup: Callable[[Shop], None] | None = None

    @property
    def prompt(self) -> str:
        return f"{DATABASE} {self.request}"

    def shop(self) -> Shop:
        """The rows this task's database starts with."""
        shop = Shop({table: list(rows) for table, rows in _base().tables.items()})
        if self.setup is not None:
            self.setup(shop)
        return shop

    def scripts(self) -> list[str]:
        return [(HERE / f"{self.name}.look.sh").read_text(), (HERE / f"{self.name}.sh").read_text()]

    def check(self, url: str, shop: Shop, answer: str) -> list[str]:
        """What is wrong in the database at `url` (empty when the task was done)."""
        with psycopg.connect(url, autocommit=True) as conn:
            return self.verify(conn, shop, answer)


@functools.cache
def _base() -> Shop:
    return world.data()
