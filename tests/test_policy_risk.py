"""The risk of a call: annotations x mode x rating x trust, deny and require patterns."""

from __future__ import annotations

from typing import Any

import pytest

from toolshell.config import ApprovalConfig
from toolshell.errors import ConfigError
from toolshell.policy import Risk, is_unlabeled, judge
from toolshell.registry.entry import ToolEntry

KINDS: dict[str, dict[str, Any]] = {
    "read_only": {"readOnlyHint": True},
    "destructive": {"readOnlyHint": False, "destructiveHint": True},
    "open_world": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    "closed_world": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
    "unlabeled": {},
}

# R = read_only, C = changes, else needs_approval with that why.
# Columns: the tool's rating — not rated, rated "changes", rated "read_only".
TABLE = """
kind          trusted  mode    none         changes        read_only
read_only     yes      off     R            R              R
read_only     yes      normal  R            R              R
read_only     yes      strict  R            R              R
destructive   yes      off     C            C              C
destructive   yes      normal  destructive  destructive    destructive
destructive   yes      strict  destructive  destructive    destructive
open_world    yes      off     C            C              C
open_world    yes      normal  open_world   open_world     open_world
open_world    yes      strict  open_world   open_world     open_world
closed_world  yes      off     C            C              C
closed_world  yes      normal  C            C              C
closed_world  yes      strict  mutating     mutating       mutating
unlabeled     yes      off     C            C              C
unlabeled     yes      normal  C            rated_changes  C
unlabeled     yes      strict  mutating     rated_changes  mutating
read_only     no       off     C            C              C
read_only     no       normal  C            rated_changes  C
read_only     no       strict  mutating     rated_changes  mutating
destructive   no       off     C            C              C
destructive   no       normal  destructive  destructive    destructive
destructive   no       strict  destructive  destructive    destructive
open_world    no       off     C            C              C
open_world    no       normal  open_world   open_world     open_world
open_world    no       strict  open_world   open_world     open_world
closed_world  no       off     C            C              C
closed_world  no       normal  C            rated_changes  C
closed_world  no       strict  mutating     rated_changes  mutating
unlabeled     no       off     C            C              C
unlabeled     no       normal  C            rated_changes  C
unlabeled     no       strict  mutating     rated_changes  mutating
"""


def _cases() -> list[Any]:
    rows = [line.split() for line in TABLE.strip().splitlines()[1:]]
    cases = []
    for kind, trusted, mode, *cells in rows:
        for rating, cell in zip((None, "changes", "read_only"), cells, strict=True):
            cases.append(
                pytest.param(
                    kind,
                    trusted == "yes",
                    mode,
                    rating,
                    cell,
                    id=f"{kind}-{'trusted' if trusted == 'yes' else 'untrusted'}-{mode}-{rating}",
                )
            )
    return cases


def _expected(cell: str) -> tuple[str, str | None]:
    return {"R": ("read_only", None), "C": ("changes", None)}.get(cell, ("needs_approval", cell))


@pytest.mark.parametrize(("kind", "trusted", "mode", "rating", "cell"), _cases())
def test_risk_follows_the_table(kind: str, trusted: bool, mode: Any, rating: str | None, cell: str) -> None:
    entry = ToolEntry("gh", "do-thing", annotations=KINDS[kind], trusted=trusted)
    risk = judge(entry, ApprovalConfig(mode=mode), rating=rating)
    assert (risk.level, risk.why) == _expected(cell)
    assert risk.message.startswith("tools gh do-thing ")


def test_the_table_covers_every_combination() -> None:
    assert len(_cases()) == 5 * 2 * 3 * 3


@pytest.mark.parametrize(
    ("annotations", "why"),
    [
        ({"readOnlyHint": False}, "destructive"),  # destructiveHint defaults to true
        ({"openWorldHint": False}, "destructive"),
        ({"destructiveHint": False}, "open_world"),  # openWorldHint defaults to true
        ({"readOnlyHint": False, "destructiveHint": False}, "open_world"),
    ],
)
def test_a_labeled_tool_that_is_not_read_only_gets_the_spec_defaults(annotations: dict[str, Any], why: str) -> None:
    risk = judge(ToolEntry("gh", "t", annotations=annotations), ApprovalConfig(), rating=None)
    assert (risk.level, risk.why) == ("needs_approval", why)


def test_idempotent_hint_alone_is_still_unlabeled() -> None:
    entry = ToolEntry("gh", "t", annotations={"idempotentHint": True})
    assert is_unlabeled(entry)
    assert judge(entry, ApprovalConfig(), rating=None) == Risk(
        "changes",
        None,
        "tools gh t declares nothing about its risk; it may change things, and in normal mode it runs without asking",
    )


def test_a_read_only_claim_with_destructive_hint_is_still_read_only() -> None:
    # destructiveHint is meaningful only when readOnlyHint is false (MCP spec).
    entry = ToolEntry("gh", "t", annotations={"readOnlyHint": True, "destructiveHint": True})
    assert judge(entry, ApprovalConfig(mode="strict"), rating=None).level == "read_only"


