"""The web page in a real headless browser: Debian's chromium driven by Playwright.

A person opens the printed URL, sees a pending request appear, clicks "once", and the waiting
`bash` call goes on: under `[approval] wait_for = "store"` the call waits, parked, for the answer
given on the page. The page takes its token from the URL's fragment and sends it in a header;
no cookie is ever set. What a server wrote is shown escaped by the same rule as the CLI
(`toolshell.safe_text`). The test also takes the README's screenshot (docs/images/web-page.png).

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
from toolshell.result import RunResult
from toolshell.safe_text import HIDDEN, LAYOUT, escape_lines
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

[approval]
wait_for = "store"   # the agent's call waits, parked, for the answer given on the page
wait_seconds = 120

[[triggers]]
name = "nightly-cleanup"
script = "cleanup-branches"
schedule = "0 3 * * *"
"""
WAIT_MS = 60_000
BOUND_SECONDS = 120
SCRIPT = (
    "tools github list-pulls repo=acme/api > /dev/null; b=$(echo fix-x); tools github delete-branch branch=$b; "
    "echo after the call"
)

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


async def test_a_person_sees_a_pending_request_appear_clicks_once_and_the_waiting_call_goes_on() -> None:
    calls: list[Any] = []
    async with Host.open(load_text(CONFIG), servers={"github": make_github(calls)}) as host:
        await _fill_history(host)
        sock = bind("127.0.0.1", 0)
        server = uvicorn.Server(uvicorn.Config(web_app(host, TOKEN), log_level="warning"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                result = await _drive_the_page(host, url_for("127.0.0.1", sock.getsockname()[1], TOKEN), calls)
            finally:
                server.should_exit = True
        sock.close()
    assert (result.exit_code, result.stdout) == (0, "deleted fix-x\nafter the call\n")
    assert calls.count(("delete-branch", {"branch": "fix-x"})) == 1


async def _drive_the_page(host: Host, url: str, calls: list[Any]) -> RunResult:
    """Open the page, start the waiting `bash` run, answer it "once" on the page; the run's result."""
    results: list[RunResult] = []
    finished = anyio.Event()

    async def run_the_script() -> None:  # the agent's `bash` call: it waits, parked, for the answer
        results.append(await host.session(session_id="agent-7f3a").run(SCRIPT))
        finished.set()

    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(url)
            await page.wait_for_selector("#approvals-empty:visible", timeout=WAIT_MS)
            assert "token=" not in page.url, "the token is taken out of the address bar"
            assert await page.context.cookies() == [], "no cookie: another port of 127.0.0.1 would get it"
            await _escapes_as_python_does(page)
            with anyio.fail_after(BOUND_SECONDS):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(run_the_script)
                    request_id, hostile_id = await _answer_once(host, page, calls)
                    await finished.wait()
            await page.wait_for_selector(f'[data-request-id="{request_id}"]', state="detached", timeout=WAIT_MS)
            ran = '.nested-call:has-text("delete-branch"):has-text("completed")'
            await page.wait_for_selector(ran, timeout=WAIT_MS)  # the timeline shows the call that ran
            await page.reload()  # the token survives a reload in the tab's sessionStorage, not in a cookie
            await page.wait_for_selector(f'[data-request-id="{hostile_id}"]', timeout=WAIT_MS)
            assert "token=" not in page.url and await page.context.cookies() == []
        finally:
            await browser.close()
    [result] = results
    assert host.policy.approvals.get(request_id).status == "granted_once"
    assert host.policy.approvals.list_grants() == [], "the once grant is used up by the call it was for"
    assert [r.id for r in host.policy.approvals.list_pending()] == [hostile_id]
    return result


async def _escapes_as_python_does(page: Any) -> None:
    """The page's escaper, fed every character `safe_text` hides (and tab and newline, which both
    keep as layout), spells them exactly as `safe_text.escape_lines` does: one rule, not two."""
    sample = "".join(
        chr(c) + "a"
        for first, last in HIDDEN
        for c in range(first, last + 1)
        if not 0xD800 <= c <= 0xDFFF  # lone surrogates cannot cross into the page as a string
    )
    assert {0x09, 0x0A} == LAYOUT and "\t" in sample
    assert await page.evaluate("text => safe(text)", sample) == escape_lines(sample)


async def _answer_once(host: Host, page: Any, calls: list[Any]) -> tuple[str, str]:
    """While the run waits: the request appears without a reload, is shown safely, and "once" is clicked.

    Returns the ids of that request and of a hostile one left pending."""
    shown = await page.wait_for_selector("[data-request-id]", timeout=WAIT_MS)  # it appears without a reload
    request_id = await shown.get_attribute("data-request-id")
    card = f'[data-request-id="{request_id}"]'
    text = await page.inner_text(card)
    assert "tools github delete-branch" in text and '"branch": "fix-x"' in text and "destructive" in text
    assert host.policy.approvals.get(request_id).status == "pending"
    assert ("delete-branch", {"branch": "fix-x"}) not in calls, "the call waits for the person"
    await page.wait_for_selector('#timeline-table td:text-is("running")', timeout=WAIT_MS)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOT), full_page=True)

    # What a server or script wrote is shown as text, with hidden characters made visible.
    hostile = host.policy.approvals.request(
        ToolEntry("github", "delete\u200bbranch", "", annotations={"destructiveHint": True}),
        {"branch": "<img src=x onerror=alert(1)>\u202egnp.exe\u2028main"},
        "agent-evil",
        "destructive",
        "deletes\u200b the \u202ebranch",
    )
    evil = await page.wait_for_selector(f'[data-request-id="{hostile.id}"]', timeout=WAIT_MS)
    assert evil is not None and await evil.query_selector("img") is None
    shown = await evil.inner_text()
    assert "tools github delete\\u200bbranch" in shown
    assert "<img src=x onerror=alert(1)>\\u202egnp.exe\\u2028main" in shown
    assert "deletes\\u200b the \\u202ebranch" in shown
    assert not {"\u200b", "\u202e", "\u2028"} & set(shown)

    await page.click(f"{card} button.once")
    return request_id, hostile.id
