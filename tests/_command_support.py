"""A tiny catalog for the `tools` help tests: the duck-typed API `command.helptext` reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from toolshell.registry.entry import ServerInfo, ToolEntry

LIST_PULLS = ToolEntry(
    "github",
    "list_pulls",
    "List pull requests in a repository. Sorted by number.",
    {
        "type": "object",
        "properties": {
            "repo": {"type": "string", "description": "Owner and name, e.g. acme/api."},
            "state": {"type": "string", "enum": ["open", "closed", "all"], "default": "open"},
            "per_page": {"type": "integer", "default": 30, "description": "Page size,\n  at most 100."},
        },
        "required": ["repo"],
    },
    {"readOnlyHint": True},
)
DELETE_BRANCH = ToolEntry(
    "github",
    "delete-branch",
    "Delete a branch! It cannot be undone.",
    {
        "type": "object",
        "properties": {"repo": {"type": "string"}, "branch": {"type": "string"}},
        "required": ["repo", "branch"],
    },
    {"destructiveHint": True},
)
ADD_LABELS = ToolEntry(
    "github",
    "add_labels",
    "Add labels to an issue or pull request",
    {
        "type": "object",
        "properties": {
            "repo": {"type": "string"},
            "number": {"type": "integer"},
            "labels": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["repo", "number", "labels"],
    },
)
WEB_FETCH = ToolEntry(
    None,
    "web_fetch",
    "Fetch a URL and return its text.\nFollows redirects.",
    {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
    {"readOnlyHint": True, "openWorldHint": True},
)


@dataclass
class FakeCatalog:
    servers: list[ServerInfo]
    entries: dict[str, list[ToolEntry]] = field(default_factory=dict)
    top_level: list[ToolEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def server_entries(self, name: str) -> list[ToolEntry]:
        return self.entries.get(name, [])

    def duplicate_notes(self) -> list[str]:
        return self.notes


@dataclass
class FakeHit:
    entry: ToolEntry
    score: float


def catalog() -> FakeCatalog:
    return FakeCatalog(
        servers=[
            ServerInfo("github", True, 3, description="GitHub repositories, issues and pull requests. Needs a token."),
            ServerInfo("docs", False, 0, state="not_loaded"),
            ServerInfo("time_zone", True, 1, state="failed"),
        ],
        entries={"github": [LIST_PULLS, DELETE_BRANCH, ADD_LABELS]},
        top_level=[WEB_FETCH],
        notes=["tools github list-pulls: github and gh_enterprise both have it; github wins (configured first)"],
    )
