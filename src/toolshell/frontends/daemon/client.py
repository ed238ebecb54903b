"""The `toolshell` command's entry point: `run`, `plan`, `servers` and `scripts` through a running
daemon when there is one for this config, directory and state; everything else, and every form
this module does not read itself, through the full command line (`frontends.cli`).

Standard library only, and nothing of toolshell that imports more: a warm command must not pay
for `import mcp` (most of a second). Whatever it cannot tell for sure (no daemon, a socket that is
not this user's, an option it does not know, text that is not UTF-8, `--`, `--no-daemon`,
`TOOLSHELL_DEBUG`) goes the cold way; so does a request the daemon declines before running
anything (the config changed and does not load, an environment that differs from the daemon's,
another version of toolshell), or one it does not take within `ACCEPT_TIMEOUT`.
"""

from __future__ import annotations

import io
import os
import stat  # loaded by `os` already: free
import sys

from toolshell.frontends.daemon import wire
from toolshell.frontends.daemon.address import Address, address_for
from toolshell.version import __version__

TYPE_CHECKING = False  # `typing` is not imported here: every millisecond of start-up counts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_PATH_OPTIONS = {"--config": "config", "--state-dir": "state_dir"}
_SCRIPT_COMMANDS = {"run": True, "plan": False}
"""The commands that take a script, and whether they take `--json`."""
_HELP = ("-h", "--help")


class _Cold(Exception):
    """This invocation goes the cold way."""


class _Invocation:
    """One command this module runs through the daemon."""

    def __init__(self, op: str, paths: dict[str, str | None]) -> None:
        self.op = op
        self.paths = paths
        self.as_json = False
        self.command: str | None = None
        self.file: str | None = None
        self.role: str | None = None
        self.scripts: list[str] | None = None
        """`toolshell scripts`' arguments: a run of `tools scripts …`."""
        self.stdin: bytes | None = None
        """What was read of stdin (given back to the cold path if it comes to that)."""

    def script(self) -> str:
        """The script to run (read now: a FILE, or stdin). Raises _Cold when it is not UTF-8."""
        if self.scripts is not None:
            piped = "" if sys.stdin is not None and sys.stdin.isatty() else self._decoded(self._read_stdin())
            return scripts_script(self.scripts, piped)
        if self.command is not None:
            return self.command
        if self.file is None or self.file == "-":
            return self._decoded(self._read_stdin())
        try:
            with open(self.file, "rb") as f:
                return self._decoded(f.read())
        except OSError:
            raise _Cold from None

    def _read_stdin(self) -> bytes:
        if sys.stdin is None:  # closed (`<&-`): the cold path says so
            raise _Cold
        self.stdin = sys.stdin.buffer.read()
        return self.stdin

    @staticmethod
    def _decoded(data: bytes) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise _Cold from None

    def head(self, address: Address) -> dict[str, Any]:
        """The first line: what it asks of which daemon (nothing of the environment yet)."""
        op = self.op if self.op in ("servers", "plan") else "run"
        return {"v": wire.PROTOCOL, "version": __version__, "op": op, "address": address.to_json()}

    def detail(self, compared: object) -> dict[str, Any]:
        """The second line, once the daemon said what of the environment it compares: only that
        part of it (a daemon needs no other secret), and the script. Raises _Cold for a script
        that cannot be read, or a daemon that asks in a form this client does not know."""
        message: dict[str, Any] = {"env": compared_env(os.environ, compared), "json": self.as_json}
        if self.op == "servers":
            return message
        return {**message, "script": self.script(), "role": self.role}


def compared_env(env: Any, compared: object) -> dict[str, str]:
    """The variables of `env` a daemon's `{"names": [...], "prefixes": [...]}` names."""
    if not isinstance(compared, dict):
        raise _Cold
    names, prefixes = compared.get("names"), compared.get("prefixes")
    if not isinstance(names, list) or not isinstance(prefixes, list):
        raise _Cold
    wanted = {n for n in names if isinstance(n, str)}
    starts = tuple(p for p in prefixes if isinstance(p, str) and p)
    return {k: v for k, v in env.items() if k in wanted or (bool(starts) and k.startswith(starts))}


def try_warm(args: list[str]) -> int | None:
    """The exit code of `args` run by a daemon, or None: run it cold (the entry point does)."""
    invocation = _parse(args)
    if invocation is None:
        return None
    code = _warm(invocation)
    if code is None and invocation.stdin is not None:
        # read for the daemon, which declined: the cold path reads it again
        sys.stdin = io.TextIOWrapper(io.BytesIO(invocation.stdin), encoding="utf-8")
    return code


