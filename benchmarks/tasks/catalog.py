"""The benchmark's tasks. Each `_<name>` function is the direct way; `<name>.sh` is the toolshell way.

The direct functions read results as the model would (the text of the result) and pick the next
call from it; they never peek at the world. Tasks that write (`bump-branch`) come last, so the
read-only tasks see the same world on both ways.
"""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, time
from zoneinfo import ZoneInfo

from tasks.task import Caller, Task
from tasks.world import World

MEETING_ZONES = ["Asia/Tokyo", "Europe/Paris", "Africa/Nairobi", "America/Lima", "Europe/Oslo", "Australia/Sydney"]


def _local(source: str, hhmm: str, target: str) -> str:
    """`hhmm` today in `source`, as HH:MM in `target` (what mcp-server-time's convert_time computes)."""
    today = datetime.now(ZoneInfo(source)).date()
    at = datetime.combine(today, time.fromisoformat(hhmm), ZoneInfo(source))
    return at.astimezone(ZoneInfo(target)).strftime("%H:%M")


def _commits(log: str) -> list[tuple[str, str, str]]:
    """(hash, author, message) from git_log's text."""
    pattern = r"Commit: (\w+)\nAuthor: (.+)\nDate: .+\nMessage: (.+)"
    return [(m[0], m[1], m[2]) for m in re.findall(pattern, log)]


def _git(world: World, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=world.repo, check=True, capture_output=True, text=True).stdout.strip()


async def _config_port(call: Caller, w: World) -> str:
    text = await call("filesystem", "read_text_file", {"path": f"{w.files}/config.json"})
    return str(json.loads(text)["port"])


async def _tokyo_time(call: Caller, w: World) -> str:
    args = {"source_timezone": "America/New_York", "time": "09:30", "target_timezone": "Asia/Tokyo"}
    return str(json.loads(await call("time", "convert_time", args))["target"]["datetime"][11:16])


async def _inventory_stock(call: Caller, w: World) -> str:
    found = await call("filesystem", "search_files", {"path": str(w.files), "pattern": "**/inventory*"})
    csv = await call("filesystem", "read_text_file", {"path": found.splitlines()[0]})
    return next(row.split(",")[2] for row in csv.splitlines() if row.startswith("SKU-017,"))


async def _pricing_commit(call: Caller, w: World) -> str:
    log = await call("git", "git_log", {"repo_path": str(w.repo), "max_count": 50})
    commit = next(h for h, _, message in _commits(log) if message == "Add pricing table")
    shown = await call("git", "git_show", {"repo_path": str(w.repo), "revision": commit})
    price = re.findall(r"base_price = \d+", shown)[0]
    return f"{commit[:7]} {price}"


async def _treasure_hunt(call: Caller, w: World) -> str:
    note = await call("filesystem", "read_text_file", {"path": f"{w.files}/hunt/start.txt"})
    while step := re.search(r"^next: (.+)$", note, re.M):
        note = await call("filesystem", "read_text_file", {"path": f"{w.files}/{step[1]}"})
    return str(re.findall(r"\d-[A-Z]+-\d+", note)[0])


def _related(graph: str, source: str, relation: str) -> str:
    return str(
        next(r["to"] for r in json.loads(graph)["relations"] if (r["from"], r["relationType"]) == (source, relation))
    )


async def _ada_mentor_hq(call: Caller, w: World) -> str:
    mentor = _related(await call("memory", "open_nodes", {"names": ["Ada"]}), "Ada", "mentored_by")
    company = _related(await call("memory", "open_nodes", {"names": [mentor]}), mentor, "works_at")
    return _related(await call("memory", "open_nodes", {"names": [company]}), company, "headquartered_in")


async def _meeting_times(call: Caller, w: World) -> str:
    lines = []
    for zone in MEETING_ZONES:
        args = {"source_timezone": "UTC", "time": "15:00", "target_timezone": zone}
        lines.append(f"{zone} {json.loads(await call('time', 'convert_time', args))['target']['datetime'][11:16]}")
    return "\n".join(lines)


async def _changed_files(call: Caller, w: World) -> str:
    log = await call("git", "git_log", {"repo_path": str(w.repo), "max_count": 5})
    lines = []
    for commit, _, _ in _commits(log):
        shown = await call("git", "git_show", {"repo_path": str(w.repo), "revision": commit})
        lines.append(" ".join([commit[:7], *sorted(re.findall(r"^\+\+\+ b/(.+)$", shown, re.M))]))
    return "\n".join(lines)


async def _authors_count(call: Caller, w: World) -> str:
    log = await call("git", "git_log", {"repo_path": str(w.repo), "max_count": 100})
    authors = [author for _, author, _ in _commits(log)]
    return "\n".join(f"{authors.count(a)} {a}" for a in sorted(set(authors), key=lambda a: (-authors.count(a), a)))


async def _nairobi_designers(call: Caller, w: World) -> str:
    graph = json.loads(await call("memory", "read_graph", {}))
    there = {r["from"] for r in graph["relations"] if (r["relationType"], r["to"]) == ("lives_in", "Nairobi")}
    designers = [e["name"] for e in graph["entities"] if "works as designer" in e["observations"]]
    return "\n".join(name for name in designers if name in there)


async def _sydney_date(call: Caller, w: World) -> str:
    await call("time", "get_time", {"timezone": "Australia/Sydney"})  # the wrong name; the error names none
    return str(json.loads(await call("time", "get_current_time", {"timezone": "Australia/Sydney"}))["datetime"][:10])


async def _london_3pm(call: Caller, w: World) -> str:
    args = {"source_timezone": "Europe/London", "time": "3pm", "target_timezone": "America/Toronto"}
    await call("time", "convert_time", args)  # "Invalid time format. Expected HH:MM [24-hour format]"
    return str(json.loads(await call("time", "convert_time", args | {"time": "15:00"}))["target"]["datetime"][11:16])


