"""The folder the filesystem tasks start from, and the files each task must leave behind.

Everything comes from fixed seeds, so every run sees the same bytes. The expected results are
computed here from the same data the folder is built from, never by reading the folder back.
"""

from __future__ import annotations

import hashlib
import random
import shutil
from pathlib import Path

TODO = "TODO(release)"
INBOX_KINDS = ("pdf", "png", "txt")


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def todo_text() -> str:
    """A note whose last line ends with one newline: a copy through `$(…)` would drop it."""
    return "Release checklist\n- tag v2.4\n- update CHANGELOG\n\n- announce on the list\n"


def project_files() -> dict[str, str]:
    """24 source and doc files in nested folders; every fourth (and one doc) holds the marker."""
    rng = random.Random(11)
    files = {}
    for i in range(24):
        folder = ["src/core", "src/api/v1", "src/api/v2", "docs/guide", "tests", "scripts"][i % 6]
        name = f"{folder}/part_{i:02d}.{'md' if folder.startswith('docs') else 'py'}"
        lines = [f"# part {i}", *(f"value_{j} = {rng.randint(0, 999)}" for j in range(rng.randint(3, 8)))]
        if i % 4 == 1 or i == 9:
            lines.insert(rng.randint(1, len(lines)), f"# {TODO}: check part {i} before the tag")
        elif i % 5 == 0:
            lines.append("# TODO: someday (not a release item)")
        files[name] = "\n".join(lines) + "\n"
    return files


def sales() -> dict[str, str]:
    rng = random.Random(5)
    quarters = {}
    for q in range(1, 5):
        rows = [
            f"2026-{q * 3 - 2 + m:02d}-{d:02d},{rng.choice(['north', 'south', 'east'])},{rng.randint(100, 999)}"
            for m in range(3)
            for d in (1, 15)
        ]
        quarters[f"q{q}.csv"] = "date,region,amount\n" + "\n".join(rows) + "\n"
    return quarters


def logs() -> dict[str, str]:
    rng = random.Random(8)
    names = ["api", "worker", "cron", "auth", "mailer", "billing"]
    return {
        f"{n}.log": "".join(f"{n} line {i} code={rng.randint(0, 9)}\n" for i in range(rng.randint(4, 30)))
        for n in names
    }


def inbox() -> dict[str, str]:
    return {
        f"{stem}.{INBOX_KINDS[i % 3]}": f"{stem} {i}\n"
        for i, stem in enumerate(
            [
                "invoice-march",
                "logo",
                "notes",
                "contract",
                "screenshot",
                "todo",
                "receipt",
                "banner",
                "minutes",
                "report",
            ]
        )
    }


def settings() -> str:
    return "[server]\nhost = 0.0.0.0\ntimeout = 30\n\n[database]\nhost = db.internal\ntimeout = 30\npool = 5\n"


def media() -> dict[str, bytes]:
    rng = random.Random(13)
    sizes = rng.sample(range(2_000, 60_000), 10)
    return {f"clip-{i:02d}.{'mov' if i % 2 else 'mp3'}": rng.randbytes(size) for i, size in enumerate(sizes)}


def shared() -> dict[str, str]:
    """12 files; three contents appear more than once under different names."""
    bodies = ["alpha report\n", "beta minutes\n", "gamma notes\n", "delta\n", "epsilon\n", "zeta plan\n"]
    owners = [0, 1, 2, 0, 3, 1, 4, 0, 5, 2, 1, 3]
    return {f"doc-{chr(97 + i)}.txt": bodies[b] for i, b in enumerate(owners)}


def build(root: Path) -> Path:
    """A fresh folder at `root/files` (anything at `root` before is removed); returns it."""
    shutil.rmtree(root, ignore_errors=True)
    files = root / "files"
    _write(files / "notes" / "todo.txt", todo_text())
    (files / "backup").mkdir()
    (files / "reports").mkdir()
    for where, content in [
        ("project", project_files()),
        ("sales", sales()),
        ("logs", logs()),
        ("inbox", inbox()),
        ("media", media()),
        ("shared", shared()),
    ]:
        for name, data in content.items():
            _write(files / where / name, data)
    for i in range(1, 9):
        _write(files / "photos" / f"IMG_{i:04d}.jpg", f"jpeg bytes of photo {i}\n")
    _write(files / "photos" / "index.txt", "eight photos from the trip\n")
    _write(files / "app" / "settings.ini", settings())
    return files


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by its path relative to it, with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def encoded(files: dict[str, str]) -> dict[str, bytes]:
    return {name: text.encode() for name, text in files.items()}


def duplicate_groups(files: dict[str, str]) -> list[list[str]]:
    by_body: dict[str, list[str]] = {}
    for name, body in sorted(files.items()):
        by_body.setdefault(hashlib.sha256(body.encode()).hexdigest(), []).append(name)
    return sorted(names for names in by_body.values() if len(names) > 1)
