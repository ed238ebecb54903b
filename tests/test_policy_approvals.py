"""Approval requests and grants, and `Policy`: the one place the shell asks whether a call may run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from toolshell.config import ApprovalConfig, Config, GuardConfig, ToolsInShellConfig
from toolshell.errors import ConfigError, ErrorCode, ToolshellError
from toolshell.policy import Approvals, CallableRater, Policy, Risk
from toolshell.registry.entry import ToolEntry
from toolshell.registry.server_identity import ServerIdentity
from toolshell.store.sqlite import Store

DELETE = ToolEntry("github", "delete_branch", "Delete a branch.", {"type": "object"}, {"destructiveHint": True})
LIST = ToolEntry("github", "list_pulls", "List pull requests.", annotations={"readOnlyHint": True})
NOTES = ToolEntry("notes", "notes", "Notes.")  # unlabeled


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- Approvals --------------------------------------------------------------------------------------


def test_a_request_is_pending_until_answered() -> None:
    approvals = Approvals(Store())
    req = approvals.request(DELETE, {"branch": "fix-x"}, "s1", "destructive", "may delete data")
    assert req.id.startswith("apr_")
    assert req.to_json() == {
        "id": req.id,
        "tool": "tools github delete-branch",
        "input": {"branch": "fix-x"},
        "why": "destructive",
        "message": "may delete data",
        "session_id": "s1",
        "caller": None,
        "status": "pending",
        "decided_by": None,
    }
    assert approvals.list_pending() == [req]
    assert approvals.grant(req.id).status == "granted_once"
    assert approvals.list_pending() == []


def test_an_identical_open_request_is_not_opened_twice_even_from_another_session() -> None:
    approvals = Approvals(Store())
    first = approvals.request(DELETE, {"branch": "fix-x", "force": False}, "s1", "destructive")
    again = approvals.request(DELETE, {"force": False, "branch": "fix-x"}, "s1", "destructive")
    other_session = approvals.request(DELETE, {"branch": "fix-x", "force": False}, "s2", "destructive")
    other_input = approvals.request(DELETE, {"branch": "fix-y"}, "s1", "destructive")
    other_caller = approvals.request(DELETE, {"branch": "fix-x", "force": False}, "s1", "destructive", caller="bob")
    assert again.id == first.id == other_session.id
    assert len({first.id, other_input.id, other_caller.id}) == 3


def test_a_once_grant_covers_the_exact_input_once() -> None:
    approvals = Approvals(Store())
    approvals.grant(approvals.request(DELETE, {"branch": "fix-x", "n": 1}, "s", "destructive").id)
    assert not approvals.consume_once(DELETE, {"branch": "fix-y", "n": 1})
    assert not approvals.consume_once(DELETE, {"branch": "fix-x", "n": "1"})
    assert not approvals.consume_once(replace(DELETE, name="delete_tag"), {"branch": "fix-x", "n": 1})
    assert approvals.has_once(DELETE, {"n": 1, "branch": "fix-x"})  # key order does not matter
    assert approvals.consume_once(DELETE, {"n": 1, "branch": "fix-x"})
    assert not approvals.consume_once(DELETE, {"branch": "fix-x", "n": 1})
    assert not approvals.has_once(DELETE, {"branch": "fix-x", "n": 1})


def test_a_once_grant_does_not_cover_a_tool_that_changed_since() -> None:
    approvals = Approvals(Store())
    approvals.grant(approvals.request(DELETE, {"branch": "x"}, "s", "destructive").id)
    assert not approvals.consume_once(replace(DELETE, description="Delete a branch and its tags."), {"branch": "x"})


@pytest.mark.parametrize(
    "changed",
    [
        replace(DELETE, description="Delete a branch, and its remote copy."),
        replace(DELETE, input_schema={"type": "object", "properties": {"all": {"type": "boolean"}}}),
        replace(DELETE, annotations={"destructiveHint": True, "openWorldHint": True}),
    ],
    ids=["description", "schema", "annotations"],
)
def test_an_always_grant_is_voided_when_the_tool_changes(changed: ToolEntry) -> None:
    approvals = Approvals(Store())
    approvals.grant(approvals.request(DELETE, {"branch": "x"}, "s", "destructive").id, always=True)
    assert approvals.is_always(DELETE)
    assert approvals.is_always(replace(DELETE, trusted=True))  # trust is not part of what was approved
    assert not approvals.is_always(changed)
    assert not approvals.is_always(DELETE)  # voided for good, even if the tool changes back


def test_an_always_grant_covers_any_input_and_only_that_tool() -> None:
    approvals = Approvals(Store())
    approvals.grant(approvals.request(DELETE, {"branch": "x"}, "s", "destructive").id, always=True)
    assert approvals.is_always(DELETE)
    assert not approvals.is_always(replace(DELETE, server="gitlab"))
    assert approvals.revoke_always(DELETE) == 1
    assert not approvals.is_always(DELETE)


def test_grants_cover_only_the_program_they_were_given_for() -> None:
    approvals = Approvals(Store())
    program_a = replace(DELETE, server_id="sha256:a", server_label="gh-server --org a")
    program_b = replace(program_a, server_id="sha256:b", server_label="other-server")
    approvals.grant(approvals.request(program_a, {"branch": "x"}, "s", "destructive").id, always=True)
    approvals.grant(approvals.request(program_a, {"branch": "y"}, "s", "destructive").id)
    assert not approvals.is_always(program_b)
    assert not approvals.consume_once(program_b, {"branch": "y"})
    assert approvals.is_always(program_a), "another program asking does not void program A's grant"
    assert approvals.consume_once(program_a, {"branch": "y"})
    [listed] = approvals.list_grants({"github": ServerIdentity("sha256:b", "other-server")})
    assert (listed["server"], listed["program"], listed["status"]) == ("github", "gh-server --org a", "other_program")
    assert listed["note"] == "not in force: github now runs other-server, another program"
    assert approvals.list_grants({"github": ServerIdentity("sha256:a", "gh-server --org a")})[0]["status"] == "in_force"


def test_a_denied_request_is_recorded_and_cannot_be_answered_again() -> None:
    approvals = Approvals(Store())
    req = approvals.request(DELETE, {"branch": "x"}, "s", "destructive")
    assert approvals.deny(req.id).status == "denied"
    assert approvals.get(req.id).status == "denied"
    assert not approvals.consume_once(DELETE, {"branch": "x"})
    with pytest.raises(ToolshellError, match="already answered \\(denied\\)"):
        approvals.grant(req.id)
    assert approvals.request(DELETE, {"branch": "x"}, "s", "destructive").id != req.id  # asks again


def test_an_unknown_request_id_says_where_to_look() -> None:
    with pytest.raises(ToolshellError) as err:
        Approvals(Store()).grant("apr_nope")
    assert err.value.code == ErrorCode.INVALID_INPUT
    assert err.value.message == "there is no approval request 'apr_nope'; `toolshell approvals` lists the pending ones"


def test_grants_survive_a_new_store_on_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first = Approvals(Store(path))
    first.grant(first.request(DELETE, {"branch": "x"}, "s", "destructive").id)
    assert Approvals(Store(path)).consume_once(DELETE, {"branch": "x"})


# --- Policy -----------------------------------------------------------------------------------------


def _policy(**approval: Any) -> Policy:
    return Policy(Config(approval=ApprovalConfig(**approval)), Store())


@pytest.mark.anyio
async def test_check_uses_up_a_once_grant_and_asks_again_after() -> None:
    policy = _policy()
    assert (await policy.check(DELETE, {"branch": "x"}, "s")).why == "destructive"
    policy.approvals.grant(policy.approvals.request(DELETE, {"branch": "x"}, "s", "destructive").id)
    assert (await policy.assess(DELETE, {"branch": "x"})).level == "changes"  # assess uses nothing up
    assert (await policy.check(DELETE, {"branch": "y"}, "s")).level == "needs_approval"
    assert await policy.check(DELETE, {"branch": "x"}, "s") == Risk(
        "changes", None, "tools github delete-branch was approved by a person; it runs without asking"
    )
    assert (await policy.check(DELETE, {"branch": "x"}, "s")).level == "needs_approval"


@pytest.mark.anyio
async def test_an_always_grant_lets_every_call_run_until_the_tool_changes() -> None:
    policy = _policy()
    policy.approvals.grant(policy.approvals.request(DELETE, {"branch": "x"}, "s", "destructive").id, always=True)
    for branch in ("x", "y", "z"):
        assert (await policy.check(DELETE, {"branch": branch}, "s")).level == "changes"
    changed = replace(DELETE, description="Delete any ref.")
    assert (await policy.check(changed, {"branch": "x"}, "s")).level == "needs_approval"


@pytest.mark.anyio
async def test_a_grant_never_lifts_a_deny_rule() -> None:
    store = Store()
    granted = Policy(Config(), store)
    granted.approvals.grant(granted.approvals.request(DELETE, {"branch": "x"}, "s", "destructive").id, always=True)
    denied = Policy(Config(approval=ApprovalConfig(deny=["github:delete-*"])), store)
    assert (await denied.check(DELETE, {"branch": "x"}, "s")).level == "blocked"


@pytest.mark.anyio
async def test_assess_without_input_is_checked_at_run_time_unless_blocked_and_keeps_the_tools_own_level() -> None:
    policy = _policy(deny=["github:delete_tag"])
    assert (await policy.assess(DELETE, None)).level == "checked_at_run_time"
    assert (await policy.assess(DELETE, None)).tool_risk == "needs_approval"
    listing = await policy.assess(LIST, None)
    assert (listing.level, listing.tool_risk) == ("checked_at_run_time", "read_only")
    assert (await policy.assess(replace(DELETE, name="delete_tag"), None)).level == "blocked"
    assert (await policy.assess(DELETE, {"branch": "x"})).level == "needs_approval"


@pytest.mark.anyio
async def test_a_guard_rule_blocks_the_call_in_the_plan_and_at_run_time() -> None:
    config = Config(guard=[GuardConfig(tool="github:delete-*", input='"branch":"main"', message="never main")])
    policy = Policy(config, Store())
    blocked = await policy.assess(DELETE, {"branch": "main"})
    assert blocked == Risk("blocked", None, "tools github delete-branch: never main (guard rule for 'github:delete-*')")
    assert await policy.check(DELETE, {"branch": "main"}, "s") == blocked
    assert (await policy.assess(DELETE, {"branch": "fix"})).level == "needs_approval"


@pytest.mark.anyio
async def test_unlabeled_tools_are_rated_once_and_a_changes_rating_asks() -> None:
    asked: list[str] = []

    def rate(entry: ToolEntry) -> str:
        asked.append(entry.name)
        return "changes"

    policy = Policy(Config(), Store(), CallableRater(rate))
    assert (await policy.assess(NOTES, {"x": 1})).why == "rated_changes"
    assert (await policy.check(NOTES, {"x": 1}, "s")).why == "rated_changes"
    assert (await policy.check(LIST, {}, "s")).level == "read_only"
    assert asked == ["notes"]


@pytest.mark.anyio
async def test_ratings_off_lets_unlabeled_tools_run_in_normal_mode() -> None:
    config = Config(tools_in_shell=ToolsInShellConfig(rate_unlabeled_tools=False))
    policy = Policy(config, Store(), CallableRater(lambda e: "changes"))
    assert (await policy.check(NOTES, {}, "s")).level == "changes"
    no_rater = Policy(Config(approval=ApprovalConfig(rater="none")), Store())
    assert (await no_rater.check(NOTES, {}, "s")).level == "changes"


@pytest.mark.anyio
async def test_the_default_rater_is_the_heuristic() -> None:
    policy = Policy(Config(), Store())
    assert (await policy.check(ToolEntry("n", "create_note"), {}, "s")).why == "rated_changes"
    assert (await policy.check(ToolEntry("n", "list_notes"), {}, "s")).level == "changes"  # never read_only


@pytest.mark.anyio
async def test_off_mode_asks_the_rater_nothing() -> None:
    asked: list[str] = []

    def rate(entry: ToolEntry) -> str:
        asked.append(entry.name)
        return "changes"

    policy = Policy(Config(approval=ApprovalConfig(mode="off")), Store(), CallableRater(rate))
    assert (await policy.check(NOTES, {}, "s")).level == "changes"
    assert asked == []


def test_a_bad_pattern_fails_when_the_policy_is_made() -> None:
    # The config already refuses these; the policy still checks configs built without validation.
    with pytest.raises(ConfigError, match=r"only a trailing '\*'"):
        Policy(Config(approval=ApprovalConfig.model_construct(require=["gh:*x"], deny=[])), Store())
    with pytest.raises(ConfigError) as err:
        Policy(Config(guard=[GuardConfig.model_construct(tool="a:b*c", input="", message="m")]), Store())
    assert err.value.problems[0][0] == "guard[0].tool"
