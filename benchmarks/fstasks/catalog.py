"""The filesystem tasks. Each `_<name>` function is the direct way; `<name>.sh` is the toolshell way.

The direct functions call the filesystem server's tools one per turn, as a careful model would
(the batch tool `read_multiple_files` where it fits), and read each result as text. The expected
files are computed from `world.py`'s data, not read back from the folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from fstasks import world
from fstasks.task import Caller, FsTask


def _listed(listing: str) -> list[str]:
    """File names from `list_directory`'s `[FILE] name` lines."""
    return re.findall(r"^\[FILE\] (\S+)", listing, re.M)


def _contents(text: str) -> dict[str, str]:
    """`read_multiple_files`'s text (`path:\\ncontent\\n` entries between `---` lines), by path."""
    entries = (part.partition(":\n") for part in text.split("\n---\n"))
    return {path: body.removesuffix("\n") for path, _, body in entries}


async def _copy_exact(call: Caller, files: Path) -> str:
    text = await call("read_text_file", {"path": f"{files}/notes/todo.txt"})
    await call("write_file", {"path": f"{files}/backup/todo.txt", "content": text})
    return ""


async def _release_todos(call: Caller, files: Path) -> str:
    found = await call("search_files", {"path": f"{files}/project", "pattern": "**/*.*"})
    bodies = _contents(await call("read_multiple_files", {"paths": found.splitlines()}))
    hits = sorted(path.removeprefix(f"{files}/project/") for path, body in bodies.items() if world.TODO in body)
    await call("write_file", {"path": f"{files}/reports/release-todos.txt", "content": "\n".join(hits) + "\n"})
    return ""


async def _rename_photos(call: Caller, files: Path) -> str:
    for name in _listed(await call("list_directory", {"path": f"{files}/photos"})):
        if re.fullmatch(r"IMG_\d+\.jpg", name):
            new = name.replace("IMG_", "trip-")
            await call("move_file", {"source": f"{files}/photos/{name}", "destination": f"{files}/photos/{new}"})
    return ""


async def _merge_sales(call: Caller, files: Path) -> str:
    paths = [f"{files}/sales/q{q}.csv" for q in range(1, 5)]
    bodies = _contents(await call("read_multiple_files", {"paths": paths}))
    rows = [line for i, p in enumerate(paths) for line in bodies[p].splitlines()[(1 if i else 0) :]]
    await call("write_file", {"path": f"{files}/sales/all.csv", "content": "\n".join(rows) + "\n"})
    return ""


async def _line_counts(call: Caller, files: Path) -> str:
    names = sorted(_listed(await call("list_directory", {"path": f"{files}/logs"})))
    bodies = _contents(await call("read_multiple_files", {"paths": [f"{files}/logs/{n}" for n in names]}))
    report = "".join(f"{n} {len(bodies[f'{files}/logs/{n}'].splitlines())}\n" for n in names)
    await call("write_file", {"path": f"{files}/reports/line-counts.txt", "content": report})
    return ""


async def _sort_inbox(call: Caller, files: Path) -> str:
    names = _listed(await call("list_directory", {"path": f"{files}/inbox"}))
    for ext in sorted({n.rsplit(".", 1)[1] for n in names}):
        await call("create_directory", {"path": f"{files}/inbox/{ext}"})
    for n in names:
        target = f"{files}/inbox/{n.rsplit('.', 1)[1]}/{n}"
        await call("move_file", {"source": f"{files}/inbox/{n}", "destination": target})
    return ""


async def _db_timeout(call: Caller, files: Path) -> str:
    text = await call("read_text_file", {"path": f"{files}/app/settings.ini"})
    section = text[text.index("[database]") :].split("\n\n")[0]
    edit = {"oldText": section, "newText": re.sub(r"^timeout = \d+$", "timeout = 90", section, flags=re.M)}
    await call("edit_file", {"path": f"{files}/app/settings.ini", "edits": [edit]})
    return ""


async def _largest_media(call: Caller, files: Path) -> str:
    listing = await call("list_directory_with_sizes", {"path": f"{files}/media", "sortBy": "size"})
    name = _listed(listing)[0]
    info = await call("get_file_info", {"path": f"{files}/media/{name}"})
    size = re.findall(r"^size: (\d+)", info, re.M)[0]
    return f"{name} {size}"


async def _duplicates(call: Caller, files: Path) -> str:
    names = _listed(await call("list_directory", {"path": f"{files}/shared"}))
    bodies = _contents(await call("read_multiple_files", {"paths": [f"{files}/shared/{n}" for n in names]}))
    groups: dict[str, list[str]] = {}
    for path, body in bodies.items():
        groups.setdefault(body.strip(), []).append(path.rsplit("/", 1)[1])
    lines = sorted(" ".join(sorted(g)) for g in groups.values() if len(g) > 1)
    await call("write_file", {"path": f"{files}/reports/duplicates.txt", "content": "\n".join(lines) + "\n"})
    return ""


def _file_count(node: dict[str, object]) -> int:
    children = node.get("children")
    if not isinstance(children, list):
        return 1 if node.get("type") == "file" else 0
    return sum(_file_count(child) for child in children)


