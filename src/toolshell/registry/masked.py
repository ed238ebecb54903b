"""What the model is told of the catalog, with the configured secrets masked (issue 30 §5).

A server chooses its tools' names, titles, descriptions and schemas (argument names, enum values,
defaults); the `bash` description and the `keep_visible` tools carry them to the model in every
`tools/list`. Each piece is masked before anything cuts or joins it: the description cuts an
argument's name at 32 characters, and cut first, the part of a secret before the cut would stay.
A tool whose name holds a secret is listed as `get-***`: it is not refused, since its name is
masked everywhere it leaves (help, errors, spans, metric labels), and a script that knows the
secret can still call it. Server names are the config's own words and stay as written: the catalog
finds a server's tools by them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from toolshell.redact import Redactor, redact_json
from toolshell.registry.catalog import Catalog
from toolshell.registry.entry import ServerInfo, ToolEntry


def masked_entry(entry: ToolEntry, redact: Redactor) -> ToolEntry:
    """The entry with its name, title, description, schemas and annotations masked (itself when
    nothing is)."""
    fields = [entry.name, entry.description, entry.title, entry.input_schema, entry.output_schema, entry.annotations]
    shown = redact_json(fields, redact)
    if shown is fields:
        return entry
    name, description, title, input_schema, output_schema, annotations = shown
    return dataclasses.replace(
        entry,
        name=name,
        description=description,
        title=title,
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=annotations,
    )


def masked_server(server: ServerInfo, redact: Redactor) -> ServerInfo:
    """The server's description and last error masked; its configured name as it is."""
    fields = [server.description, server.last_error]
    shown = redact_json(fields, redact)
    return server if shown is fields else dataclasses.replace(server, description=shown[0], last_error=shown[1])


def masked_catalog(
    catalog: Catalog, redact: Redactor
) -> tuple[Sequence[ServerInfo], Callable[[str], Sequence[ToolEntry]]]:
    """The `bash` description's input (`bash_description(*masked_catalog(catalog, redact))`): the
    servers, and a server's tools, masked (only those of the servers it lists are read)."""
    if not redact:
        return catalog.servers, catalog.server_entries
    servers = [masked_server(s, redact) for s in catalog.servers]
    return servers, lambda name: [masked_entry(e, redact) for e in catalog.server_entries(name)]


__all__ = ["masked_catalog", "masked_entry", "masked_server"]
