"""The `toolshell` entry point: a warm daemon answers when it can, the full CLI otherwise.

Kept apart from the thin client so that neither it nor the CLI imports the other: the client is
standard library only, and the CLI uses its printing helpers.
"""

from __future__ import annotations

import sys

from toolshell.frontends.daemon.client import try_warm


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    code = try_warm(args)
    if code is not None:
        sys.exit(code)
    # lazy: the full command line (click, and what each command imports) only when it is needed
    from toolshell.frontends.cli import main as cold

    cold(args, prog_name="toolshell")