def test_untrusted_tools_are_unlabeled_whatever_they_declare() -> None:
    assert is_unlabeled(ToolEntry("x", "t", annotations={"readOnlyHint": True}, trusted=False))
    assert not is_unlabeled(ToolEntry("x", "t", annotations={"readOnlyHint": True}))


@pytest.mark.parametrize(
    ("pattern", "server", "tool", "hit"),
    [
        ("github:delete_branch", "github", "delete-branch", True),  # hyphens and underscores fold
        ("github:delete-*", "github", "delete_branch", True),
        ("github:delete-*", "github", "list-pulls", False),
        ("github:*", "github", "list-pulls", True),
        ("github:*", "gitlab", "list-pulls", False),
        ("git*:push", "gitlab", "push", True),
        ("web-fetch", None, "web_fetch", True),  # a top-level tool by its name
        (":web_fetch", None, "web_fetch", True),
        ("web_fetch", "github", "web_fetch", False),  # a bare name never means an MCP tool
        ("github:web_fetch", None, "web_fetch", False),
        ("GitHub:Delete-Branch", "github", "delete_branch", True),
    ],
)
def test_deny_patterns_block_in_every_mode(pattern: str, server: str | None, tool: str, hit: bool) -> None:
    entry = ToolEntry(server, tool, annotations={"readOnlyHint": True})
    for mode in ("off", "normal", "strict"):
        risk = judge(entry, ApprovalConfig(mode=mode, deny=[pattern]), rating=None)
        assert (risk.level == "blocked") is hit


def test_a_blocked_call_names_the_rule_and_who_can_lift_it() -> None:
    risk = judge(ToolEntry("github", "delete_branch"), ApprovalConfig(deny=["github:delete-*"]), rating=None)
    assert risk == Risk(
        "blocked",
        None,
        "tools github delete-branch is blocked by the approval deny rule "
        "'github:delete-*' and cannot run; only the person can lift it, by changing [approval] deny "
        "in the config",
    )


def test_deny_wins_over_require() -> None:
    config = ApprovalConfig(deny=["gh:*"], require=["gh:*"])
    assert judge(ToolEntry("gh", "t"), config, rating=None).level == "blocked"


@pytest.mark.parametrize("annotations", list(KINDS.values()), ids=list(KINDS))
def test_require_asks_in_normal_and_strict_whatever_the_tool_declares(annotations: dict[str, Any]) -> None:
    entry = ToolEntry("payments", "refund", annotations=annotations)
    for mode in ("normal", "strict"):
        risk = judge(entry, ApprovalConfig(mode=mode, require=["payments:*"]), rating=None)
        assert (risk.level, risk.why) == ("needs_approval", "policy")
    assert "'payments:*' in [approval] require" in risk.message


def test_nothing_asks_in_off_mode_even_when_required() -> None:
    risk = judge(ToolEntry("payments", "refund"), ApprovalConfig(mode="off", require=["payments:*"]), rating=None)
    assert risk.level == "changes"


def test_require_for_a_top_level_tool() -> None:
    config = ApprovalConfig(require=["web_fetch"])
    assert judge(ToolEntry(None, "web_fetch", annotations={"readOnlyHint": True}), config, rating=None).why == "policy"
    assert judge(ToolEntry("x", "web_fetch", annotations={"readOnlyHint": True}), config, rating=None).why is None


def test_a_labeled_trusted_tool_ignores_a_rating() -> None:
    entry = ToolEntry("gh", "t", annotations=KINDS["closed_world"])
    assert judge(entry, ApprovalConfig(), rating="changes").level == "changes"


def test_approval_messages_say_what_happens_next() -> None:
    cases = {
        "destructive": "tools gh t may delete or overwrite data (it declares destructiveHint); a person must approve "
        "this call before it runs",
        "open_world": "tools gh t changes things outside this host (it does not declare openWorldHint: false); a "
        "person must approve this call before it runs",
    }
    for kind, message in cases.items():
        assert judge(ToolEntry("gh", "t", annotations=KINDS[kind]), ApprovalConfig(), rating=None).message == message
    rated = judge(ToolEntry("gh", "t"), ApprovalConfig(), rating="changes")
    assert rated.message == (
        "tools gh t declares nothing about its risk and only looks like it changes things (it was "
        "rated); a person must approve this call before it runs"
    )


@pytest.mark.parametrize("bad", ["github:del*ete", "", "github:", "*x:y"])
def test_a_bad_pattern_is_a_config_error_that_names_its_place(bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        judge(ToolEntry("gh", "t"), ApprovalConfig.model_construct(deny=["ok:*", bad], require=[]), rating=None)
    assert err.value.problems[0][0] == "approval.deny[1]"


def test_an_untrusted_tool_is_told_apart_from_one_that_declares_nothing() -> None:
    entry = ToolEntry("x", "t", annotations={"readOnlyHint": True}, trusted=False)
    assert judge(entry, ApprovalConfig(), rating="changes").message == (
        "tools x t is from a server not trusted to say its risk and only looks like it changes things (it was "
        "rated); a person must approve this call before it runs"
    )
