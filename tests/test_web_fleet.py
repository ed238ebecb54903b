# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""One web page for the fleet (issue 23 §3, issue 22 item 9): real `serve --http` workers on one
PostgreSQL share one page token that is never printed on the log line; the page shows every
worker's calls with a worker column; a worker killed with SIGKILL shows as lost, with the nested
call it had finished recorded."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from _serve_auth_support import GITHUB_CONFIG, client, serving, toolshell_exe
from _store_support import fresh_database, needs_postgres, postgres_server  # noqa: F401  (fixtures)
from toolshell.policy.approvals import Approvals
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
TOKEN = "serve-token-for-the-web-fleet-tests-0123456789"
CONFIG = GITHUB_CONFIG + '[approval]\nwait_for = "store"\nwait_seconds = 600\n[serve]\nheartbeat_seconds = 1\n'
# The second call is named by a variable, so the plan cannot hold the script before it starts: the
# read-only call runs, then the script waits for a person.
READ_THEN_WAIT = "tools github list-pulls repo=acme/api; t=delete-branch; tools github $t branch=doomed"


async def _until(check: Any, seconds: float = 30) -> Any:
    """Poll `check` (a store read) until it returns something true; bounded."""
    with anyio.fail_after(seconds):
        while not (found := check()):  # noqa: ASYNC110  (another process writes it: nothing to wait on here)
            await anyio.sleep(0.2)  # a poll, bounded above
    return found


def _pg(postgres_server: str | None) -> str:
    return fresh_database(needs_postgres(postgres_server))


def _env(url: str, **extra: str) -> dict[str, str]:
    return {"TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_KEYS": new_key(), "TOOLSHELL_STATE_URL": url, **extra}


def _page_token(state: Path) -> str:
    path = state / "web-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "the page token is the user's alone"
    return path.read_text().strip()


