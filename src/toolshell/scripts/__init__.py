"""Saved scripts (`tools scripts …`), their store, and triggers (schedules and webhooks).

Names load lazily: `jsonschema` and Starlette are slow to import and most commands need neither.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolshell.config.cron import CronSchedule
    from toolshell.config.names import check_name
    from toolshell.config.triggers import TriggerConfig
    from toolshell.scripts.clock import Clock, ManualClock, SystemClock
    from toolshell.scripts.store import SavedScript, ScriptStore, check_schema
    from toolshell.scripts.triggers import (
        RunOutcome,
        RunScript,
        Trigger,
        TriggerRunner,
        tokens_from_env,
    )
    from toolshell.scripts.verbs import (
        MAX_DEPTH,
        USAGE,
        ScriptsRequest,
        check_can_save,
        check_depth,
        list_text,
        parse_scripts_args,
        script_help,
    )

_WHERE = {
    "Clock": "clock",
    "ManualClock": "clock",
    "SystemClock": "clock",
    "CronSchedule": "toolshell.config.cron",
    "SavedScript": "store",
    "ScriptStore": "store",
    "check_name": "toolshell.config.names",
    "check_schema": "store",
    "RunOutcome": "triggers",
    "RunScript": "triggers",
    "Trigger": "triggers",
    "TriggerConfig": "toolshell.config.triggers",
    "TriggerRunner": "triggers",
    "tokens_from_env": "triggers",
    "MAX_DEPTH": "verbs",
    "USAGE": "verbs",
    "ScriptsRequest": "verbs",
    "check_can_save": "verbs",
    "check_depth": "verbs",
    "list_text": "verbs",
    "parse_scripts_args": "verbs",
    "script_help": "verbs",
}

__all__ = [
    "Clock",
    "CronSchedule",
    "MAX_DEPTH",
    "ManualClock",
    "RunOutcome",
    "RunScript",
    "SavedScript",
    "ScriptStore",
    "ScriptsRequest",
    "SystemClock",
    "Trigger",
    "TriggerConfig",
    "TriggerRunner",
    "USAGE",
    "check_can_save",
    "check_depth",
    "check_name",
    "check_schema",
    "list_text",
    "parse_scripts_args",
    "script_help",
    "tokens_from_env",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    where = _WHERE[name]
    return getattr(importlib.import_module(where if "." in where else f"{__name__}.{where}"), name)
