"""The web page in a real headless browser: Debian's chromium driven by Playwright.

A person opens the printed URL, sees a pending request appear, clicks "once", and the waiting
`bash` call goes on: under `[approval] wait_for = "store"` the call waits, parked, for the answer
given on the page. The page takes its token from the URL's fragment and sends it in a header;
no cookie is ever set. What a server wrote is shown escaped by the same rule as the CLI
(`toolshell.safe_text`). The test also takes the README's screenshot (docs/images/web-page.png).

With real use the page must stay usable: a saved script's run output and typed input survive the
list's redraws, every section is in the first screen or one click away with a long history, the
statistics table renders `GET /api/stats` (and hides where the endpoint is missing), and the icon
loads under the page's own Content-Security-Policy.

Set up with `bash scripts/install_browser.sh`; without chromium or Playwright the tests are skipped
(under CI they fail). The screenshot goes to the test's temporary directory; with
`TOOLSHELL_UPDATE_SCREENSHOTS=1` it also replaces the README's image, so a test run leaves the
checkout as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn

from _ci_support import requires
from _github_server import make_github
from toolshell.config import Config, load_text
from toolshell.frontends.web import web_app
from toolshell.frontends.web.serve import bind, url_for
from toolshell.host import Host
from toolshell.registry.entry import ToolEntry
from toolshell.result import RunResult
from toolshell.safe_text import HIDDEN, LAYOUT, escape_lines
from toolshell.scripts.store import ScriptStore
from toolshell.timeline.address import calling_from

try:
    from playwright import async_api as playwright_api
except ImportError:  # the marks below skip (or, under CI, fail) every test of the file
    playwright_api = None  # type: ignore[assignment]

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.anyio,
    requires(playwright_api is not None, reason="Playwright is not installed (scripts/install_browser.sh)"),
    requires(shutil.which(CHROMIUM), reason=f"{CHROMIUM} is missing; install it with scripts/install_browser.sh"),
]
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
UPDATE_SCREENSHOTS = "TOOLSHELL_UPDATE_SCREENSHOTS"
"""Set to 1 to replace the README's screenshot with the one the test takes."""
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


async def _fill_history(host: Host) -> None:
    """Something in every section, for the screenshot: a saved script with a trigger run, a few runs."""
    ScriptStore(host.store).save(
        "cleanup-branches",
        "tools github list-pulls repo=acme/api | jq -r '.[].title'\n",
        "Print the titles of the open pull requests.",
    )
    await host.run_saved_script("cleanup-branches", {})
    await host.session(session_id="agent-7f3a").run("tools github get-pull repo=acme/api number=7 | jq .title")


