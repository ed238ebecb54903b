"""The `tools` command's pure parts: argv parsing, input building, help/search text, rendering.

No I/O here: the shell wiring reads stdin, looks names up in the catalog, calls the tool, and
writes what these functions return.
"""

from __future__ import annotations

from toolshell.command.argv import Help, Invoke, Plan, Request, Scripts, Search, parse
from toolshell.command.helptext import search_text, server_help, tool_help, top_help, verb_help
from toolshell.command.inputs import build_input
from toolshell.command.render import Image, Rendered, cap, render_result

__all__ = [
    "Help",
    "Image",
    "Invoke",
    "Plan",
    "Rendered",
    "Request",
    "Scripts",
    "Search",
    "build_input",
    "cap",
    "parse",
    "render_result",
    "search_text",
    "server_help",
    "tool_help",
    "top_help",
    "verb_help",
]
