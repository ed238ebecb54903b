"""A warm CLI (issue 16, item 3): `toolshell daemon` keeps the host open, and `run`, `plan`,
`servers` and `scripts` go through it by themselves, through a thin client that imports neither
`mcp` nor click; it reloads on a config edit, never serves an untrusted config, refuses another
user, and exits when idle. Every command here is the real entry point in a subprocess; the
server logs each of its starts to a file, so "warm" is observable."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _daemon_support import ENTRY, Place, placed, stop_all, wait_for
from _serve_auth_support import Outsider, outsider  # noqa: F401  (a fixture)
from toolshell.frontends.daemon import control, wire
from toolshell.frontends.daemon.address import address_for
from toolshell.frontends.daemon.client import compared_env
from toolshell.version import __version__


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    with placed(tmp_path) as made:
        yield made


def test_a_started_daemon_serves_run_plan_servers_and_scripts_without_starting_the_server_again(place: Place) -> None:
    started = place.toolshell("daemon", "start")
    assert started.returncode == 0, started.stderr
    assert "daemon started" in started.stdout
    assert place.started() == 1

    ping = place.toolshell("run", "-c", "tools counted ping")
    assert (ping.returncode, ping.stdout, ping.stderr) == (0, "pong from counted\n", "")
    piped = place.toolshell("run", stdin="tools counted ping | tr a-z A-Z\n")
    assert piped.stdout == "PONG FROM COUNTED\n"
    both = place.toolshell("run", "-c", "echo out; echo err >&2; exit 3")
    assert (both.returncode, both.stdout, both.stderr) == (3, "out\n", "err\n")
    as_json = json.loads(place.toolshell("run", "--json", "-c", "echo out; exit 3").stdout)
    assert (as_json["exit_code"], as_json["stdout"]) == (3, "out\n")
    planned = json.loads(place.toolshell("plan", "-c", "tools counted ping").stdout)
    assert [c["tool"] for c in planned["calls"]] == ["tools counted ping"]
    rows = json.loads(place.toolshell("servers", "--json").stdout)
    assert {r["name"]: r["state"] for r in rows}["counted"] == "ready"

    saved = place.toolshell("scripts", "save", "pinger", "--description", "ping it", stdin="tools counted ping\n")
    assert saved.returncode == 0, saved.stderr
    assert place.toolshell("scripts", "pinger").stdout == "pong from counted\n"

    status = place.status()
    assert status is not None and status["requests"] == 7  # `scripts save` needs no host: it ran cold
    assert {s["name"]: s["tools"] for s in status["servers"]}["counted"] == 1  # type: ignore[attr-defined, index]
    assert place.started() == 1, "every command above used the daemon's connection"

    cold = place.toolshell("run", "--no-daemon", "-c", "tools counted ping")
    assert cold.stdout == "pong from counted\n" and place.started() == 2


def test_a_warm_call_imports_neither_mcp_nor_click(place: Place) -> None:
    assert place.toolshell("daemon", "start").returncode == 0
    probe = (
        "import sys\nfrom toolshell.frontends.entry import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'click', 'pydantic', 'bashkit')), code)\n"
    )
    argv = ["run", "--config", str(place.config), "--state-dir", str(place.state), "-c", "tools counted ping"]
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], cwd=place.cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout == "pong from counted\n[] 0\n", done.stderr


def test_the_daemon_reloads_when_its_config_file_changes(place: Place) -> None:
    assert place.toolshell("daemon", "start").returncode == 0
    place.write_config(["counted", "second"])
    second = place.toolshell("run", "-c", "tools second ping")
    assert (second.returncode, second.stdout) == (0, "pong from second\n"), second.stderr
    status = place.status()
    assert status is not None and status["reloads"] == 1 and status["requests"] == 1
    again = place.toolshell("run", "-c", "tools second ping")
    assert again.stdout == "pong from second\n"
    assert place.started("second") == 1, "reloaded once, then warm"


def test_an_edited_checkout_config_is_served_only_once_it_is_trusted_again(place: Place) -> None:
    local = place.cwd / "toolshell.toml"
    place.write_config(["counted"], path=local)
    env = {"TOOLSHELL_STATE_DIR": str(place.state), "XDG_CONFIG_HOME": str(place.root / "no-user-config")}
    trusted = subprocess.run(
        [*ENTRY, "config", "trust", "--yes"],
        cwd=place.cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env},
    )
    assert trusted.returncode == 0, trusted.stderr

    def toolshell(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*ENTRY, *args], cwd=place.cwd, capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, **env},
        )  # fmt: skip

    assert toolshell("daemon", "start").returncode == 0
    assert toolshell("run", "-c", "tools counted ping").stdout == "pong from counted\n"
    local.write_text(local.read_text() + "# an edit nobody trusted\n")
    edited = toolshell("run", "-c", "tools counted ping")
    cold = toolshell("run", "--no-daemon", "-c", "tools counted ping")
    assert edited.returncode == cold.returncode != 0 and "pong" not in edited.stdout
    assert edited.stderr == cold.stderr and "ignoring toolshell.toml" in edited.stderr, "warm says what cold says"
    address = address_for(None, str(place.state), str(place.cwd))
    assert address is not None
    status = control.status(address)
    assert status is not None and status["serving"] is None and status["reloads"] == 1
    assert toolshell("config", "trust", "--yes").returncode == 0
    assert toolshell("run", "-c", "tools counted ping").stdout == "pong from counted\n"
    status = control.status(address)
    assert status is not None and status["serving"] == str(local.resolve()) and status["reloads"] == 2


def test_a_connection_from_another_user_is_refused(tmp_path: Path, outsider: Outsider) -> None:  # noqa: F811
    place = Place(outsider.directory)
    try:
        assert place.toolshell("daemon", "start").returncode == 0
        address = address_for(str(place.config), str(place.state), str(place.cwd))
        assert address is not None
        for folder in (place.state, place.state / "daemons"):
            folder.chmod(0o755)
        os.chmod(address.socket, 0o666)  # only the peer check is left to stop them
        intruder = outsider.directory / "intruder_socket.py"
        intruder.write_text(
            textwrap.dedent(
                """
                import json, socket, sys
                s = socket.socket(socket.AF_UNIX)
                s.connect(sys.argv[1])
                try:
                    s.sendall(sys.argv[2].encode() + b"\\n")
                except OSError:  # refused before it read a word: the refusal is already waiting
                    pass
                print(s.makefile("rb").readline().decode().strip())
                """
            )
        )
        intruder.chmod(0o644)
        request = {"v": wire.PROTOCOL, "version": __version__, "op": "run", "address": address.to_json()}
        done = outsider.run("/usr/bin/python3", str(intruder), address.socket, json.dumps(request))
        assert done.stdout and json.loads(done.stdout) == {"refused": "this daemon serves its own user only"}, (
            done.stderr
        )
        status = control.status(address)
        assert status is not None and status["requests"] == 0
        assert "refused a connection from uid" in Path(address.log).read_text()
    finally:
        stop_all(place)


def test_an_idle_daemon_exits_by_itself(place: Place) -> None:
    assert place.toolshell("daemon", "start", "--idle-seconds", "1").returncode == 0
    assert place.toolshell("run", "-c", "echo hi").stdout == "hi\n"
    address = address_for(str(place.config), str(place.state), str(place.cwd))
    assert address is not None
    wait_for(lambda: not Path(address.socket).exists(), "the idle daemon to exit")
    assert place.status() is None
    assert "no request for 1 s" in Path(address.log).read_text()
    assert place.toolshell("run", "-c", "echo cold").stdout == "cold\n"


def test_stop_and_status_say_what_runs(place: Place) -> None:
    none = place.toolshell("daemon", "status")
    assert none.returncode == 1 and "no daemon runs for" in none.stdout
    assert place.toolshell("daemon", "start").returncode == 0
    again = place.toolshell("daemon", "start")
    assert again.returncode == 0 and "already running" in again.stdout
    shown = place.toolshell("daemon", "status")
    assert shown.returncode == 0
    for line in ("config:", str(place.config), "directory:", str(place.cwd), "counted: ready, 1 tool"):
        assert line in shown.stdout
    stopped = place.toolshell("daemon", "stop")
    assert "stopped the daemon" in stopped.stdout
    assert place.status() is None


def test_a_client_of_another_version_runs_cold_and_a_newer_one_retires_the_daemon(place: Place) -> None:
    assert place.toolshell("daemon", "start").returncode == 0
    address = address_for(str(place.config), str(place.state), str(place.cwd))
    assert address is not None
    import socket

    def ask(version: str) -> dict[str, object]:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(address.socket)
            message = {"v": wire.PROTOCOL, "version": version, "op": "status", "address": address.to_json()}
            s.sendall(json.dumps(message).encode() + b"\n")
            with s.makefile("rb") as replies:
                return dict(json.loads(replies.readline()))

    assert "fallback" in ask("0.0.1")
    assert place.status() is not None, "an older client runs cold; the daemon stays"
    assert "fallback" in ask("99.0.0")
    wait_for(lambda: place.status() is None, "the stale daemon to exit")


def test_keep_warm_starts_a_daemon_on_first_use(place: Place) -> None:
    place.write_config(["counted"], extra="[cli]\nkeep_warm = true\nidle_seconds = 120\n")
    first = place.toolshell("run", "-c", "tools counted ping")
    assert first.stdout == "pong from counted\n", first.stderr
    wait_for(lambda: place.status() is not None, "keep_warm's daemon to serve")
    second = place.toolshell("run", "-c", "tools counted ping")
    assert second.stdout == "pong from counted\n"
    status = place.status()
    assert status is not None and status["requests"] == 1 and status["idle_seconds"] == 120


def test_output_streams_as_written_and_a_client_that_goes_away_cancels_only_its_own_run(place: Place) -> None:
    import socket

    assert place.toolshell("daemon", "start").returncode == 0
    address = address_for(str(place.config), str(place.state), str(place.cwd))
    assert address is not None
    request = {"v": wire.PROTOCOL, "version": __version__, "op": "run", "address": address.to_json()}
    script = {"script": "echo start; sleep 60; echo end", "role": None, "json": False}
    seen = []
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)  # half the script's sleep: "start" must come while it sleeps, not at its end
        s.connect(address.socket)
        s.sendall(json.dumps(request).encode() + b"\n")
        with s.makefile("rb") as replies:  # the socket closes only once this is closed too
            compared = json.loads(replies.readline())["compare"]
            s.sendall(json.dumps({**script, "env": compared_env(os.environ, compared)}).encode() + b"\n")
            while "start\n" not in seen:
                seen.append(json.loads(replies.readline()).get("out"))
    # the client went away (a Ctrl-C): the daemon goes on serving, and the run's row says it ended
    after = place.toolshell("run", "-c", "tools counted ping")
    assert (after.returncode, after.stdout) == (0, "pong from counted\n")

    def ended() -> object:
        rows = json.loads(place.toolshell("timeline", "--json").stdout)
        return {row["script_preview"]: row["exit_code"] for row in rows}["echo start; sleep 60; echo end"]

    wait_for(lambda: ended() is not None, "the cancelled run's row to end")
    assert ended() == 130


def test_a_socket_another_user_listens_on_gets_nothing_and_the_command_runs_cold(
    tmp_path: Path,
    outsider: Outsider,  # noqa: F811
) -> None:
    shared = outsider.directory / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # a state dir others can write: the cold path refuses it
    place = Place(outsider.directory)
    address = address_for(str(place.config), str(shared), str(place.cwd))
    assert address is not None
    heard = outsider.directory / "heard.log"
    fake = outsider.directory / "fake_daemon.py"
    fake.write_text(
        textwrap.dedent(
            """
            import os, socket, sys
            os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
            s = socket.socket(socket.AF_UNIX)
            s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen()
            open(sys.argv[2] + ".ready", "w").close()
            while True:
                c, _ = s.accept()
                with open(sys.argv[2], "ab") as log:
                    log.write(c.recv(65536))
                c.sendall(b'{"out":"","err":""}\\n{"exit":0,"stdout":"all good\\\\n"}\\n')
                c.close()
            """
        )
    )
    fake.chmod(0o644)
    outsider.directory.chmod(0o777)
    listener = subprocess.Popen(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", str(fake), address.socket, str(heard)],
        start_new_session=True,
    )
    try:
        wait_for(lambda: Path(str(heard) + ".ready").exists(), "the other user's socket")
        done = subprocess.run(
            [*ENTRY, "run", "--config", str(place.config), "--state-dir", str(shared), "-c", "echo my script"],
            cwd=place.cwd, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert "all good" not in done.stdout
        assert not heard.exists() or heard.read_bytes() == b"", "not even the request reached it"
        cold = subprocess.run(
            [*ENTRY, "run", "--no-daemon", "--config", str(place.config), "--state-dir", str(shared), "-c", "echo x"],
            cwd=place.cwd, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert (done.returncode, done.stderr) == (cold.returncode, cold.stderr)
    finally:
        os.killpg(listener.pid, signal.SIGKILL)
        listener.wait()


def test_a_caller_whose_environment_means_another_config_runs_cold(place: Place) -> None:
    place.write_config(["counted"])
    text = place.config.read_text().replace('"counted"]', '"${WHO}"]')
    place.config.write_text(text)
    assert place.toolshell("daemon", "start", env={"WHO": "one"}).returncode == 0  # short: never taken for a secret
    assert place.toolshell("run", "-c", "tools counted ping", env={"WHO": "one"}).stdout == "pong from one\n"
    other = place.toolshell("run", "-c", "tools counted ping", env={"WHO": "two"})
    assert other.stdout == "pong from two\n", "the caller's ${WHO}, not the daemon's"
    status = place.status()
    assert status is not None and status["requests"] == 1


def test_stop_lets_a_running_command_finish(place: Place) -> None:
    assert place.toolshell("daemon", "start").returncode == 0
    argv = [*ENTRY, "run", "--config", str(place.config), "--state-dir", str(place.state)]
    running = subprocess.Popen(
        [*argv, "-c", "echo start; sleep 3; echo end"], cwd=place.cwd, stdout=subprocess.PIPE, text=True
    )
    assert running.stdout is not None
    assert running.stdout.readline() == "start\n"
    assert "stopped the daemon" in place.toolshell("daemon", "stop").stdout
    rest, _ = running.communicate(timeout=60)
    assert (running.returncode, rest) == (0, "end\n")


def test_a_reload_that_cannot_open_runs_cold_and_the_daemon_goes_on(place: Place) -> None:
    assert place.toolshell("daemon", "start").returncode == 0
    place.write_config(["counted"], extra='[state]\nurl = "postgresql://u:pw@127.0.0.1:1/nowhere"\n')
    warm = place.toolshell("run", "-c", "echo hi")
    cold = place.toolshell("run", "--no-daemon", "-c", "echo hi")
    assert warm.returncode == cold.returncode != 0
    assert warm.stderr == cold.stderr and "pw" not in warm.stderr
    assert place.status() is not None, "the daemon still serves (its old config, to nobody)"
    place.write_config(["counted"])
    assert place.toolshell("run", "-c", "tools counted ping").stdout == "pong from counted\n"


def test_two_starts_at_once_both_succeed_with_one_daemon(place: Place) -> None:
    argv = [*ENTRY, "daemon", "start", "--config", str(place.config), "--state-dir", str(place.state)]
    both = [subprocess.Popen(argv, cwd=place.cwd, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    said = [p.communicate(timeout=120)[0] for p in both]
    assert [p.returncode for p in both] == [0, 0], said
    assert sum("already running" in s for s in said) == 1
    assert place.started() == 1


def test_a_linked_daemons_folder_is_refused_and_its_target_left_alone(place: Place) -> None:
    target = place.root / "elsewhere"
    target.mkdir(mode=0o755)
    place.state.mkdir(mode=0o700)
    (place.state / "daemons").symlink_to(target)
    started = place.toolshell("daemon", "start")
    assert started.returncode == 1 and "not a folder of your own" in started.stderr
    assert list(target.iterdir()) == [] and (target.stat().st_mode & 0o777) == 0o755


def test_dashdash_and_a_closed_reader_behave_as_cold(place: Place) -> None:
    assert place.toolshell("daemon", "start").returncode == 0
    saved = place.toolshell(
        "scripts", "save", "greet", "--description", "greets", "--input-schema",
        '{"type": "object", "properties": {"name": {"type": "string"}}}', stdin="cat\n",
    )  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    warm = place.toolshell("scripts", "greet", "--", "name=x")
    cold = place.toolshell("scripts", "--no-daemon", "greet", "--", "name=x")
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    pipeline = subprocess.run(
        ["bash", "-c", '"$@" run -c "seq 1 20000" | head -1', "_", *ENTRY[:1], *ENTRY[1:],
         "--config", str(place.config), "--state-dir", str(place.state)],
        cwd=place.cwd, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert pipeline.stdout == "1\n" and pipeline.stderr == ""


def test_what_only_a_terminal_reads_keeps_a_command_warm(place: Place) -> None:
    assert place.toolshell("daemon", "start").returncode == 0
    for env in ({"TERM": "screen-256color"}, {"LC_TERMINAL": "iTerm2", "SHLVL": "7"}):
        assert place.toolshell("run", "-c", "echo hi", env=env).stdout == "hi\n"
    status = place.status()
    assert status is not None and status["requests"] == 2


def test_a_daemon_that_does_not_answer_is_named_by_status_and_stop(place: Place) -> None:
    assert place.toolshell("daemon", "start").returncode == 0
    status = place.status()
    assert status is not None
    pid = int(str(status["pid"]))
    os.kill(pid, signal.SIGSTOP)
    try:
        shown = place.toolshell("daemon", "status")
        assert shown.returncode == 1 and f"a daemon (pid {pid})" in shown.stdout and "does not answer" in shown.stdout
        ran = place.toolshell("run", "-c", "echo cold")  # waits ACCEPT_TIMEOUT, then runs cold
        assert ran.stdout == "cold\n"
    finally:
        os.kill(pid, signal.SIGCONT)
    assert place.status() is not None and place.status()["requests"] == 0  # type: ignore[index]


def test_a_trusted_checkout_config_shows_the_state_dir_it_names(place: Place) -> None:
    local = place.cwd / "toolshell.toml"
    place.write_config(["counted"], extra='[state]\ndir = "mystate"\n', path=local)
    data = Path(tempfile.mkdtemp(prefix="ts-", dir="/tmp"))  # short: the socket path has a bound
    env = {"XDG_CONFIG_HOME": str(place.root / "cfg"), "XDG_DATA_HOME": str(data)}
    run = [*ENTRY]

    def toolshell(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*run, *args], cwd=place.cwd, capture_output=True, text=True, timeout=120, check=False,
            env={k: v for k, v in {**os.environ, **env}.items() if k != "TOOLSHELL_STATE_DIR"},
        )  # fmt: skip

    assert toolshell("config", "trust", "--yes").returncode == 0
    assert toolshell("daemon", "start").returncode == 0
    try:
        shown = json.loads(toolshell("daemon", "status", "--json").stdout)
        assert shown["state_dir"] == str((place.cwd / "mystate").resolve())
        assert toolshell("run", "-c", "tools counted ping").stdout == "pong from counted\n"
    finally:
        toolshell("daemon", "stop")
        shutil.rmtree(data, ignore_errors=True)


def test_a_closed_stdin_is_one_clear_message(place: Place) -> None:
    done = subprocess.run(
        [*ENTRY, "run", "--config", str(place.config), "--state-dir", str(place.state)],
        cwd=place.cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
        preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    assert done.returncode == 2 and "stdin is closed" in done.stderr and "Error" in done.stderr


def test_only_a_newer_release_retires_a_daemon_and_keep_warm_tries_again_later(place: Place) -> None:
    from toolshell.frontends.daemon.environment import newer as _newer

    assert _newer("0.2.0", "0.1.0") and not _newer("0.1.0.dev1", "0.1.0") and not _newer("0.0.9", "0.1.0")
    address = address_for(str(place.config), str(place.state), str(place.cwd))
    assert address is not None
    assert control.note_failure(address, "first") and not control.note_failure(address, "again")
    marker = Path(address.folder) / f"{address.key}.failed"
    old = time.time() - control.FAILED_RETRY_SECONDS - 60
    os.utime(marker, (old, old))
    assert control.note_failure(address, "said again after a while")
