"""A check that cannot run here skips with its reason; under CI (`$CI` set, non-empty) it fails.

A security check or a real-service check that skips in CI has silently stopped guarding anything,
so CI, which installs everything the suite needs (`.ci/run`), turns each such skip into a failure.
Platform-irrelevant skips do not use this.

- `skip_or_fail(reason)` inside a test or fixture;
- `@requires(available, reason)` (or in `pytestmark`) where the condition is known at import.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

MARK = "requires"


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def skip_or_fail(reason: str) -> NoReturn:
    """Skip with `reason`; under CI fail with it instead."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set: this check must run, not skip)", pytrace=False)
    pytest.skip(reason)


def requires(available: object, reason: str) -> pytest.MarkDecorator:
    """A mark: where `available` is false the test is skipped with `reason`, or fails under CI."""
    return getattr(pytest.mark, MARK)(bool(available), reason=reason)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}(available, reason): skip with reason where unavailable; fail under CI")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers(MARK):
        if not mark.args[0]:
            skip_or_fail(mark.kwargs["reason"])
