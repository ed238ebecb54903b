"""The package version, in one leaf module (serverInfo, `--version`, built-in servers)."""

from __future__ import annotations

__version__ = "0.1.0"
