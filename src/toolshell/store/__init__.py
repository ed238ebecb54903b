"""State that outlives a process: one SQLite file under the state directory."""

from toolshell.store.sqlite import Store

__all__ = ["Store"]
