"""A small in-process stand-in for a GitHub MCP server: the seed's `tools github …` examples run on it."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

READ = ToolAnnotations(readOnlyHint=True)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
DESTROY = ToolAnnotations(readOnlyHint=False, destructiveHint=True)

PULLS = [
    {"number": 7, "title": "Fix flaky test", "draft": False, "mergeable": True},
    {"number": 8, "title": "WIP: new parser", "draft": True, "mergeable": False},
    {"number": 9, "title": "Bump deps", "draft": False, "mergeable": True},
]


def make_github(calls: list[tuple[str, dict[str, Any]]] | None = None) -> MCPServer:
    """The server; every call is appended to `calls` so tests can see what really ran."""
    log = calls if calls is not None else []
    server = MCPServer("github")

    def list_pulls(repo: str, state: str = "open") -> list[dict[str, Any]]:
        log.append(("list-pulls", {"repo": repo, "state": state}))
        return PULLS

    def get_pull(repo: str, number: int) -> dict[str, Any]:
        log.append(("get-pull", {"repo": repo, "number": number}))
        pull = next((p for p in PULLS if p["number"] == number), None)
        if pull is None:
            raise ValueError(f"no pull request #{number} in {repo}")
        return {**pull, "repo": repo}

    def delete_branch(branch: str) -> str:
        log.append(("delete-branch", {"branch": branch}))
        return f"deleted {branch}"

    def create_issue(title: str) -> dict[str, str]:
        log.append(("create-issue", {"title": title}))
        return {"id": "EVE-1201"}

    def add_labels(repo: str, number: int, labels: list[str]) -> str:
        log.append(("add-labels", {"repo": repo, "number": number, "labels": labels}))
        return "ok"

    def search_code(query: str, exact: bool = False) -> str:
        log.append(("search-code", {"query": query, "exact": exact}))
        return f"query={query} exact={exact}"

    server.add_tool(list_pulls, name="list-pulls", description="List pull requests of a repository.", annotations=READ)
    server.add_tool(get_pull, name="get-pull", description="Get one pull request.", annotations=READ)
    server.add_tool(delete_branch, name="delete-branch", description="Delete a branch.", annotations=DESTROY)
    server.add_tool(create_issue, name="create-issue", description="Create an issue.", annotations=WRITE)
    server.add_tool(add_labels, name="add-labels", description="Add labels to an issue or PR.", annotations=WRITE)
    server.add_tool(search_code, name="search-code", description="Search code.", annotations=READ)
    return server
