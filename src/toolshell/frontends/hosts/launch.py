"""The command line an agent host should run to start `toolshell serve`.

A host starts its servers itself, often with little of the user's environment (Claude Desktop
passes almost none): so the command is absolute, and the config and the state directory are named
on the command line rather than left to `$TOOLSHELL_CONFIG`, the working directory or XDG paths.

No release is on a package index yet, so `uvx toolshell` finds nothing there: toolshell run by
`uvx --from WHEEL-OR-CHECKOUT toolshell` is started again the same way, with what it was installed
from (PEP 610's `direct_url.json`, which pip and uv write for a path or URL install).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname


@dataclass(frozen=True)
class Launch:
    """`command` and `args` as a host's config holds them, and how toolshell was found to be installed."""

    command: str
    args: list[str]
    installed: str  # "uvx", "pipx", "uv tool", or "path"

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]


def serve_args(config: Path | None, state_dir: Path | None) -> list[str]:
    """`serve`, with `--config` and `--state-dir` when they have to be named (absolute paths)."""
    args = ["serve"]
    if config is not None:
        args += ["--config", str(config.absolute())]
    if state_dir is not None:
        args += ["--state-dir", str(state_dir.absolute())]
    return args


def launch(
    args: list[str], *, prefix: str | None = None, env: dict[str, str] | None = None, dist: Distribution | None = None
) -> Launch:
    """How to start toolshell the way this one was installed (`prefix`: this interpreter's
    `sys.prefix`): through `uvx` when it runs from uv's throwaway cache (the path would vanish),
    `uvx --from SOURCE` when it was installed from a wheel, a checkout or a URL (`installed_from`;
    `dist`: its distribution, default this toolshell's), else the absolute path of the `toolshell`
    script (pipx's and `uv tool`'s links are stable)."""
    prefix = prefix or sys.prefix
    env = dict(os.environ) if env is None else env
    if _in_uv_cache(prefix, env):
        uvx = shutil.which("uvx", path=env.get("PATH")) or "uvx"
        source = installed_from(dist)
        return Launch(uvx, [*(["--from", source] if source else []), "toolshell", *args], "uvx")
    script = _script(prefix, env)
    return Launch(script, args, _installer(prefix, env))


def installed_from(dist: Distribution | None = None) -> str | None:
    """What toolshell was installed from when not from a package index: a local wheel, sdist or
    checkout (its path), an archive URL, or `git+URL@COMMIT`; None for an index install."""
    try:
        text = (dist or distribution("toolshell")).read_text("direct_url.json")
        data = json.loads(text or "{}")
    except (PackageNotFoundError, ValueError, OSError):
        return None
    url = data.get("url") if isinstance(data, dict) else None
    if not isinstance(url, str) or not url:
        return None
    if url.startswith("file:"):
        return url2pathname(urlsplit(url).path)
    vcs = data.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id"):
        return f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
    return url


def _in_uv_cache(prefix: str, env: dict[str, str]) -> bool:
    cache = env.get("UV_CACHE_DIR") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "uv"
    )
    parts = Path(prefix).parts
    return "archive-v0" in parts or _under(prefix, cache)


def _installer(prefix: str, env: dict[str, str]) -> str:
    pipx_home = env.get("PIPX_HOME") or os.path.join(os.path.expanduser("~"), ".local", "pipx")
    if _under(prefix, os.path.join(pipx_home, "venvs")) or "pipx" in Path(prefix).parts:
        return "pipx"
    uv_tools = env.get("UV_TOOL_DIR") or os.path.join(
        env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"), "uv", "tools"
    )
    return "uv tool" if _under(prefix, uv_tools) else "path"


def _script(prefix: str, env: dict[str, str]) -> str:
    """The `toolshell` script of this installation: the one on PATH when it runs this very
    environment (pipx's and uv's links in ~/.local/bin), else the one in the environment's bin."""
    own = Path(prefix) / "Scripts" / "toolshell.exe" if os.name == "nt" else Path(prefix) / "bin" / "toolshell"
    found = shutil.which("toolshell", path=env.get("PATH"))
    if found and own.exists() and Path(found).resolve() == own.resolve():
        return str(Path(found).absolute())
    if own.exists():
        return str(own)
    return str(Path(found).absolute()) if found else str(own)


def _under(path: str, parent: str) -> bool:
    try:
        return Path(path).resolve().is_relative_to(Path(parent).resolve())
    except OSError:
        return False
