"""The catalog one shell call sees, and the one lazy-load helper every caller uses.

The catalog is built when the shell call first needs it (a script that calls no `tools` never
builds one). A command that names a server that is not ready (an `on_demand` server never
opened, one still connecting, one that failed) starts it, and the catalog is rebuilt once;
everything else reads the catalog as it was first built in the shell call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence

from toolshell.calls.prepare import lookup
from toolshell.errors import ToolshellError
from toolshell.registry.catalog import Catalog, Lookup

Loader = Callable[[str], Awaitable[None]]
Rebuild = Callable[[], Awaitable[Catalog]]


class CatalogView:
    """A shell call's catalog.

    Args:
        catalog: the catalog, when already built; None builds it with `rebuild` on first need.
        load: opens one server (the connection applies its own backoff to a failed one).
        rebuild: builds the session's catalog (again).
    """

    def __init__(self, catalog: Catalog | None, load: Loader, rebuild: Rebuild) -> None:
        self._catalog = catalog
        self._load = load
        self._rebuild = rebuild

    async def current(self) -> Catalog:
        """The shell call's catalog, built now if it was not yet."""
        if self._catalog is None:
            self._catalog = await self._rebuild()
        return self._catalog

    @property
    def catalog(self) -> Catalog:
        """The catalog `current()` built (every `tools` command awaits it before it reads this)."""
        if self._catalog is None:
            raise RuntimeError("the catalog is read before it was built; await CatalogView.current() first")
        return self._catalog

    async def ensure_loaded(self, words: Sequence[str], *, retry_failed: bool = True) -> Lookup | None:
        """Start the server `words` names when it is not ready, then rebuild the catalog.

        With `retry_failed=False` only a server never opened is started (help shows a failed
        server's state rather than retrying it). A failed start raises `ToolshellError`.

        Returns what `words` name in `catalog` as it now is (`resolve` takes it, so a call looks its
        words up once), or None when they name nothing or the catalog was rebuilt.
        """
        try:
            look = lookup(await self.current(), words)
        except ToolshellError:
            return None  # unknown names fail in `prepare`, with suggestions
        server = look.server
        if server is None or look.kind == "tool" and server.state == "ready":
            return look
        if look.kind == "unloaded_server" or (retry_failed and server.state != "ready"):
            await self._load(server.name)
            self._catalog = await self._rebuild()
            return None
        return look

    async def load_quietly(self, names: Iterable[str]) -> None:
        """Start several servers best effort (search, the static checks); rebuild once if any were named."""
        names = sorted(set(names))
        for name in names:
            try:
                await self._load(name)
            except ToolshellError:
                pass  # listed as failed; a call that names it says why
        if names:
            self._catalog = await self._rebuild()
