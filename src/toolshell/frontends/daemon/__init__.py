"""A warm CLI: a daemon per config, working directory and state that keeps the host open, and
the thin client `toolshell` talks to it through (`client`, standard library only)."""
