"""The web page in a real headless browser: Debian's chromium driven by Playwright.

A person opens the printed URL, sees a pending request appear, clicks "once", and the call goes
on. The test also takes the README's screenshot (docs/images/web-page.png).

Set up with `bash scripts/install_browser.sh`; without chromium or Playwright the test is skipped.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn

from _github_server import make_github
from toolshell.config import load_text
from toolshell.frontends.web import web_app
from toolshell.frontends.web.serve import bind, url_for
from toolshell.host import Host
from toolshell.registry.entry import ToolEntry
from toolshell.scripts.store import ScriptStore

pytestmark = pytest.mark.anyio

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "images" / "web-page.png"
TOKEN = "browser-test-token-0123456789abcdef"
CONFIG = """
[tools_in_shell]
manage_scripts = true

[[triggers]]
name = "nightly-cleanup"
script = "cleanup-branches"
schedule = "0 3 * * *"
"""
WAIT_MS = 30_000

playwright_api = pytest.importorskip(
    "playwright.async_api", reason="Playwright is not installed (scripts/install_browser.sh)"
)
if shutil.which(CHROMIUM) is None:
    pytest.skip(f"{CHROMIUM} is missing; install it with scripts/install_browser.sh", allow_module_level=True)


async def _fill_history(host: Host) -> None:
    """Something in every section, for the screenshot: a saved script with a trigger run, a few runs."""
    ScriptStore(host.store).save(
        "cleanup-branches",
        "tools github list-pulls repo=acme/api | jq -r '.[].title'\n",
        "Print the titles of the open pull requests.",
    )
    await host.run_saved_script("cleanup-branches", {})
    await host.session(session_id="agent-7f3a").run("tools github get-pull repo=acme/api number=7 | jq .title")


async def test_a_person_sees_a_pending_request_appear_clicks_once_and_the_call_goes_on() -> None:
    calls: list[Any] = []
    script = "tools github list-pulls repo=acme/api > /dev/null; b=$(echo fix-x); tools github delete-branch branch=$b"
    async with Host.open(load_text(CONFIG), servers={"github": make_github(calls)}) as host:
        await _fill_history(host)
        sock = bind("127.0.0.1", 0)
        server = uvicorn.Server(uvicorn.Config(web_app(host, TOKEN), log_level="warning"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                await _drive_the_page(host, url_for("127.0.0.1", sock.getsockname()[1], TOKEN), script)
            finally:
                server.should_exit = True
        sock.close()
        again = await host.session(session_id="agent-7f3a").run(script)
    assert (again.exit_code, again.tools and again.tools["done"][0]["result"]) == (0, "deleted fix-x")
    assert calls.count(("delete-branch", {"branch": "fix-x"})) == 1


async def _drive_the_page(host: Host, url: str, script: str) -> None:
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(url)
            assert "token=" not in page.url, "the token is taken out of the address bar"
            await page.wait_for_selector("#approvals-empty:visible", timeout=WAIT_MS)

            stopped = await host.session(session_id="agent-7f3a").run(script)
            assert stopped.tools is not None and stopped.tools["stopped"]["reason"] == "needs_approval"
            [pending] = host.policy.approvals.list_pending()
            card = f'[data-request-id="{pending.id}"]'
            await page.wait_for_selector(card, timeout=WAIT_MS)  # it appears without a reload
            text = await page.inner_text(card)
            assert "tools github delete-branch" in text and '"branch": "fix-x"' in text and "destructive" in text
            await page.wait_for_selector('.nested-call:has-text("stopped_for_approval")', timeout=WAIT_MS)
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(SCREENSHOT), full_page=True)

            # What a server or script wrote is shown as text, with hidden characters made visible.
            hostile = host.policy.approvals.request(
                ToolEntry("github", "delete-branch", "", annotations={"destructiveHint": True}),
                {"branch": "<img src=x onerror=alert(1)>\u202egnp.exe"},
                "agent-evil",
                "destructive",
            )
            shown = await page.wait_for_selector(f'[data-request-id="{hostile.id}"]', timeout=WAIT_MS)
            assert shown is not None and await shown.query_selector("img") is None
            assert "<img src=x onerror=alert(1)>\\u202egnp.exe" in await shown.inner_text()

            await page.click(f"{card} button.once")
            await page.wait_for_selector(card, state="detached", timeout=WAIT_MS)
            await page.wait_for_selector('#grants-table:has-text("tools github delete-branch")', timeout=WAIT_MS)
        finally:
            await browser.close()
    assert host.policy.approvals.get(pending.id).status == "granted_once"
    assert [r.id for r in host.policy.approvals.list_pending()] == [hostile.id]
    assert [(g["kind"], g["input"]) for g in host.policy.approvals.list_grants()] == [("once", {"branch": "fix-x"})]
