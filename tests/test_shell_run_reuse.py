# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""A shell call's own run does only the work its answer needs (issue 31, round 2): the before-start
check reads nothing when no call could be held, prepares only calls that may ask, a scan's calls
alone skip bashkit's cross-check, the active servers are worked out once per role, and a worker
catching up takes from its live shell only the objects the newer commit lacks. Each test counts
the work, and would fail if the cut changed an answer."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import bashkit
import pytest

from _github_server import make_github
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  # fixtures
from toolshell.config import Config
from toolshell.errors import ToolshellError
from toolshell.host import Host
from toolshell.policy import plan as plan_mod
from toolshell.policy.policy import Policy
from toolshell.policy.risk import NEEDS_APPROVAL
from toolshell.registry import catalog_memo
from toolshell.registry.entry import ToolEntry
from toolshell.shell import precheck as precheck_mod
from toolshell.shell.handles import ShellHandles
from toolshell.shell.restore import RECENT_BYTES, Recent
from toolshell.shells import Shells
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key

pytestmark = pytest.mark.anyio


def _counting_scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    scanned: list[str] = []
    real = plan_mod._scan
    monkeypatch.setattr(plan_mod, "_scans", type(plan_mod._scans)())  # scans earlier tests kept don't count

    def counted(script: str, **kwargs: Any) -> Any:
        scanned.append(script)
        return real(script, **kwargs)

    monkeypatch.setattr(plan_mod, "_scan", counted)
    return scanned


async def test_a_script_on_a_catalog_where_no_call_could_be_held_is_not_read_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scanned = _counting_scans(monkeypatch)
    async with Host.open(Config()) as host:  # text-metrics (read-only) and runtime (labeled, changes)
        session = host.session()
        first = await session.run("tools text-metrics text-length text=ab")
        again = [await session.run(f"tools text-metrics text-length text=a{i}") for i in range(3)]
    assert first.exit_code == 0 and [r.stdout for r in again] == ["2\n", "2\n", "2\n"]
    assert scanned == ["tools text-metrics text-length text=ab"], "only the call before the session had a catalog"


async def test_a_call_that_needs_approval_still_holds_a_later_script_of_the_same_session() -> None:
    calls: list[Any] = []
    async with Host.open(Config(), servers={"github": make_github(calls)}) as host:
        session = host.session()
        await session.run("tools github list-pulls repo=a/b")
        held = await session.run("echo start; tools github delete-branch branch=fix-x")
    assert held.stdout == "" and held.tools["stopped"]["before_start"] is True
    assert calls == [("list-pulls", {"repo": "a/b", "state": "open"})]


async def test_a_lazy_server_named_in_a_later_script_is_loaded_and_its_call_judged_before_start() -> None:
    calls: list[Any] = []
    config = Config.model_validate({"mcp": {"servers": [{"name": "github", "type": "builtin", "load": "on_demand"}]}})
    async with Host.open(config, servers={"github": make_github(calls)}) as host:
        session = host.session()
        await session.run("tools text-metrics text-length text=ab")  # its catalog: github not loaded
        held = await session.run("echo start; tools github delete-branch branch=fix-x")
    assert held.stdout == "" and held.tools["stopped"]["before_start"] is True
    assert calls == []


async def test_the_check_does_not_validate_the_input_of_a_call_that_cannot_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    prepared: list[str] = []
    real = precheck_mod.prepare_input

    def counted(entry: ToolEntry, arguments: dict[str, Any]) -> Any:
        prepared.append(entry.name)
        return real(entry, arguments)

    monkeypatch.setattr(precheck_mod, "prepare_input", counted)
    async with Host.open(Config(), servers={"github": make_github([])}) as host:
        result = await host.run("tools github list-pulls repo=a/b; tools github delete-branch branch=x")
    assert result.tools["stopped"]["before_start"] is True
    assert prepared == ["delete-branch"], "the read-only call is not prepared; the one that may ask is"


def _entries() -> list[ToolEntry]:
    """Every combination of the three hints (declared true, false, or not at all), trusted or not."""
    hints = [None, True, False]
    schema = {"type": "object", "properties": {"action": {"enum": ["list", "delete"]}}}
    out = []
    for i, (ro, de, ow, trusted) in enumerate(itertools.product(hints, hints, hints, (True, False))):
        declared = (("readOnlyHint", ro), ("destructiveHint", de), ("openWorldHint", ow))
        annotations = {k: v for k, v in declared if v is not None}
        out.append(ToolEntry("s", f"t{i}", "", schema, annotations, trusted=trusted))
    return out