def _warm(invocation: _Invocation) -> int | None:
    """The command's exit code, run by the daemon; None: run it cold."""
    address = address_for(invocation.paths["config"], invocation.paths["state_dir"])
    if address is None:
        return None
    try:
        return exchange(address, invocation, write_chunk)
    except _Cold:
        return None
    except KeyboardInterrupt:  # the daemon cancels the run when the connection closes
        return 130
    except BrokenPipeError:  # our reader went away (`| head -1`): end quietly, as a shell's command does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:  # the thin client's last line of defence: one line, never a traceback
        write_chunk("", f"toolshell: unexpected error: {type(e).__name__}: {e}; rerun with --no-daemon\n")
        return 1


def exchange(address: Address, invocation: _Invocation, on_chunk: Callable[[str, str], None]) -> int | None:
    """Send one request to the daemon at `address` and print its outcome; its exit code, or None
    when no daemon answers there or it declined (nothing ran: also when it closes before it says
    it accepted). The script is read only once the daemon is reached (it may read stdin). Raises
    _Cold when the invocation says so."""
    conn = _connected(address)
    if conn is None:
        return None
    accepted = False  # the daemon says so before it runs anything: until then, nothing ran
    try:
        conn.send(invocation.head(address))
        asked = wire.decode(conn.readline())
        if "compare" not in asked:  # fallback, refused, or not a daemon
            return None
        conn.send(invocation.detail(asked["compare"]))
        while line := conn.readline():
            message = wire.decode(line)
            if "fallback" in message or "refused" in message:
                return None
            if not accepted:
                accepted = True
                conn.settimeout(None)  # it runs: as long as the script takes
            if "exit" in message:
                write_chunk(str(message.get("stdout") or ""), str(message.get("stderr") or ""))
                return int(message["exit"])
            on_chunk(str(message.get("out") or ""), str(message.get("err") or ""))
    except (ConnectionError, TimeoutError, ValueError) as e:
        if isinstance(e, BrokenPipeError) and accepted:
            raise  # our own stdout (`| head`), not the daemon
    finally:
        conn.close()
    if not accepted:
        return None  # it ended before taking the request (stopping, stuck, not a daemon): nothing ran
    write_chunk("", "toolshell: the daemon stopped before the command finished; run it again, or with --no-daemon\n")
    return 1


ACCEPT_TIMEOUT = 10.0
"""How long a client waits for the daemon to take its request before running the command cold."""


def _connected(address: Address) -> wire.Connection | None:
    """A connection to the daemon at `address`, or None when none runs there, or its folder or
    socket could be another account's doing: a state dir or `daemons/` that is not this user's
    own, or that others can write, and a socket that is a link or not this user's, get nothing,
    not even the request (the command runs cold, which says what is wrong with the state dir)."""
    if not _private(address):
        return None
    conn = wire.Connection(ACCEPT_TIMEOUT)
    try:
        if conn.connect(address.socket) == os.geteuid():
            return conn
    except OSError:  # none running (no socket, or a stale one)
        pass
    conn.close()
    return None


def _private(address: Address) -> bool:
    """Whether the state dir and `daemons/` are this user's folders that nobody else can write,
    and the socket this user's socket itself (never followed through a link)."""
    me = os.geteuid()
    try:
        for folder in (address.state_dir, address.folder):
            info = os.lstat(folder)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != me or info.st_mode & 0o022:
                return False
        info = os.lstat(address.socket)
    except OSError:  # no folder or no socket: no daemon
        return False
    return stat.S_ISSOCK(info.st_mode) and info.st_uid == me


def ask(address: Address, op: str) -> dict[str, Any] | None:
    """One control request (`status`, `stop`) to the daemon at `address`: its answer, or None when
    none runs there."""
    conn = _connected(address)
    if conn is None:
        return None
    try:
        conn.send({"v": wire.PROTOCOL, "version": __version__, "op": op, "address": address.to_json()})
        line = conn.readline()
    except (ConnectionError, TimeoutError, ValueError):  # it was stopping, is stuck, or is not a daemon
        return None
    finally:
        conn.close()
    if not line:
        return None
    answer = wire.decode(line)
    return None if "fallback" in answer or "refused" in answer else answer


