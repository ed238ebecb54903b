"""`toolshell web`: a local page for people — pending approvals, grants, the timeline, servers and
saved scripts — over a JSON API, protected by a token and Host/Origin checks.

`web_app(host, token)` builds the ASGI app; `toolshell web` serves it on 127.0.0.1.
"""

from __future__ import annotations

from toolshell.frontends.web.app import web_app

__all__ = ["web_app"]
