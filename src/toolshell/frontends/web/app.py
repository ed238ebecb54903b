"""The ASGI app of `toolshell web`: the page, its static files and icon (shipped in the package, no
CDN), and the JSON API, all behind `AccessMiddleware`.

The page holds no secret: the token stays in the URL's fragment until the page's script takes it.
It does hold the escaping rule, `safe_text.HIDDEN`, so the page shows text exactly as the CLI does.
"""

from __future__ import annotations

from collections.abc import Collection
from importlib.resources import files

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from toolshell.frontends.web.access import Access, AccessMiddleware
from toolshell.frontends.web.api import Api
from toolshell.host import Host
from toolshell.safe_text import ranges_text

STATIC = files("toolshell.frontends.web") / "static"


def web_app(host: Host, access: Access | str, *, hosts: Collection[str] = ()) -> Starlette:
    """The page and its API over an open `Host`.

    Args:
        host: Whose state database, config and servers the page shows.
        access: Who may use it (`access.Access`), or just the token every request must carry.
        hosts: With a bare token: host names accepted besides loopback ones; `"*"` for any.
    """
    access = access if isinstance(access, Access) else Access(access, tuple(hosts))
    page = (STATIC / "index.html").read_text(encoding="utf-8").replace("{{hidden}}", ranges_text())
    icon = (STATIC / "favicon.svg").read_bytes()

    async def index(request: Request) -> Response:
        return HTMLResponse(page)

    async def favicon(request: Request) -> Response:
        # The page links static/favicon.svg; this answers a client that asks the conventional path.
        return Response(icon, media_type="image/svg+xml")

    routes = [
        Route("/", index),
        Route("/favicon.ico", favicon),
        *Api(host).routes(),
        Mount("/static", StaticFiles(packages=[("toolshell.frontends.web", "static")]), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(AccessMiddleware, access=access)])
