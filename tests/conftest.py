"""Shared fixtures: the asyncio backend for anyio tests and a fresh state directory per test; and the
`requires` mark of `_ci_support` (a check that cannot run skips, or fails under CI)."""

from __future__ import annotations

import pytest

from _ci_support import pytest_configure, pytest_runtest_setup  # noqa: F401  (hooks)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path, monkeypatch) -> None:
    """No test reads or writes the user's config or state."""
    monkeypatch.setenv("TOOLSHELL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.delenv("TOOLSHELL_CONFIG", raising=False)
