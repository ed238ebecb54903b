"""The session timeline: a `shell.call` per script run and a `tool.nested_call` per `tools` call.

Events never reach the model; they are stored (`SqliteSink`) and shown by `toolshell timeline`.
"""

from toolshell.timeline.events import (
    OUTCOMES,
    SOURCES,
    Event,
    NestedCall,
    Outcome,
    ShellCall,
    Source,
    is_secret_key,
    mask_secrets,
    new_id,
    outcome_for,
    preview,
    script_preview,
)
from toolshell.timeline.render import render_timeline, timeline_json
from toolshell.timeline.sinks import EventSink, MemorySink, SqliteSink, query

__all__ = [
    "OUTCOMES",
    "SOURCES",
    "Event",
    "EventSink",
    "MemorySink",
    "NestedCall",
    "Outcome",
    "ShellCall",
    "Source",
    "SqliteSink",
    "is_secret_key",
    "mask_secrets",
    "new_id",
    "outcome_for",
    "preview",
    "query",
    "render_timeline",
    "script_preview",
    "timeline_json",
]