async def _tree_summary(call: Caller, files: Path) -> str:
    tree = json.loads(await call("directory_tree", {"path": f"{files}/project"}))
    dirs = sorted((n["name"], _file_count(n)) for n in tree if n["type"] == "directory")
    report = "".join(f"{name} {count}\n" for name, count in dirs)
    await call("write_file", {"path": f"{files}/reports/tree.txt", "content": report})
    return ""


def _in(folder: str, files: dict[str, str] | dict[str, bytes]) -> dict[str, bytes]:
    return {f"{folder}/{name}": data.encode() if isinstance(data, str) else data for name, data in files.items()}


def _report(path: str, lines: list[str]) -> dict[str, bytes]:
    return {path: "".join(f"{line}\n" for line in lines).encode()}


def _largest() -> str:
    name, data = max(world.media().items(), key=lambda item: len(item[1]))
    return f"{name} {len(data)}"


def _top_counts() -> list[str]:
    tops: dict[str, int] = {}
    for path in world.project_files():
        tops[path.split("/")[0]] = tops.get(path.split("/")[0], 0) + 1
    return [f"{top} {n}" for top, n in sorted(tops.items())]


_PROJECT = _in("project", world.project_files())

TASKS = [
    FsTask(
        "copy-exact",
        "copy",
        "Copy notes/todo.txt to backup/todo.txt exactly, byte for byte.",
        _copy_exact,
        ("notes", "backup"),
        lambda: _in("notes", {"todo.txt": world.todo_text()}) | _in("backup", {"todo.txt": world.todo_text()}),
    ),
    FsTask(
        "release-todos",
        "search",
        "List the files under project/ (at any depth) that contain TODO(release), as paths relative to"
        " project/, sorted, one a line, into reports/release-todos.txt.",
        _release_todos,
        ("project", "reports/release-todos.txt"),
        lambda: (
            _PROJECT
            | _report(
                "reports/release-todos.txt", sorted(p for p, t in world.project_files().items() if world.TODO in t)
            )
        ),
    ),
    FsTask(
        "rename-photos",
        "rename by pattern",
        "In photos/, rename every IMG_NNNN.jpg to trip-NNNN.jpg; leave other files alone.",
        _rename_photos,
        ("photos",),
        lambda: (
            {f"photos/trip-{i:04d}.jpg": f"jpeg bytes of photo {i}\n".encode() for i in range(1, 9)}
            | {"photos/index.txt": b"eight photos from the trip\n"}
        ),
    ),
    FsTask(
        "merge-sales",
        "merge",
        "Merge sales/q1.csv to q4.csv, in that order, into sales/all.csv with the header line once.",
        _merge_sales,
        ("sales",),
        lambda: (
            _in("sales", world.sales())
            | {
                "sales/all.csv": "".join(
                    t if q == "q1.csv" else t.split("\n", 1)[1] for q, t in world.sales().items()
                ).encode()
            }
        ),
    ),
    FsTask(
        "line-counts",
        "count",
        "Write reports/line-counts.txt: for each file in logs/, sorted by name, a line `<name> <lines>`.",
        _line_counts,
        ("logs", "reports/line-counts.txt"),
        lambda: (
            _in("logs", world.logs())
            | _report("reports/line-counts.txt", [f"{n} {t.count(chr(10))}" for n, t in sorted(world.logs().items())])
        ),
    ),
    FsTask(
        "sort-inbox",
        "move by extension",
        "Move each file in inbox/ into a subfolder of inbox/ named by its extension (inbox/pdf/, …).",
        _sort_inbox,
        ("inbox",),
        lambda: {f"inbox/{n.rsplit('.', 1)[1]}/{n}": t.encode() for n, t in world.inbox().items()},
    ),
    FsTask(
        "db-timeout",
        "edit",
        "In app/settings.ini set the [database] section's timeout to 90; change nothing else.",
        _db_timeout,
        ("app",),
        lambda: {"app/settings.ini": world.settings().replace("timeout = 30\npool", "timeout = 90\npool").encode()},
    ),
    FsTask(
        "largest-media",
        "largest file",
        "Which file in media/ is the largest? Answer `<name> <size in bytes>`.",
        _largest_media,
        ("media",),
        lambda: _in("media", world.media()),
        answer=_largest(),
    ),
    FsTask(
        "duplicates",
        "duplicates by content",
        "Find the files in shared/ with the same content. Write reports/duplicates.txt: one line per"
        " group, its names sorted and separated by spaces, the lines sorted.",
        _duplicates,
        ("shared", "reports/duplicates.txt"),
        lambda: (
            _in("shared", world.shared())
            | _report("reports/duplicates.txt", sorted(" ".join(g) for g in world.duplicate_groups(world.shared())))
        ),
    ),
    FsTask(
        "tree-summary",
        "tree summary",
        "Write reports/tree.txt: for each top-level folder of project/, sorted, a line `<folder> <number"
        " of files in it at any depth>`.",
        _tree_summary,
        ("project", "reports/tree.txt"),
        lambda: _PROJECT | _report("reports/tree.txt", _top_counts()),
    ),
]
