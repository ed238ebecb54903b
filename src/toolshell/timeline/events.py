"""Timeline events: one `ShellCall` per script run, one `NestedCall` per `tools` call inside it.

Events are for people (`toolshell timeline`, a chat UI); they never reach the model. Inputs are
stored only as a short preview with secret-looking values masked, so the timeline is safe to show.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field, fields
from typing import Any, Literal

Outcome = Literal["completed", "failed", "refused", "stopped_for_approval"]
Source = Literal["agent", "cli", "trigger", "script"]

OUTCOMES: tuple[Outcome, ...] = ("completed", "failed", "refused", "stopped_for_approval")
SOURCES: tuple[Source, ...] = ("agent", "cli", "trigger", "script")

PREVIEW_LIMIT = 120
MASK = "***"

# Compared against the key lowercased with `-`/`_` removed, so `API-Key`, `api_key` and `apiKey` all match.
_SECRET_KEY = re.compile(r"token|passw(or)?d|secret|apikey|authorization|credential|privatekey|cookie")

# The call was not made because the host decided so (policy, guardrail, budget, an earlier stop).
_REFUSED_CODES = frozenset({"denied", "call_limit", "stopped", "rate_limited"})


def new_id() -> str:
    """A fresh event id."""
    return uuid.uuid4().hex


def is_secret_key(key: str) -> bool:
    """Whether a JSON key names something that must not be shown (token, password, api_key, …)."""
    return bool(_SECRET_KEY.search(key.lower().replace("_", "").replace("-", "")))


def mask_secrets(value: Any) -> Any:
    """A copy of `value` with the values of secret-looking keys replaced by `"***"`.

    Numbers and booleans stay visible: under keys like `max_tokens` they are counts, not secrets.
    """
    if isinstance(value, dict):
        return {k: MASK if is_secret_key(str(k)) and _maskable(v) else mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    return value


def _maskable(value: Any) -> bool:
    return value is not None and not isinstance(value, bool | int | float)


def cut(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """`text` cut to at most `limit` characters, ending with `…` when something was dropped."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def preview(input: Any, limit: int = PREVIEW_LIMIT) -> str:
    """A short, safe preview of a call's input: canonical JSON, secrets masked, cut to `limit`.

    Args:
        input: The call's input object (anything JSON-like is accepted; `None` previews as `null`).
        limit: The longest preview, in characters, including the trailing `…`.
    """
    text = json.dumps(mask_secrets(input), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return cut(text, limit)


def script_preview(script: str, limit: int = PREVIEW_LIMIT) -> str:
    """A one-line preview of a script: its non-empty lines joined with ` ⏎ `, cut to `limit`."""
    lines = [" ".join(line.split()) for line in script.splitlines()]
    return cut(" ⏎ ".join(line for line in lines if line), limit)


def outcome_for(error_code: str | None) -> Outcome:
    """The timeline outcome of a `tools` call that ended with `error_code` (None: it succeeded)."""
    if error_code is None:
        return "completed"
    if error_code == "needs_approval":
        return "stopped_for_approval"
    return "refused" if error_code in _REFUSED_CODES else "failed"


@dataclass
class NestedCall:
    """The `tool.nested_call` event: one `tools` call made by a script, under its shell call."""

    id: str
    shell_call_id: str
    session_id: str
    command: str
    """The call as written, without input: `tools github get-pull`."""
    input_preview: str
    """From `preview(input)`: short and with secrets masked."""
    outcome: Outcome
    error_code: str | None
    duration_ms: float
    started_at: float
    """Unix seconds."""
    type: str = field(default="tool.nested_call", init=False)

    def to_dict(self) -> dict[str, Any]:
        return _shallow(self)


@dataclass
class ShellCall:
    """One script run (the `bash` call the model sees, a CLI run, a trigger run).

    Emit it when the run starts with `exit_code=None` and again when it ends: sinks keep the
    latest copy per id, so a run that never finished still shows up with its nested calls.
    """

    id: str
    session_id: str
    script_preview: str
    exit_code: int | None
    started_at: float
    duration_ms: float | None
    source: Source
    caller: str | None = None
    """Who made the call: the identity `toolshell serve` authenticated, or None (this machine's user)."""
    address: str | None = None
    """Where the call came from: the peer of the `serve --http` request, or the client a trusted
    proxy named (`[serve] trusted_proxies`); None without a request (the CLI, a trigger)."""
    worker: str | None = None
    """The host that ran it (`Host.worker_id`), so a worker that died can be told apart."""
    ended_by: str | None = None
    """Why it ended without its own exit: "worker_lost" when its worker died mid-call."""
    type: str = field(default="shell.call", init=False)

    def to_dict(self) -> dict[str, Any]:
        return _shallow(self)


Event = NestedCall | ShellCall


def _shallow(event: Any) -> dict[str, Any]:
    """The event as a dict; its fields are plain values, so no deep copy (`asdict`) is needed."""
    return {f.name: getattr(event, f.name) for f in fields(event)}