async def test_a_person_sees_a_pending_request_appear_clicks_once_and_the_waiting_call_goes_on(tmp_path: Path) -> None:
    calls: list[Any] = []
    async with Host.open(load_text(CONFIG), servers={"github": make_github(calls)}) as host:
        await _fill_history(host)
        sock = bind("127.0.0.1", 0)
        server = uvicorn.Server(uvicorn.Config(web_app(host, TOKEN), log_level="warning"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                url = url_for("127.0.0.1", sock.getsockname()[1], TOKEN)
                result = await _drive_the_page(host, url, calls, tmp_path / SCREENSHOT.name)
            finally:
                server.should_exit = True
        sock.close()
    assert (result.exit_code, result.stdout) == (0, "deleted fix-x\nafter the call\n")
    assert calls.count(("delete-branch", {"branch": "fix-x"})) == 1
    taken = (tmp_path / SCREENSHOT.name).read_bytes()
    assert taken.startswith(b"\x89PNG\r\n\x1a\n"), "the screenshot is a PNG"
    if os.environ.get(UPDATE_SCREENSHOTS) == "1":
        SCREENSHOT.write_bytes(taken)


async def _drive_the_page(host: Host, url: str, calls: list[Any], screenshot: Path) -> RunResult:
    """Open the page, start the waiting `bash` run, answer it "once" on the page; the run's result."""
    results: list[RunResult] = []
    finished = anyio.Event()

    async def run_the_script() -> None:  # the agent's `bash` call: it waits, parked, for the answer
        with calling_from("203.0.113.9"):  # as `serve --http` records the request's address
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
                    request_id, hostile_id = await _answer_once(host, page, calls, screenshot)
                    await finished.wait()
            await page.wait_for_selector(f'[data-request-id="{request_id}"]', state="detached", timeout=WAIT_MS)
            ran = '.nested-call:has-text("delete-branch"):has-text("completed")'
            await page.wait_for_selector(ran, timeout=WAIT_MS)  # the timeline shows the call that ran
            # The shell call's row says where its caller was.
            await page.wait_for_selector('#timeline-table td:text-is("agent from 203.0.113.9")', timeout=WAIT_MS)
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


async def _answer_once(host: Host, page: Any, calls: list[Any], screenshot: Path) -> tuple[str, str]:
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
    await page.screenshot(path=str(screenshot), full_page=True)

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


# --- the page with real use ------------------------------------------------------------------------

VIEWPORT = {"width": 1280, "height": 900}
DOUBLE_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@asynccontextmanager
async def _served(host: Host) -> AsyncIterator[str]:
    """`toolshell web` over `host` on a free loopback port: its printed URL."""
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(web_app(host, TOKEN), log_level="warning"))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                yield url_for("127.0.0.1", sock.getsockname()[1], TOKEN)
            finally:
                server.should_exit = True
    finally:
        sock.close()


@asynccontextmanager
async def _browser() -> AsyncIterator[Any]:
    """A fresh page of headless chromium, 1280×900."""
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield await browser.new_page(viewport=VIEWPORT)
        finally:
            await browser.close()


async def test_a_saved_scripts_run_output_and_typed_input_stay_when_new_runs_redraw_the_scripts_list() -> None:
    async with Host.open(Config(), servers={"github": make_github([])}) as host:
        scripts = ScriptStore(host.store)
        scripts.save("double", "jq '.n * 2'\n", "Double n.", DOUBLE_SCHEMA)
        scripts.save("greet", "echo hi\n", "Say hi.")
        double, greet = '[data-script="double"]', '[data-script="greet"]'
        async with _served(host) as url, _browser() as page:
            await page.goto(url)
            await page.wait_for_selector(f'{double} :text("trigger runs: none yet")', timeout=WAIT_MS)
            await page.fill(f"{greet} input", '{"typed": "not run yet"}')
            await page.fill(f"{double} input", '{"n": 2}')
            await page.click(f"{double} button.run")
            await page.focus(f"{greet} input")
            # The run is recorded, so /api/scripts changed and the list redrew with it.
            await page.wait_for_selector(f'{double} .meta:text-matches("trigger runs: .* exit 0")', timeout=WAIT_MS)
            await _shows_the_run(page, double, greet)
            # Another run, from elsewhere, redraws the list again: still there.
            await host.run_saved_script("greet", {})
            await page.wait_for_selector(f'{greet} .meta:text-matches("trigger runs: .* exit 0")', timeout=WAIT_MS)
            await _shows_the_run(page, double, greet)
            focused = await page.evaluate("document.activeElement.closest('[data-script]')?.dataset.script")
            assert focused == "greet", "the box being typed in keeps the caret through the redraws"


async def _shows_the_run(page: Any, double: str, greet: str) -> None:
    result = await page.wait_for_selector(f"{double} pre.result:visible", timeout=WAIT_MS)
    shown = json.loads(await result.inner_text())
    assert (shown["script"], shown["exit_code"], shown["stdout"]) == ("double", 0, "4\n")
    assert await page.input_value(f"{double} input") == '{"n": 2}'
    assert await page.input_value(f"{greet} input") == '{"typed": "not run yet"}'


async def _fill_long_history(host: Host, shell_calls: int) -> None:
    """A day's use: shell calls with nested tool calls, a saved script and a pending request."""
    ScriptStore(host.store).save("cleanup-branches", "tools github list-pulls repo=acme/api\n", "List the pulls.")
    for i in range(shell_calls):
        await host.session(session_id=f"agent-{i % 3}").run(
            f"tools github get-pull repo=acme/api number=7 | jq .title; tools github search-code query=q{i} >/dev/null"
        )
    await host.run("tools github delete-branch branch=stale")  # stops; its request waits on the page


SECTIONS = ["approvals", "servers", "scripts", "grants", "timeline"]


async def test_with_a_long_history_every_section_is_in_the_first_screen_or_one_click_away() -> None:
    async with Host.open(Config(), servers={"github": make_github([])}) as host:
        await _fill_long_history(host, 50)
        async with _served(host) as url, _browser() as page:
            await page.goto(url)
            await page.wait_for_selector("#timeline-table tr.nested-call", timeout=WAIT_MS)
            await page.wait_for_selector('#servers-table td:text-is("github")', timeout=WAIT_MS)
            await page.wait_for_selector("[data-request-id]", timeout=WAIT_MS)
            assert await page.locator("#timeline-table > tbody > tr").count() >= 60, "a long history is shown"
            header = await page.locator("header").bounding_box()
            for section in SECTIONS:
                await page.evaluate("window.scrollTo(0, 0)")
                heading = page.locator(f"#{section} h2")
                box = await heading.bounding_box()
                if box["y"] + box["height"] > VIEWPORT["height"]:  # below the first screen: one click away
                    await page.click(f'nav a[href="#{section}"]')
                    box = await heading.bounding_box()
                assert header["height"] <= box["y"] and box["y"] + box["height"] <= VIEWPORT["height"], section
            timeline = await page.locator("#timeline-scroll").evaluate("e => [e.clientHeight, e.scrollHeight]")
            assert timeline[0] <= VIEWPORT["height"] < timeline[1], "the timeline scrolls in its own bounded box"
            height = await page.evaluate("document.documentElement.scrollHeight")
            assert height < 2 * VIEWPORT["height"], f"the page is {height} px tall"
            await page.click("#timeline-more")  # older calls, a page at a time
            # The 31st shell-call row appears (a locator wait: the page's CSP forbids evaluated strings).
            await page.locator("#timeline-table > tbody > tr:not(.nested-call)").nth(30).wait_for(timeout=WAIT_MS)


STATS = {
    "since": 1_780_000_000,
    "rows": [
        {
            "server": "github",
            "tool": "get-pull",
            "calls": 50,
            "errors": {"invalid_input": 2, "timeout": 1},
            "approvals_asked": 0,
            "p50_ms": 3.25,
            "p95_ms": 41.0,
            "max_ms": 1250.0,
        },
        {
            "server": None,
            "tool": "<img src=x onerror=alert(1)>\u202egnp.exe",
            "calls": 1,
            "errors": {"denied\u200b": 1},
            "approvals_asked": 1,
            "p50_ms": 0.5,
            "p95_ms": 0.5,
            "max_ms": 0.5,
        },
    ],
}


async def test_the_statistics_section_renders_the_stats_endpoint_escaped_and_hides_where_it_is_missing() -> None:
    async with Host.open(Config(), servers={"github": make_github([])}) as host:
        async with _served(host) as url, _browser() as page:
            seen: list[str | None] = []

            async def stats(route: Any) -> None:
                seen.append(await route.request.header_value("x-toolshell-token"))
                await route.fulfill(status=200, content_type="application/json", body=json.dumps(STATS))

            await page.route("**/api/stats", stats)
            await page.goto(url)
            await page.wait_for_selector("#stats-table tbody tr", timeout=WAIT_MS)
            rows = await page.locator("#stats-table tbody tr").evaluate_all(
                "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
            )
            assert rows == [
                ["github", "get-pull", "50", "invalid_input 2, timeout 1", "0", "3.3 ms", "41 ms", "1.3 s"],
                ["-", "<img src=x onerror=alert(1)>\\u202egnp.exe", "1", "denied\\u200b 1", "1"] + ["0.5 ms"] * 3,
            ]
            assert await page.locator("#stats-table img").count() == 0
            assert (await page.inner_text("#stats-since")).startswith("since ")
            assert await page.locator('nav a[href="#stats"]').is_visible()
            assert seen and set(seen) == {TOKEN}, "asked with the token in its header, like every API call"

            # Before the endpoint exists (a 404 as the router answers it), the section is not shown
            # and the rest of the page works.
            await page.unroute("**/api/stats")
            await page.route("**/api/stats", lambda route: route.fulfill(status=404, body="Not Found"))
            await page.reload()
            await page.wait_for_selector('#servers-table td:text-is("github")', timeout=WAIT_MS)
            await page.wait_for_selector("#stats", state="hidden", timeout=WAIT_MS)
            assert not await page.locator('nav a[href="#stats"]').is_visible()
            assert await page.inner_text("#status") != "" and "cannot reach" not in await page.inner_text("#status")


async def test_the_icon_loads_under_the_pages_own_content_security_policy() -> None:
    async with Host.open(Config(), servers={"github": make_github([])}) as host:
        async with _served(host) as url, _browser() as page:
            refused: list[str] = []
            page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
            await page.goto(url)
            href = await page.get_attribute('link[rel="icon"]', "href")
            size = await page.evaluate(
                """href => new Promise((done) => {
                    const img = new Image();
                    img.onload = () => done([img.naturalWidth, img.naturalHeight]);
                    img.onerror = () => done(null);
                    img.src = href;
                })""",
                href,
            )
            assert size is not None and size[0] > 0 and size[1] > 0, f"the icon {href} did not load as an image"
            assert refused == []
