"""The webhook app, driven in-process over httpx2's ASGI transport."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx2
import pytest

from toolshell.frontends.webhook import webhook_app
from toolshell.scripts import ManualClock, RunOutcome, Trigger, TriggerRunner
from toolshell.scripts.claims import KEY_TTL, TriggerClaims
from toolshell.store.sqlite import Store

TOKEN = "s3cr3t-t0ken"


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []

    async def __call__(self, script: str, input: dict[str, Any], source: str) -> RunOutcome:
        self.calls.append((script, input, source))
        return RunOutcome(0, stdout=json.dumps(input) + "\n")


TRIGGERS = [
    Trigger("open", "echo-input", webhook=True, input={"repo": "acme/api", "n": 1}, allow_unauthenticated=True),
    Trigger("unguarded", "deploy", webhook=True),
    Trigger("guarded", "deploy", webhook=True, secret_env="DEPLOY_TOKEN"),
    Trigger("forgotten", "deploy", webhook=True, secret_env="UNSET_TOKEN"),
    Trigger("timer", "nightly", schedule="@daily"),
]


def _client(run: Recorder, base_url: str = "http://127.0.0.1:8765", **app_options: Any) -> httpx2.AsyncClient:
    runner = TriggerRunner(TRIGGERS, run, ManualClock(datetime(2025, 1, 1, tzinfo=UTC)))
    app = webhook_app(runner, {"guarded": TOKEN}, **app_options)
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=base_url)


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "retryable": False}}


@pytest.mark.anyio
async def test_a_post_runs_the_trigger_with_the_body_merged_over_its_input():
    run = Recorder()
    async with _client(run) as client:
        response = await client.post("/hooks/open", json={"n": 2, "extra": True})
    assert response.status_code == 200
    assert response.json() == {
        "trigger": "open",
        "script": "echo-input",
        "exit_code": 0,
        "success": True,
        "stdout": '{"repo": "acme/api", "n": 2, "extra": true}\n',
    }
    assert run.calls == [("echo-input", {"repo": "acme/api", "n": 2, "extra": True}, "trigger")]


@pytest.mark.anyio
async def test_a_post_without_a_body_runs_with_the_triggers_input():
    run = Recorder()
    async with _client(run) as client:
        response = await client.post("/hooks/open")
    assert response.status_code == 200
    assert run.calls == [("echo-input", {"repo": "acme/api", "n": 1}, "trigger")]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body",
    ["[1, 2]", '"text"', "{not json", b"\xff\xfe"],
)
async def test_a_body_that_is_not_a_json_object_is_refused_without_running(body):
    run = Recorder()
    async with _client(run) as client:
        response = await client.post("/hooks/open", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json() == _error("invalid_input", 'the body must be a JSON object, e.g. {"repo": "acme/api"}')
    assert run.calls == []


@pytest.mark.anyio
async def test_a_body_over_the_size_limit_gets_413():
    run = Recorder()
    async with _client(run, max_body_bytes=10) as client:
        response = await client.post(
            "/hooks/open", content=b'{"k": "' + b"x" * 20 + b'"}', headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 413
    assert response.json() == _error("invalid_input", "the body is larger than 10 bytes")
    assert run.calls == []


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["nope", "timer"])
async def test_an_unknown_or_schedule_only_trigger_is_a_404_json_error(name):
    run = Recorder()
    async with _client(run) as client:
        response = await client.post(f"/hooks/{name}")
    assert response.status_code == 404
    assert response.json() == _error("unknown_command", f"no webhook trigger named {name!r}")
    assert run.calls == []


@pytest.mark.anyio
async def test_other_paths_and_methods_get_json_errors_too():
    async with _client(Recorder()) as client:
        missing = await client.post("/elsewhere")
        wrong_method = await client.get("/hooks/open")
    assert (missing.status_code, missing.json()) == (
        404, _error("unknown_command", "webhooks are served at POST /hooks/<trigger>")
    )  # fmt: skip
    assert wrong_method.status_code == 405
    assert wrong_method.json() == _error("unknown_command", "webhooks are served at POST /hooks/<trigger>")


@pytest.mark.anyio
async def test_a_guarded_trigger_without_a_token_is_refused_with_401():
    run = Recorder()
    async with _client(run) as client:
        response = await client.post("/hooks/guarded")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == _error("denied", "this webhook needs the header 'Authorization: Bearer <token>'")
    assert run.calls == []


@pytest.mark.anyio
@pytest.mark.parametrize("header", [f"Basic {TOKEN}", "Bearer wrong", f"Bearer {TOKEN}x", "Bearer ümlaut"])
async def test_a_guarded_trigger_with_a_wrong_token_is_refused_and_the_token_is_never_echoed(header, caplog):
    run = Recorder()
    caplog.set_level(logging.DEBUG)
    async with _client(run) as client:
        response = await client.post("/hooks/guarded", headers={"Authorization": header.encode()})
    assert response.status_code == 401
    assert run.calls == []
    given = header.split(" ", 1)[1]
    for text in (response.text, caplog.text):
        assert TOKEN not in text
        assert given not in text


@pytest.mark.anyio
async def test_a_guarded_trigger_with_the_right_token_runs():
    run = Recorder()
    async with _client(run) as client:
        response = await client.post("/hooks/guarded", headers={"Authorization": f"bearer {TOKEN}"}, json={"v": 1})
    assert response.status_code == 200
    assert TOKEN not in response.text
    assert run.calls == [("deploy", {"v": 1}, "trigger")]


@pytest.mark.anyio
async def test_a_webhook_with_no_secret_env_that_does_not_allow_unauthenticated_is_never_run_open():
    run = Recorder()
    async with _client(run) as client:
        response = await client.post("/hooks/unguarded")
    assert response.status_code == 503
    assert response.json() == _error(
        "unavailable", "webhook 'unguarded' needs a token but none is configured on this host"
    )
    assert run.calls == []


@pytest.mark.anyio
async def test_a_guarded_trigger_whose_token_is_not_configured_fails_closed():
    run = Recorder()
    async with _client(run) as client:
        response = await client.post("/hooks/forgotten", headers={"Authorization": "Bearer anything"})
    assert response.status_code == 503
    assert response.json() == _error(
        "unavailable", "webhook 'forgotten' needs a token but none is configured on this host"
    )
    assert run.calls == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "base_url", ["http://localhost:9000", "http://127.0.0.1", "http://[::1]:9000", "http://127.0.0.2"]
)
async def test_loopback_host_names_are_served(base_url):
    async with _client(Recorder(), base_url=base_url) as client:
        response = await client.post("/hooks/open")
    assert response.status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize(
    "base_url", ["http://evil.example", "http://192.168.1.5:8000", "http://localhost.evil.example"]
)
async def test_other_host_names_are_refused_before_anything_runs(base_url):
    run = Recorder()
    async with _client(run, base_url=base_url) as client:
        response = await client.post("/hooks/open")
    host = httpx2.URL(base_url).host
    assert response.status_code == 403
    assert response.json() == _error(
        "denied", f"host {host!r} is not served; webhooks answer on loopback names unless the host is configured"
    )
    assert run.calls == []


@pytest.mark.anyio
async def test_a_configured_host_name_is_served():
    async with _client(Recorder(), base_url="http://hooks.internal:8000", allowed_hosts=["Hooks.Internal"]) as client:
        response = await client.post("/hooks/open")
    assert response.status_code == 200


def _origin_refusal(origin: str) -> dict[str, Any]:
    return _error(
        "denied",
        f"origin {origin!r} is not allowed; webhooks accept requests from web pages on loopback origins only"
        " unless the host is configured",
    )


@pytest.mark.anyio
async def test_a_cross_site_form_post_to_a_trigger_without_a_token_is_refused_before_anything_runs():
    run = Recorder()
    async with _client(run) as client:
        response = await client.post(
            "/hooks/open",
            content='{"repo": "evil/repo"}',
            headers={"Origin": "https://evil.example", "Content-Type": "text/plain"},
        )
    assert response.status_code == 403
    assert response.json() == _origin_refusal("https://evil.example")
    assert run.calls == []


@pytest.mark.anyio
@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost.evil.example", "garbage"])
async def test_a_foreign_origin_is_refused_even_with_a_json_body(origin):
    run = Recorder()
    async with _client(run) as client:
        response = await client.post("/hooks/open", json={"n": 2}, headers={"Origin": origin})
    assert response.status_code == 403
    assert response.json() == _origin_refusal(origin)
    assert run.calls == []


@pytest.mark.anyio
@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1:8765", "http://[::1]"])
async def test_a_loopback_origin_is_served(origin):
    run = Recorder()
    async with _client(run) as client:
        response = await client.post("/hooks/open", json={"n": 2}, headers={"Origin": origin})
    assert response.status_code == 200
    assert run.calls == [("echo-input", {"repo": "acme/api", "n": 2}, "trigger")]


@pytest.mark.anyio
async def test_an_origin_whose_host_is_configured_is_served():
    run = Recorder()
    async with _client(run, allowed_hosts=["hooks.internal"]) as client:
        response = await client.post("/hooks/open", headers={"Origin": "https://hooks.internal"})
    assert response.status_code == 200
    assert run.calls == [("echo-input", {"repo": "acme/api", "n": 1}, "trigger")]


@pytest.mark.anyio
async def test_accepting_any_host_still_refuses_a_foreign_origin():
    run = Recorder()
    async with _client(run, base_url="http://hooks.example", allowed_hosts=["*"]) as client:
        served = await client.post("/hooks/open")
        refused = await client.post("/hooks/open", headers={"Origin": "https://evil.example"})
    assert served.status_code == 200
    assert (refused.status_code, refused.json()) == (403, _origin_refusal("https://evil.example"))
    assert run.calls == [("echo-input", {"repo": "acme/api", "n": 1}, "trigger")]


@pytest.mark.anyio
@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_a_body_not_sent_as_json_gets_415_without_running(content_type):
    run = Recorder()
    headers = {"Content-Type": content_type} if content_type else {}
    async with _client(run) as client:
        response = await client.post("/hooks/open", content='{"repo": "evil/repo"}', headers=headers)
    assert response.status_code == 415
    assert response.json() == _error("invalid_input", "send the body with the header 'Content-Type: application/json'")
    assert run.calls == []


@pytest.mark.anyio
async def test_a_json_body_with_a_charset_parameter_is_accepted():
    run = Recorder()
    async with _client(run) as client:
        response = await client.post(
            "/hooks/open", content='{"n": 3}', headers={"Content-Type": "Application/JSON; charset=utf-8"}
        )
    assert response.status_code == 200
    assert run.calls == [("echo-input", {"repo": "acme/api", "n": 3}, "trigger")]


@pytest.mark.anyio
async def test_a_failing_run_is_reported_in_the_response():
    async def failing(script: str, input: dict[str, Any], source: str) -> RunOutcome:
        return RunOutcome(1, stdout="", stderr="boom\n", tools={"done": [], "read_only_calls": 2})

    runner = TriggerRunner(TRIGGERS, failing, ManualClock(datetime(2025, 1, 1, tzinfo=UTC)))
    transport = httpx2.ASGITransport(app=webhook_app(runner, {}))
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post("/hooks/open")
    assert response.status_code == 200
    assert response.json() == {
        "trigger": "open",
        "script": "echo-input",
        "exit_code": 1,
        "success": False,
        "stdout": "",
        "stderr": "boom\n",
        "tools": {"done": [], "read_only_calls": 2},
    }


# --- Idempotency-Key ---------------------------------------------------------------------------


def _keyed_client(runner: TriggerRunner) -> httpx2.AsyncClient:
    app = webhook_app(runner, {"guarded": TOKEN})
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8765")


def _runner(run: Any, claims: TriggerClaims | None = None) -> TriggerRunner:
    return TriggerRunner(TRIGGERS, run, ManualClock(datetime(2025, 1, 1, tzinfo=UTC)), claims)


@pytest.mark.anyio
async def test_a_repeat_with_the_same_idempotency_key_answers_the_first_outcome_without_running():
    run = Recorder()
    async with _keyed_client(_runner(run)) as client:
        first = await client.post("/hooks/open", json={"n": 2}, headers={"Idempotency-Key": "k-1"})
        again = await client.post("/hooks/open", json={"n": 2}, headers={"Idempotency-Key": "k-1"})
        other = await client.post("/hooks/open", json={"n": 2}, headers={"Idempotency-Key": "k-2"})
    assert (first.status_code, again.status_code, other.status_code) == (200, 200, 200)
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers and "idempotent-replayed" not in other.headers
    assert len(run.calls) == 2


@pytest.mark.anyio
async def test_an_idempotency_key_reused_with_another_body_gets_422_without_running():
    run = Recorder()
    async with _keyed_client(_runner(run)) as client:
        await client.post("/hooks/open", json={"n": 2}, headers={"Idempotency-Key": "k"})
        other = await client.post("/hooks/open", json={"n": 3}, headers={"Idempotency-Key": "k"})
    assert other.status_code == 422
    assert other.json() == _error(
        "invalid_input",
        "this Idempotency-Key was already used for a request with another body; send a new key for a new request",
    )
    assert len(run.calls) == 1


@pytest.mark.anyio
async def test_a_repeat_while_the_first_run_is_going_gets_409_then_the_outcome_once_it_ends():
    started, release = anyio.Event(), anyio.Event()
    calls: list[dict[str, Any]] = []

    async def slow(script: str, input: dict[str, Any], source: str) -> RunOutcome:
        calls.append(input)
        started.set()
        await release.wait()
        return RunOutcome(0, stdout="deployed\n")

    answers: list[httpx2.Response] = []
    key = {"Idempotency-Key": "deploy-42"}
    with anyio.fail_after(10):
        async with _keyed_client(_runner(slow)) as client:

            async def first() -> None:
                answers.append(await client.post("/hooks/open", headers=key))

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await started.wait()
                during = await client.post("/hooks/open", headers=key)
                release.set()
            after = await client.post("/hooks/open", headers=key)
    assert during.status_code == 409 and during.headers["retry-after"] == "5"
    assert during.json()["error"]["retryable"] is True
    assert "still going" in during.json()["error"]["message"]
    assert answers[0].status_code == 200 and answers[0].json()["stdout"] == "deployed\n"
    assert (after.status_code, after.json(), after.headers["idempotent-replayed"]) == (200, answers[0].json(), "true")
    assert len(calls) == 1


@pytest.mark.anyio
async def test_an_idempotency_key_runs_again_once_it_has_expired():
    run, store = Recorder(), Store(":memory:")
    async with _keyed_client(_runner(run, TriggerClaims(store))) as client:
        await client.post("/hooks/open", headers={"Idempotency-Key": "k"})
        store.execute("UPDATE trigger_claims SET claimed_at = claimed_at - ?", (KEY_TTL.total_seconds() + 1,))
        later = await client.post("/hooks/open", headers={"Idempotency-Key": "k"})
        repeat = await client.post("/hooks/open", headers={"Idempotency-Key": "k"})
    assert "idempotent-replayed" not in later.headers and repeat.headers["idempotent-replayed"] == "true"
    assert len(run.calls) == 2


@pytest.mark.anyio
async def test_a_stranger_without_the_token_gets_401_before_its_idempotency_key_is_looked_at():
    run = Recorder()
    async with _keyed_client(_runner(run)) as client:
        unauthenticated = await client.post("/hooks/guarded", headers={"Idempotency-Key": "x" * 300})
    assert unauthenticated.status_code == 401, "the token is checked first: keys are no oracle for strangers"
    assert run.calls == []
