"""What toolshell says to a person at the terminal while it works (on stderr, never stdout)."""

from __future__ import annotations

import click


def say_waiting(servers: list[str], wait: float) -> None:
    """Tell a person at the terminal why opening takes a moment."""
    click.echo(f"toolshell: waiting up to {wait:g} s for servers to start: {', '.join(servers)}", err=True)
