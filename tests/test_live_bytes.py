"""The bytes a live shell holds are kept up to date from its commits (issue 31): after any change,
`LiveBytes.measure` says what a whole walk (`files_bytes`) says, without walking."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from bashkit import Bash, FileSystem

from toolshell.shell.live_bytes import ENTRY_BYTES, LiveBytes, files_bytes

STEPS = [
    "mkdir -p d{n}/e; echo {n} > d{n}/e/f",
    "head -c {size} /dev/zero > big{n}",
    "echo more >> log; echo {n} >> log",
    "rm -rf d{m}",
    "rm -f big{m}",
    "ln -sf /tmp link{n}",
    ": > log",
    "mv big{m} moved{n} 2>/dev/null; true",
    "mkdir -p /tmp/t{n} && touch /tmp/t{n}/x",
    "cd /tmp; echo there > here{n}; cd /home/user",
    "true",
]


def _commit(bash: Bash, have: set[str]) -> tuple[str, dict[str, bytes]]:
    packed = bash.commit(have=list(have) or None)
    have |= set(packed.objects)
    return str(packed.id), dict(packed.objects)


def _walks(bash: Bash) -> Any:
    """`bash` whose `read_dir` counts its calls (a walk reads directories; a commit's diff does not)."""
    calls = {"read_dir": 0}
    real = bash.read_dir

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(bash, name)

        def read_dir(self, path: str) -> Any:
            calls["read_dir"] += 1
            return real(path)

    return Counting(), calls


@pytest.mark.parametrize("seed", range(5))
def test_the_count_kept_from_commits_is_the_count_a_walk_makes(seed: int) -> None:
    rng, bash, have = random.Random(seed), Bash(cwd="/home/user"), set[str]()
    counting, calls = _walks(bash)
    files = LiveBytes()
    tip, objects = _commit(bash, have)
    assert files.measure(counting, tip, objects) == files_bytes(bash)
    walked = calls["read_dir"]
    for n in range(40):
        step = rng.choice(STEPS).format(n=n, m=rng.randrange(n + 1), size=rng.randrange(1, 200_000))
        bash.execute_sync(step)
        tip, objects = _commit(bash, have)
        assert files.measure(counting, tip, objects) == files_bytes(bash), f"after {step!r}"
    assert calls["read_dir"] == walked, "after the first walk, no call walked the shell"


def test_a_call_that_changed_no_file_walks_nothing_and_keeps_the_count() -> None:
    bash, have = Bash(), set[str]()
    counting, calls = _walks(bash)
    files = LiveBytes()
    first = files.measure(counting, *_commit(bash, have))
    walked = calls["read_dir"]
    bash.execute_sync("X=1; cat /etc/hostname >/dev/null 2>&1; true")
    assert files.measure(counting, *_commit(bash, have)) == first
    assert calls["read_dir"] == walked


def test_files_under_a_mount_are_not_counted_however_they_change(tmp_path: Path) -> None:
    bash, have = Bash(), set[str]()
    bash.mount("/mnt/host", FileSystem.real(str(tmp_path), writable=True), read_only=False)
    files = LiveBytes(["/mnt/host"])
    files.measure(bash, *_commit(bash, have))
    bash.execute_sync("head -c 100000 /dev/zero > /mnt/host/big; echo x > /home/user/small")
    assert files.measure(bash, *_commit(bash, have)) == files_bytes(bash, ["/mnt/host"])


def test_without_a_commit_the_shell_is_walked() -> None:
    bash = Bash()
    bash.execute_sync("echo 12345 > /tmp/a")
    assert LiveBytes().measure(bash) == files_bytes(bash) > ENTRY_BYTES + 6


def test_a_commit_it_cannot_follow_is_counted_by_a_walk() -> None:
    bash, have = Bash(), set[str]()
    files = LiveBytes()
    files.measure(bash, *_commit(bash, have))
    bash.execute_sync("head -c 5000 /dev/zero > z")
    tip, _ = _commit(bash, have)
    assert files.measure(bash, tip, {}) == files_bytes(bash), "its objects missing: a walk counts it"
