"""The ASGI app of `toolshell web`: the page, its static files (shipped in the package, no CDN), and
the JSON API, all behind `AccessMiddleware`."""

from __future__ import annotations

import html
from collections.abc import Collection
from importlib.resources import files
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from toolshell.frontends.web.access import COOKIE, Access, AccessMiddleware
from toolshell.frontends.web.api import Api
from toolshell.host import Host

STATIC = files("toolshell.frontends.web") / "static"


def web_app(host: Host, token: str, *, hosts: Collection[str] = ()) -> Starlette:
    """The page and its API over an open `Host`.

    Args:
        host: Whose state database, config and servers the page shows.
        token: The secret every request must carry (see `access`).
        hosts: Host names accepted besides loopback ones; `"*"` for any.
    """
    page = (STATIC / "index.html").read_text(encoding="utf-8").replace("{{token}}", html.escape(token))

    async def index(request: Request) -> Response:
        if "token" in request.query_params:
            # First load: keep the token in a cookie and take it out of the address bar and history.
            rest = {k: v for k, v in request.query_params.items() if k != "token"}
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response: Response = RedirectResponse(target, 303)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
            return response
        return HTMLResponse(page)

    routes = [
        Route("/", index),
        *Api(host).routes(),
        Mount("/static", StaticFiles(packages=[("toolshell.frontends.web", "static")]), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(AccessMiddleware, access=Access(token, tuple(hosts)))])
