"""The webhook endpoint: `POST /hooks/<trigger>` runs that trigger's saved script.

Checks in order: the Host header (loopback names only unless configured, against DNS
rebinding), the Origin header (a browser page on another site must not fire a trigger: that is
cross-site request forgery when the trigger has no token), the trigger, its bearer token
(constant-time compare; never logged or echoed; only `allow_unauthenticated = true` goes
without), the body (an optional JSON object sent as `application/json`, merged over the
trigger's input). Requiring the JSON content type matters
because a browser sends `text/plain` cross-site without asking the server first. Errors use the
same JSON shape as `tools` error lines.

An `Idempotency-Key` header (1 to 255 printable ASCII characters, e.g. a UUID) makes the request
run once across every trigger server sharing the state store, for `KEY_TTL` (24 hours): a repeat
with the same body gets the first run's answer and the header `Idempotent-Replayed: true`; a
repeat while that run is going gets 409 with `Retry-After`, and once the process running it is
lost (no heartbeat, `scripts.claims`) the lost outcome, replayed; the key with another body gets 422.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from toolshell.errors import ErrorCode, ToolshellError, error_body, http_status
from toolshell.scripts.triggers import KeyInUse, TriggerRunner

log = logging.getLogger("toolshell.triggers")

MAX_BODY_BYTES = 1_000_000
MAX_DEPTH = 64
"""How deeply a body may nest. Deeper ones are refused before anything walks them recursively."""
MAX_KEY_LENGTH = 255


class _Refusal(Exception):
    def __init__(self, error: ToolshellError, status: int | None = None, headers: dict[str, str] | None = None):
        super().__init__(error.message)
        self.error, self.status, self.headers = error, status or http_status(error), headers


def _refuse(code: ErrorCode, message: str, status: int | None = None, **headers: str) -> _Refusal:
    return _Refusal(ToolshellError(code, message), status, {k.replace("_", "-"): v for k, v in headers.items()})


def webhook_app(
    runner: TriggerRunner,
    tokens: Mapping[str, str],
    *,
    allowed_hosts: Collection[str] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Starlette:
    """An ASGI app serving `POST /hooks/<trigger>` for the runner's webhook triggers.

    Args:
        runner: Runs the trigger (`runner.fire`).
        tokens: The bearer token of each trigger that names `secret_env`, by trigger name
            (`tokens_from_env` builds it). A trigger without one is refused unless it sets
            `allow_unauthenticated`.
        allowed_hosts: Host names accepted besides loopback ones (`localhost`, `127.0.0.1`, `::1`),
            in the Host header and in a browser's Origin header; `"*"` accepts any Host, for a
            deployment behind a proxy that checks hosts itself (Origin still needs a listed name).
        max_body_bytes: Larger bodies get 413.
    """
    extra_hosts = {h.lower() for h in allowed_hosts}

    async def hook(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            _check_host(request.headers.get("host", ""), extra_hosts)
            _check_origin(request.headers.get("origin"), extra_hosts)
            trigger = runner.triggers.get(name)
            if trigger is None or not trigger.webhook:
                raise _refuse(ErrorCode.UNKNOWN_COMMAND, f"no webhook trigger named {name!r}")
            if not trigger.allow_unauthenticated:  # without secret_env there is no token: refused
                _check_token(request.headers.get("authorization", ""), tokens.get(name), name)
            key = _idempotency_key(request.headers.getlist("idempotency-key"))
            body = await _read_input(request, max_body_bytes)
            try:
                outcome = await runner.fire(name, body, key)
            except KeyInUse as e:
                raise _Refusal(e, 409, {"Retry-After": "5"}) if e.running else _Refusal(e, 422) from None
            except ToolshellError as e:  # the store holding the keys is unreachable: 503, nothing ran
                raise _Refusal(e) from None
        except _Refusal as r:
            log.warning("webhook %s: refused (%s)", name, r.error.code)
            return JSONResponse(error_body(r.error), r.status, headers=r.headers)
        replayed = {"Idempotent-Replayed": "true"} if outcome.replayed else None
        return JSONResponse({"trigger": name, "script": trigger.script, **outcome.to_dict()}, headers=replayed)

    async def not_found(request: Request, exc: Exception) -> Response:
        error = ToolshellError(ErrorCode.UNKNOWN_COMMAND, "webhooks are served at POST /hooks/<trigger>")
        return JSONResponse(error_body(error), getattr(exc, "status_code", 404))

    return Starlette(
        routes=[Route("/hooks/{name}", hook, methods=["POST"])],
        exception_handlers={404: not_found, 405: not_found},
    )


def _check_host(header: str, extra: set[str]) -> None:
    if header.startswith("["):  # [::1]:8000
        host = header[1:].partition("]")[0]
    else:  # name:port, or a bare IPv6 address
        host = header.rsplit(":", 1)[0] if header.count(":") == 1 else header
    host = host.lower()
    if "*" in extra or host in extra or host == "localhost" or _is_loopback(host):
        return
    raise _refuse(
        ErrorCode.DENIED,
        f"host {host!r} is not served; webhooks answer on loopback names unless the host is configured",
        403,
    )


def _check_origin(origin: str | None, extra: set[str]) -> None:
    # Non-browser clients send no Origin; a browser always does on a cross-site POST. `"*"` in
    # allowed_hosts opens the Host check to a proxy, not the Origin check to every web page.
    if origin is None:
        return
    try:
        host = (urlsplit(origin.strip()).hostname or "").lower()
    except ValueError:
        host = ""
    if host and (host in extra or host == "localhost" or _is_loopback(host)):
        return
    raise _refuse(
        ErrorCode.DENIED,
        f"origin {origin!r} is not allowed; webhooks accept requests from web pages on loopback origins only"
        " unless the host is configured",
        403,
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_token(header: str, expected: str | None, name: str) -> None:
    if not expected:
        raise _refuse(ErrorCode.UNAVAILABLE, f"webhook {name!r} needs a token but none is configured on this host")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise _refuse(
            ErrorCode.DENIED,
            "this webhook needs the header 'Authorization: Bearer <token>'",
            401,
            www_authenticate="Bearer",
        )
    if not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise _refuse(
            ErrorCode.DENIED, "the bearer token is not the one this webhook expects", 401, www_authenticate="Bearer"
        )


def _idempotency_key(values: list[str]) -> str | None:
    """The request's Idempotency-Key, if it sent one; never echoed (it may be anything)."""
    if not values:
        return None
    form = f"1 to {MAX_KEY_LENGTH} printable ASCII characters, e.g. a UUID"
    if len(values) > 1:
        raise _refuse(ErrorCode.INVALID_INPUT, f"send one Idempotency-Key header, not {len(values)}; a key is {form}")
    key = values[0]
    if not key:
        why = "is empty"
    elif len(key) > MAX_KEY_LENGTH:
        why = f"is {len(key)} characters long"
    elif not (key.isascii() and key.isprintable()):
        why = "holds a control or non-ASCII character"
    else:
        return key
    raise _refuse(ErrorCode.INVALID_INPUT, f"the Idempotency-Key header {why}; a key is {form}")


async def _read_input(request: Request, limit: int) -> dict[str, Any] | None:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _refuse(ErrorCode.INVALID_INPUT, f"the body is larger than {limit} bytes", 413)
    if not body.strip():
        return None
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise _refuse(ErrorCode.INVALID_INPUT, "send the body with the header 'Content-Type: application/json'", 415)
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _refuse(ErrorCode.INVALID_INPUT, 'the body must be a JSON object, e.g. {"repo": "acme/api"}') from None
    except RecursionError:
        raise _too_deep() from None
    if _depth(value) > MAX_DEPTH:
        raise _too_deep()
    if not isinstance(value, dict):
        raise _refuse(ErrorCode.INVALID_INPUT, 'the body must be a JSON object, e.g. {"repo": "acme/api"}')
    return value


def _too_deep() -> _Refusal:
    return _refuse(
        ErrorCode.INVALID_INPUT, f"the body is nested more than {MAX_DEPTH} levels deep; send a flatter object"
    )


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in `value`, counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest
