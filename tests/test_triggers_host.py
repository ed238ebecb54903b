"""Triggers run saved scripts with no model: from config, by schedule and by webhook, recorded in the timeline."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx2
import pytest

from toolshell.config import Config
from toolshell.frontends.webhook import webhook_app
from toolshell.host import Host
from toolshell.scripts.clock import ManualClock
from toolshell.scripts.triggers import Trigger, TriggerRunner
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio

CONFIG = Config.model_validate(
    {
        "tools_in_shell": {"manage_scripts": True},
        "triggers": [
            {"name": "nightly", "script": "count", "schedule": "0 3 * * *", "input": {"text": "héllo"}},
            {"name": "hook", "script": "count", "webhook": True, "secret_env": "TOOLSHELL_TEST_HOOK_TOKEN"},
        ],
    }
)
SAVE = "echo 'tools text-metrics text-length text=\"$(jq -r .text)\"' | tools scripts save count"


def _triggers() -> list[Trigger]:
    return [Trigger.from_config(t) for t in CONFIG.triggers]


async def test_a_schedule_runs_the_saved_script_when_due_and_the_run_is_in_the_timeline() -> None:
    clock = ManualClock(datetime(2026, 11, 30, 2, 59))
    async with Host.open(CONFIG) as host:
        await host.run(SAVE)
        runner = TriggerRunner(_triggers(), host.run_saved_script, clock=clock)
        early = await runner.run_due(datetime(2026, 11, 30, 2, 59, 30))
        due = await runner.run_due(datetime(2026, 11, 30, 3, 0) + timedelta(seconds=1))
        rows = query(host.store)
    assert early == {}
    assert due["nightly"].stdout == "5\n" and due["nightly"].exit_code == 0
    assert rows[0]["source"] == "trigger"


async def test_a_webhook_needs_its_token_and_runs_the_script_with_the_body_as_input(monkeypatch) -> None:
    monkeypatch.setenv("TOOLSHELL_TEST_HOOK_TOKEN", "t0ken")
    async with Host.open(CONFIG) as host:
        await host.run(SAVE)
        runner = TriggerRunner(_triggers(), host.run_saved_script)
        app = webhook_app(runner, {"hook": "t0ken"})
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            refused = await http.post("/hooks/hook", json={"text": "abc"})
            ran = await http.post("/hooks/hook", json={"text": "abc"}, headers={"Authorization": "Bearer t0ken"})
    assert refused.status_code == 401 and "t0ken" not in refused.text
    assert ran.status_code == 200
    assert ran.json()["stdout"] == "3\n"


def test_a_trigger_with_a_bad_schedule_is_a_config_error() -> None:
    from toolshell.config import load_text
    from toolshell.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_text('[[triggers]]\nname = "x"\nscript = "y"\nschedule = "61 * * * *"\n')
    assert "triggers" in str(info.value) and "minute" in str(info.value)
