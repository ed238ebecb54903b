"""What the thin client sends, and to whom (issue 22, item 6): nothing to a socket whose folder
another account controls or that is a link, only the variables the daemon compares to a daemon of
its own, and a daemon that ends before it accepted means the command runs cold."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from _daemon_support import ENTRY, Place
from _serve_auth_support import Outsider, outsider  # noqa: F401  (a fixture)
from toolshell.frontends.daemon.address import Address, address_for

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


class Listener:
    """A Unix socket of this user's that records every line it is sent and answers each
    connection with `answers` (an empty list: it closes after the first line)."""

    def __init__(self, path: str, answers: list[list[dict[str, object]]]) -> None:
        self.path, self.answers, self.heard = path, answers, bytearray()
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:  # closed before anyone came
            return
        with conn, conn.makefile("rb") as lines:
            steps = self.answers or [[]]
            for step in steps:
                self.heard += lines.readline()
                for message in step:
                    conn.sendall(json.dumps(message).encode() + b"\n")

    def close(self) -> None:
        self.sock.close()


def _run(place: Place, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ENTRY, "run", *args, "--config", str(place.config), "--state-dir", str(state), "-c", "echo ran"],
        cwd=place.cwd, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "AWS_SECRET_ACCESS_KEY": SECRET},
    )  # fmt: skip


Done = subprocess.CompletedProcess[str]


def _same_as_cold(place: Place, state: Path) -> tuple[Done, Done]:
    return _run(place, state), _run(place, state, "--no-daemon")


def _address(place: Place, state: Path) -> Address:
    address = address_for(str(place.config), str(state), str(place.cwd))
    assert address is not None
    return address


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    yield Place(tmp_path)


def test_a_link_in_a_state_dir_another_account_owns_gets_nothing_and_the_command_runs_cold(
    place: Place,
    outsider: Outsider,  # noqa: F811
) -> None:
    theirs = outsider.directory / "state"
    theirs.mkdir()
    shutil.chown(theirs, "nobody")  # a state dir the other account controls (a shared or mistyped one)
    address = _address(place, theirs)
    mine = Listener(str(place.root / "mine.sock"), [[{"out": "", "err": ""}, {"exit": 0, "stdout": "not run\n"}]])
    planted = outsider.run(
        "/bin/sh", "-c", 'mkdir -m 0755 -p "$1" && ln -s "$2" "$3"', "-", address.folder, mine.path, address.socket
    )
    assert planted.returncode == 0, planted.stderr
    assert Path(address.socket).is_symlink() and theirs.stat().st_uid != os.geteuid()
    try:
        warm, cold = _same_as_cold(place, theirs)
    finally:
        mine.close()
    assert bytes(mine.heard) == b"", "not a byte of the request, nor of the environment"
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert "not run" not in warm.stdout


def test_a_linked_socket_in_folders_of_ones_own_gets_nothing(place: Place) -> None:
    address = _address(place, place.state)
    os.makedirs(address.folder, mode=0o700)
    mine = Listener(str(place.root / "elsewhere.sock"), [[{"out": "", "err": ""}, {"exit": 0, "stdout": "not run\n"}]])
    os.symlink(mine.path, address.socket)
    try:
        warm, cold = _same_as_cold(place, place.state)
    finally:
        mine.close()
    assert bytes(mine.heard) == b""
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout) == (0, "ran\n")


def test_a_daemon_is_sent_only_the_variables_it_compares(place: Place) -> None:
    address = _address(place, place.state)
    os.makedirs(address.folder, mode=0o700)
    compare = {"compare": {"names": ["PATH", "HOME"], "prefixes": ["TOOLSHELL_"]}}
    daemon = Listener(address.socket, [[compare], [{"out": "", "err": ""}, {"exit": 0, "stdout": "served\n"}]])
    try:
        done = _run(place, place.state)
    finally:
        daemon.close()
    assert (done.returncode, done.stdout) == (0, "served\n"), done.stderr
    head, detail = (json.loads(line) for line in bytes(daemon.heard).splitlines())
    assert "env" not in head and SECRET.encode() not in daemon.heard
    sent = set(detail["env"])
    assert {"PATH", "HOME"} <= sent and all(n in ("PATH", "HOME") or n.startswith("TOOLSHELL_") for n in sent)
    assert detail["script"] == "echo ran"


@pytest.mark.parametrize("said", [0, 1], ids=["before-a-word", "after-the-comparison"])
def test_a_daemon_that_ends_before_it_accepted_means_the_command_runs_cold(place: Place, said: int) -> None:
    address = _address(place, place.state)
    os.makedirs(address.folder, mode=0o700)
    steps = [[{"compare": {"names": [], "prefixes": []}}], []][: said + 1] if said else []
    daemon = Listener(address.socket, steps)
    try:
        warm, cold = _same_as_cold(place, place.state)
    finally:
        daemon.close()
    assert daemon.heard, "the daemon was reached"
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert warm.stdout == "ran\n"