def write_chunk(stdout: str, stderr: str) -> None:
    """One chunk, flushed at once so that a pipe holding both streams keeps their order."""
    for stream, text in ((sys.stdout, stdout), (sys.stderr, stderr)):
        if text:
            stream.write(text)
            stream.flush()


# --- reading the command line --------------------------------------------------------------------


def _parse(args: list[str]) -> _Invocation | None:
    """The invocation when this module can run it through a daemon, else None."""
    if os.environ.get("TOOLSHELL_DEBUG") or not all(_utf8(a) for a in args) or {"--no-daemon", "--"} & set(args):
        return None
    paths: dict[str, str | None] = {"config": None, "state_dir": None}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i = _path_option(args, i, paths)
        if i < 0:
            return None  # `--debug`, `--version`, `--help`: the full command line
    if i >= len(args):
        return None
    op, rest = args[i], args[i + 1 :]
    if op == "scripts":
        return _scripts(rest, paths)
    if op == "servers":
        invocation = _Invocation("servers", paths)
        j = 0
        while j < len(rest):
            if rest[j] == "--json":
                invocation.as_json, j = True, j + 1
            elif (j := _path_option(rest, j, paths)) < 0:
                return None
        return invocation
    if op not in _SCRIPT_COMMANDS:
        return None
    return _script_command(op, rest, paths)


def _script_command(op: str, rest: list[str], paths: dict[str, str | None]) -> _Invocation | None:
    invocation = _Invocation(op, paths)
    j = 0
    while j < len(rest):
        word = rest[j]
        if word.split("=", 1)[0] in _PATH_OPTIONS:
            j = _path_option(rest, j, paths)
        elif word == "--json" and _SCRIPT_COMMANDS[op]:
            invocation.as_json, j = True, j + 1
        elif word == "-c" and j + 1 < len(rest) and invocation.command is None:
            invocation.command, j = rest[j + 1], j + 2
        elif word.startswith("--role=") and invocation.role is None:
            invocation.role, j = word.partition("=")[2], j + 1
        elif word == "--role" and j + 1 < len(rest) and invocation.role is None:
            invocation.role, j = rest[j + 1], j + 2
        elif (word == "-" or not word.startswith("-")) and invocation.file is None:
            invocation.file, j = word, j + 1
        else:
            return None
        if j < 0:
            return None
    if invocation.command is not None and invocation.file is not None:
        return None  # the cold path says which to drop
    return invocation


def _scripts(rest: list[str], paths: dict[str, str | None]) -> _Invocation | None:
    """`toolshell scripts …`: a run of `tools scripts …`, except what needs no host (`save`,
    `delete`, `--json`) and this command's own help."""
    words: list[str] = []
    j = 0
    while j < len(rest):
        if rest[j].split("=", 1)[0] in _PATH_OPTIONS:
            j = _path_option(rest, j, paths)
            if j < 0:
                return None
            continue
        words.append(rest[j])
        j += 1
    if "--json" in words or words[:1] in (["save"], ["delete"]) or words[:1] in ([h] for h in _HELP):
        return None
    invocation = _Invocation("run", paths)
    invocation.scripts = words
    return invocation


def _path_option(args: list[str], i: int, paths: dict[str, str | None]) -> int:
    """Read `--config X`, `--config=X`, `--state-dir X` or `--state-dir=X` at `i`: the index after
    it, or -1 when `args[i]` is not one of them (or has no value)."""
    name, eq, value = args[i].partition("=")
    if name not in _PATH_OPTIONS:
        return -1
    if eq:
        paths[_PATH_OPTIONS[name]] = value
        return i + 1
    if i + 1 >= len(args):
        return -1
    paths[_PATH_OPTIONS[name]] = args[i + 1]
    return i + 2


def _utf8(word: str) -> bool:
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:  # argv bytes that are not UTF-8: the full command line names them
        return False
    return True


def scripts_script(args: list[str], piped: str) -> str:
    """The script `toolshell scripts ARGS…` runs: `tools scripts ARGS…`, fed what was piped to it
    through a quoted here-document (a final newline is added when missing)."""
    # lazy: only `toolshell scripts` quotes words
    import shlex

    words = " ".join(shlex.quote(a) for a in ("tools", "scripts", *args))
    if not piped:
        return words
    end = "TOOLSHELL_STDIN"
    while end in piped:
        end += "_"
    return f"{words} <<'{end}'\n{piped}{'' if piped.endswith(chr(10)) else chr(10)}{end}\n"