@pytest.mark.parametrize("mode", ["off", "normal", "strict"])
@pytest.mark.parametrize("require", [[], ["s:t1*"]])
async def test_a_tool_said_never_to_ask_is_never_judged_needs_approval(
    tmp_path: Path, mode: str, require: list[str]
) -> None:
    config = Config.model_validate({"approval": {"mode": mode, "require": require, "deny": ["s:t7"]}})
    async with Host.open(config, state_dir=tmp_path) as host:
        policy: Policy = host.policy
        asked = 0
        for entry in _entries():
            for rating in (None, "changes", "read_only"):
                policy.rating = (lambda r: lambda e: _value(r))(rating)  # type: ignore[method-assign]
                for value in (None, {}, {"action": "list"}, {"action": "delete"}):
                    level = (await policy.assess(entry, value)).level
                    asked += level == NEEDS_APPROVAL
                    if not policy.may_ask(entry):
                        assert level != NEEDS_APPROVAL, (entry, rating, value)
        assert (asked > 0) == (mode != "off")


async def _value(rating: str | None) -> str | None:
    return rating


def test_a_scan_of_calls_alone_still_gives_bashkits_reasons_to_a_later_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    tools = SimpleNamespace(name="tools")
    fake = SimpleNamespace(commands=[tools, tools], has_interpreter_reentry=False, truncated=False)
    analyzed: list[str] = []

    def analyze(script: str) -> Any:
        analyzed.append(script)
        return fake

    monkeypatch.setattr(plan_mod, "_analyzer", lambda: SimpleNamespace(analyze=analyze))
    script = "tools gh x  # round 2"
    calls = plan_mod.scanned_calls(script)
    assert analyzed == [] and [c.argv for c in calls] == [["gh", "x"]]
    found = plan_mod.scan(script)
    assert found.reasons == ["bashkit's parser sees 2 `tools` commands where this plan found 1"]
    assert found == plan_mod._scan(script) and analyzed == [script, script]


async def test_the_active_servers_are_worked_out_once_per_role_not_per_shell_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worked: list[str | None] = []
    real = catalog_memo.active_servers

    def counted(config: Config, role: str | None) -> Any:
        worked.append(role)
        return real(config, role)

    monkeypatch.setattr(catalog_memo, "active_servers", counted)
    async with Host.open(Config(), servers={"github": make_github([])}) as host:
        session = host.session()
        for i in range(4):
            await session.run(f"tools text-metrics text-length text={i}")
    assert worked == [None]


async def _catch_up_commits(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, big: str
) -> tuple[list[int], int]:
    """The objects each `Session.commit` of worker one's call handed over, after worker two's call
    changed a small file of a shell holding a file `big` writes; and a whole commit's count."""
    from toolshell.session import Session

    commits: list[int] = []
    real = Session.commit

    def counted(self: Session, have: Any = ()) -> Any:
        tip, objects = real(self, have)
        commits.append(len(objects) if have else -1)  # -1: a whole commit
        return tip, objects

    monkeypatch.setattr(Session, "commit", counted)
    keys = [new_key().encode()]
    store = open_store(store_url)
    async with (
        Host.open(state_dir=tmp_path / "one", store=store) as one_host,
        Host.open(state_dir=tmp_path / "two", store=store) as two_host,
    ):
        one, two = (
            Shells(h, ShellHandles(store, idle_seconds=3600, max_per_caller=8, max_bytes=1 << 22), keys)
            for h in (one_host, two_host)
        )
        first = await one.run(None, None, f"{big} > big; echo a > f; wc -c < big")
        handle = first.shell
        await two.run(None, handle, "echo b >> f")
        commits.clear()
        back = await one.run(None, handle, "cat f; wc -c < big")
        whole = len(real(one._live[handle].session)[1])
        one.close()
        two.close()
    store.close()
    assert back.stdout == "a\nb\n" + first.stdout
    return commits, whole


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_worker_catching_up_takes_what_the_newer_commit_lacks_from_what_it_saw_of_the_shell(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits, whole = await _catch_up_commits(store_url, tmp_path, monkeypatch, "seq 1 500")
    [saved] = commits  # no commit of the live shell to catch up: only the call's own save
    assert saved < 4 < whole


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_worker_catching_up_a_large_shell_takes_from_it_only_the_objects_the_newer_commit_lacks(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    noise = "for i in $(seq 1 12); do head -c 8000 /dev/urandom | base64; done"  # past `RECENT_BYTES`, compressed
    commits, whole = await _catch_up_commits(store_url, tmp_path, monkeypatch, noise)
    *lent, saved = commits
    assert lent and all(0 < n < whole for n in lent) and saved < whole, (commits, whole)


def test_a_shell_that_does_not_hold_a_wanted_object_says_so_and_the_store_is_read() -> None:
    shell = bashkit.Bash()
    packed = shell.commit()

    def lends_nothing(have: Any) -> tuple[str, dict[str, bytes]]:
        return packed.id, {}

    with pytest.raises(ToolshellError):
        Recent().objects_for(packed.id, {}, lends_nothing, list(packed.objects))


def test_the_objects_seen_lately_stay_within_their_bound() -> None:
    recent = Recent()
    recent.add({"a": b"x" * 40_000})
    recent.add({"b": b"y" * 40_000})  # past the bound: only the newest are kept
    recent.add({"c": b"z" * (RECENT_BYTES + 1)})  # alone past it: nothing is kept
    assert recent._objects == {} and recent._bytes == 0
    recent.reset({"d": b"w"})
    assert recent._objects == {"d": b"w"}