async def _bump_branch(call: Caller, w: World) -> str:
    repo = str(w.repo)
    await call("git", "git_create_branch", {"repo_path": repo, "branch_name": "bump"})
    await call("git", "git_checkout", {"repo_path": repo, "branch_name": "bump"})
    await call("filesystem", "write_file", {"path": f"{repo}/VERSION", "content": "1.1\n"})
    await call("git", "git_add", {"repo_path": repo, "files": ["VERSION"]})
    done = await call("git", "git_commit", {"repo_path": repo, "message": "Bump version to 1.1"})
    return str(re.findall(r"[0-9a-f]{40}", done)[0])


def _designers_truth(w: World) -> str:
    graph = [json.loads(line) for line in w.memory.read_text().splitlines()]
    there = {
        g["from"] for g in graph if g["type"] == "relation" and (g["relationType"], g["to"]) == ("lives_in", "Nairobi")
    }
    return "\n".join(
        g["name"]
        for g in graph
        if g["type"] == "entity" and "works as designer" in g["observations"] and g["name"] in there
    )


def _ada_truth(w: World) -> str:
    relations = [g for g in map(json.loads, w.memory.read_text().splitlines()) if g["type"] == "relation"]
    hop = {(r["from"], r["relationType"]): r["to"] for r in relations}
    company = hop[(hop[("Ada", "mentored_by")], "works_at")]
    return str(hop[(company, "headquartered_in")])


def _changed_truth(w: World) -> str:
    lines = []
    for commit in _git(w, "log", "-5", "--format=%h", "main").splitlines():
        files = sorted(_git(w, "show", "--format=", "--name-only", "--diff-filter=AM", commit).splitlines())
        lines.append(" ".join([commit, *files]))
    return "\n".join(lines)


def _authors_truth(w: World) -> str:
    counts = _git(w, "shortlog", "-sn", "main").splitlines()
    return "\n".join(" ".join(line.split()) for line in counts)


TASKS = [
    Task(
        "config-port",
        "lookup",
        "What port does the billing service listen on? Its config is files/config.json.",
        _config_port,
        lambda w: "8443",
        ("tools filesystem read-text-file --help",),
    ),
    Task(
        "tokyo-time",
        "lookup",
        "When it is 09:30 today in New York, what time is it in Tokyo (HH:MM)?",
        _tokyo_time,
        lambda w: _local("America/New_York", "09:30", "Asia/Tokyo"),
        ("tools time convert-time --help",),
    ),
    Task(
        "inventory-stock",
        "search then call",
        "Find the 2026 inventory CSV somewhere under the files and give the stock of SKU-017.",
        _inventory_stock,
        lambda w: "23",
        ("tools filesystem search-files --help",),
    ),
    Task(
        "pricing-commit",
        "search then call",
        "Which commit added pricing.toml (short hash), and what base_price did it set?",
        _pricing_commit,
        lambda w: f"{_git(w, 'log', '--format=%h', '--grep=Add pricing table')} base_price = 129",
        ("tools git git-log --help; tools git git-show --help",),
    ),
    Task(
        "treasure-hunt",
        "chain",
        "Start at files/hunt/start.txt and follow each `next:` line; what code is at the end?",
        _treasure_hunt,
        lambda w: "7-OCEAN-42",
        ("tools filesystem read-text-file --help",),
    ),
    Task(
        "ada-mentor-hq",
        "chain",
        "In the memory graph: where is the company of Ada's mentor headquartered?",
        _ada_mentor_hq,
        _ada_truth,
        ("tools memory open-nodes --help",),
    ),
    Task(
        "meeting-times",
        "fan-out",
        "A call is at 15:00 UTC today. What is the local time (HH:MM) in " + ", ".join(MEETING_ZONES) + "?",
        _meeting_times,
        lambda w: "\n".join(f"{z} {_local('UTC', '15:00', z)}" for z in MEETING_ZONES),
        ("tools time convert-time --help",),
    ),
    Task(
        "changed-files",
        "fan-out",
        "For each of the last 5 commits, which files did it add or change?",
        _changed_files,
        _changed_truth,
        ("tools git git-log --help; tools git git-show --help",),
    ),
    Task(
        "authors-count",
        "filter",
        "How many commits has each author made? Most first.",
        _authors_count,
        _authors_truth,
        ("tools git git-log --help",),
    ),
    Task(
        "nairobi-designers",
        "filter",
        "In the memory graph: which people live in Nairobi and work as designers?",
        _nairobi_designers,
        _designers_truth,
        ("tools memory read-graph --help",),
    ),
    Task(
        "sydney-date",
        "recover (tool name)",
        "What is today's date in Sydney?",
        _sydney_date,
        lambda w: datetime.now(ZoneInfo("Australia/Sydney")).strftime("%Y-%m-%d"),
        ("tools time get-time timezone=Australia/Sydney",),
    ),
    Task(
        "london-3pm",
        "recover (argument)",
        "When it is 3pm today in London, what time is it in Toronto (HH:MM)?",
        _london_3pm,
        lambda w: _local("Europe/London", "15:00", "America/Toronto"),
        ("tools time convert-time source_timezone=Europe/London time=3pm target_timezone=America/Toronto",),
    ),
    Task(
        "bump-branch",
        "chain",
        "On a new branch `bump`, write 1.1 to VERSION and commit it as 'Bump version to 1.1'. Give the commit hash.",
        _bump_branch,
        lambda w: _git(w, "rev-parse", "bump"),
        ("tools git --help; tools filesystem write-file --help",),
    ),
]