def _state(path: Path) -> Path:
    """A worker's own state dir (its config file goes next to it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _ui(url: str) -> str:
    return url.removesuffix("/mcp") + "/ui"


async def test_one_page_token_opens_every_workers_page_and_no_log_line_carries_it(
    postgres_server: str | None, tmp_path: Path
) -> None:
    env = _env(_pg(postgres_server))
    with (
        serving(_state(tmp_path / "one" / "state"), config=CONFIG, env=env) as one,
        serving(_state(tmp_path / "three" / "state"), config=CONFIG, env=env) as three,
    ):
        token = _page_token(one.state)
        async with client(one.url, TOKEN) as c:
            await c.call_tool("bash", {"script": "tools github list-pulls repo=acme/api"})
        async with client(three.url, TOKEN) as c:
            await c.call_tool("bash", {"script": "tools github get-pull repo=acme/api number=7"})
        async with httpx2.AsyncClient(timeout=30) as http:
            on_three = await http.get(f"{_ui(three.url)}/api/timeline", headers={"Authorization": f"Bearer {token}"})
            workers = await http.get(f"{_ui(three.url)}/api/workers", headers={"X-Toolshell-Token": token})
            stats = await http.get(f"{_ui(one.url)}/api/stats", headers={"X-Toolshell-Token": token})
            guessed = await http.get(f"{_ui(three.url)}/api/timeline", headers={"Authorization": "Bearer x" * 8})
            serve_token = await http.get(f"{_ui(three.url)}/api/timeline", headers={"Authorization": f"Bearer {TOKEN}"})
        logs = one.start_line + "".join(one.stderr) + three.start_line + "".join(three.stderr)
        cli = await anyio.run_process(
            [toolshell_exe(), "stats", "--json", "--state-dir", str(tmp_path / "cli")],
            env={**os.environ, "TOOLSHELL_STATE_URL": env["TOOLSHELL_STATE_URL"]},
        )
    assert _page_token(three.state) == token, "every worker of the store has the same page token"
    assert on_three.status_code == 200, on_three.text
    three_row, one_row = on_three.json()  # newest first: worker three's own call, then worker one's
    assert [c["command"] for c in one_row["calls"]] == ["tools github list-pulls"]
    assert one_row["worker"] != three_row["worker"], "each row names the worker that ran it"
    assert {w["id"] for w in workers.json()} == {one_row["worker"], three_row["worker"]}
    page_rows = {r["tool"]: r["calls"] for r in stats.json()["rows"]}
    assert page_rows == {"list-pulls": 1, "get-pull": 1}, "worker one's page counts worker three's call too"
    assert json.loads(cli.stdout) == stats.json(), "toolshell stats reads the same numbers from the shared store"
    assert {w["alive"] for w in workers.json()} == {True} and len(workers.json()) == 2
    assert [w["this"] for w in workers.json()].count(True) == 1
    assert (guessed.status_code, serve_token.status_code) == (401, 401), "the serve token is not the page token"
    assert token not in logs, "the page token is never printed on the log line"
    assert "/ui/" in one.start_line and str(one.state / "web-token") in one.start_line


async def test_a_worker_killed_after_a_read_only_call_shows_it_recorded_and_its_shell_call_lost(
    postgres_server: str | None, tmp_path: Path
) -> None:
    url = _pg(postgres_server)
    env = _env(url)
    look = open_store(url)
    with serving(_state(tmp_path / "first" / "state"), config=CONFIG, env=env) as first:
        async with anyio.create_task_group() as tg:

            async def doomed_call() -> None:
                try:
                    async with client(first.url, TOKEN) as c:
                        await c.call_tool("bash", {"script": READ_THEN_WAIT})
                except Exception:  # the worker dies under the call: the client sees the connection go
                    pass

            tg.start_soon(doomed_call)
            await _until(Approvals(look).list_pending)  # the script now waits, mid-run, for a person
            # The read-only call finished before the wait: it is in the store while the script still runs.
            [running] = await _until(lambda: [r for r in query(look) if r["calls"] and r["exit_code"] is None])
            first.proc.kill()  # SIGKILL: no clean-up of any kind
            first.proc.wait(10)
            tg.cancel_scope.cancel()
    with serving(_state(tmp_path / "second" / "state"), config=CONFIG, env=env) as second:
        lost = await _until(lambda: [r for r in query(look, outcome="lost") if r["id"] == running["id"]])
        token = _page_token(second.state)
        async with httpx2.AsyncClient(timeout=30, headers={"X-Toolshell-Token": token}) as http:
            shown = (await http.get(f"{_ui(second.url)}/api/timeline?outcome=lost")).json()
            by_server = (await http.get(f"{_ui(second.url)}/api/timeline?server=github&outcome=completed")).json()
            other = (await http.get(f"{_ui(second.url)}/api/timeline?server=gitlab")).json()
            bad = await http.get(f"{_ui(second.url)}/api/timeline?outcome=exploded")
            [waiting] = (await http.get(f"{_ui(second.url)}/api/approvals")).json()
    look.close()
    [row] = lost
    assert (row["exit_code"], row["ended_by"]) == (137, "worker_lost")
    assert [(c["command"], c["outcome"]) for c in row["calls"]] == [("tools github list-pulls", "completed")]
    assert [r["id"] for r in shown] == [row["id"]] and shown[0]["worker"] == running["worker"]
    assert [r["id"] for r in by_server] == [row["id"]] and other == []
    assert bad.status_code == 400 and "lost" in bad.json()["error"]["message"]
    assert (waiting["tool"], waiting["worker"]) == ("tools github delete-branch", running["worker"]), (
        "the dead worker's request is on the other worker's page, naming the worker it came from"
    )


async def test_serve_web_false_serves_no_page(postgres_server: str | None, tmp_path: Path) -> None:
    env = _env(_pg(postgres_server))
    with serving(tmp_path / "state", config=CONFIG + "web = false\n", env=env) as off:
        async with httpx2.AsyncClient(timeout=30) as http:
            page = await http.get(f"{_ui(off.url)}/")
            api = await http.get(f"{_ui(off.url)}/api/approvals", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (page.status_code, api.status_code) == (404, 404)
    assert "/ui/" not in off.start_line and not (off.state / "web-token").exists()


async def test_toolshell_web_token_names_the_fleets_page_token_and_a_short_one_is_refused(
    postgres_server: str | None, tmp_path: Path
) -> None:
    url = _pg(postgres_server)
    chosen = "a-page-token-chosen-by-the-operator-0123456789"
    with serving(tmp_path / "state", config=CONFIG, env=_env(url, TOOLSHELL_WEB_TOKEN=chosen)) as served:
        async with httpx2.AsyncClient(timeout=30) as http:
            api = await http.get(f"{_ui(served.url)}/api/approvals", headers={"Authorization": f"Bearer {chosen}"})
    assert api.status_code == 200 and _page_token(served.state) == chosen
    with pytest.raises(AssertionError, match="TOOLSHELL_WEB_TOKEN is 5 characters"):
        with serving(_state(tmp_path / "short" / "state"), config=CONFIG, env=_env(url, TOOLSHELL_WEB_TOKEN="short")):
            pass


def test_the_page_token_file_replaces_a_link_planted_in_its_place_instead_of_writing_through_it(
    tmp_path: Path,
) -> None:
    from toolshell.frontends.web.serve import write_private

    target = tmp_path / "elsewhere"
    target.write_text("untouched\n")
    os.symlink(target, tmp_path / "web-token")
    write_private(tmp_path / "web-token", "the-token")
    assert target.read_text() == "untouched\n"
    assert not (tmp_path / "web-token").is_symlink() and (tmp_path / "web-token").read_text() == "the-token\n"
