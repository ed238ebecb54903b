"""The fixture world both ways start from: files, a git repository and a memory graph.

Everything is generated from fixed seeds (commit dates, names, sizes), so every run sees the same
data, and the same commit hashes, and the answers can be checked exactly.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

AUTHORS = [("Ada Lovelace", "ada@example.org"), ("Bob Kahn", "bob@example.org"), ("Grace Hopper", "grace@example.org")]
CITIES = ["Tokyo", "Paris", "Nairobi", "Lima", "Oslo", "Sydney", "Toronto", "Mumbai", "Cairo", "Seoul"]


@dataclass(frozen=True)
class World:
    """Where the servers of one run keep their state."""

    root: Path

    @property
    def files(self) -> Path:
        """The filesystem server's one allowed directory."""
        return self.root / "files"

    @property
    def repo(self) -> Path:
        """The git server's repository (inside `files`, so the filesystem server reads it too)."""
        return self.files / "repo"

    @property
    def memory(self) -> Path:
        return self.root / "memory.jsonl"


def build(root: Path) -> World:
    """A fresh world at `root` (anything there before is removed)."""
    shutil.rmtree(root, ignore_errors=True)
    world = World(root)
    world.files.mkdir(parents=True)
    _files(world.files)
    _repo(world.repo)
    _memory(world.memory)
    return world


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _files(files: Path) -> None:
    _write(files / "config.json", json.dumps({"service": "billing", "port": 8443, "replicas": 3}, indent=2) + "\n")
    # A trail of notes, each naming the next: the chain task follows it.
    _write(files / "hunt" / "start.txt", "The trail starts here.\nnext: hunt/woods/oak.txt\n")
    _write(files / "hunt" / "woods" / "oak.txt", "Under the oak.\nnext: hunt/river/bridge.txt\n")
    _write(files / "hunt" / "river" / "bridge.txt", "Beneath the bridge.\nnext: hunt/cave/chest.txt\n")
    _write(files / "hunt" / "cave" / "chest.txt", "The chest holds the code: 7-OCEAN-42\n")
    rows = ["sku,name,stock"] + [f"SKU-{i:03d},part {i},{(i * 37) % 101}" for i in range(1, 41)]
    _write(files / "archive" / "2026" / "q3" / "inventory-2026.csv", "\n".join(rows) + "\n")
    rng = random.Random(7)
    for i in range(30):
        _write(files / "archive" / "old" / f"note-{i:02d}.txt", f"note {i}: {rng.randint(0, 10**6)}\n")


def _git(repo: Path, *args: str, date: str | None = None, author: tuple[str, str] | None = None) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    if date is not None and author is not None:
        name, email = author
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_NAME": name}
        env |= {"GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _repo(repo: Path) -> None:
    """40 commits by three authors; the 30th adds `pricing.toml`, which later commits change."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    rng = random.Random(42)
    for n in range(1, 41):
        author = AUTHORS[rng.randrange(3)]
        module = f"src/module_{n % 6}.py"
        before = (repo / module).read_text() if (repo / module).exists() else ""
        _write(repo / module, before + f"VALUE_{n} = {n}\n")
        message = f"Tune module {n % 6} (step {n})"
        if n == 30:
            _write(repo / "pricing.toml", 'currency = "EUR"\nbase_price = 129\n')
            message = "Add pricing table"
        elif n > 30 and n % 3 == 0:
            _write(repo / "pricing.toml", f'currency = "EUR"\nbase_price = {129 + n}\n')
            _write(repo / "docs" / f"release-{n}.md", f"# Release {n}\n\nPrices move to {129 + n}.\n")
            message = f"Raise base price (step {n})"
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", message, date=f"2026-10-{n % 28 + 1:02d}T12:00:00+00:00", author=author)


def _memory(path: Path) -> None:
    """A knowledge graph of 120 people, 10 companies and 10 cities, with observations and relations."""
    rng = random.Random(3)
    companies = [f"Company {c}" for c in "ABCDEFGHIJ"]
    lines: list[dict[str, object]] = [
        {"type": "entity", "name": name, "entityType": "company", "observations": [f"{name} is a company"]}
        for name in companies
    ]
    lines += [{"type": "entity", "name": c, "entityType": "city", "observations": [f"{c} is a city"]} for c in CITIES]
    for i in range(120):
        name = f"Person {i:03d}"
        role = rng.choice(["engineer", "designer", "manager", "analyst"])
        observations = [f"works as {role}", f"speaks {rng.choice(['English', 'French', 'Japanese', 'Swahili'])}"]
        lines.append({"type": "entity", "name": name, "entityType": "person", "observations": observations})
        lines.append({"type": "relation", "from": name, "to": rng.choice(companies), "relationType": "works_at"})
        lines.append({"type": "relation", "from": name, "to": rng.choice(CITIES), "relationType": "lives_in"})
    for company, city in zip(companies, CITIES, strict=True):
        lines.append({"type": "relation", "from": company, "to": city, "relationType": "headquartered_in"})
    # The chain task: Ada -> her mentor -> the mentor's company -> where it is headquartered.
    lines.append({"type": "entity", "name": "Ada", "entityType": "person", "observations": ["mathematician"]})
    lines.append({"type": "relation", "from": "Ada", "to": "Person 042", "relationType": "mentored_by"})
    path.write_text("\n".join(json.dumps(line) for line in lines))
