"""`toolshell triggers serve` never serves a webhook open by mistake: one without `secret_env` is
refused at start unless it says `allow_unauthenticated = true`. Exercised as found: the owner
(root) runs the server on 127.0.0.1 and a second local account (`nobody`) posts with curl."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from _net_support import free_port
from _serve_auth_support import Outsider, outsider, toolshell_exe, wait_for_port
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.scripts import Trigger, tokens_from_env

__all__ = ["outsider"]  # the fixture, imported for pytest
OPEN = '[[triggers]]\nname = "deploy"\nscript = "deploy"\nwebhook = true\n'
GUARDED = '[[triggers]]\nname = "guarded"\nscript = "deploy"\nwebhook = true\nsecret_env = "HOOK_TOKEN"\n'
ALLOWED = '[[triggers]]\nname = "ping"\nscript = "deploy"\nwebhook = true\nallow_unauthenticated = true\n'


@contextmanager
def triggers_serve(directory: Path, config: str) -> Iterator[tuple[subprocess.Popen[str], str, int]]:
    """`toolshell triggers serve` in its own process; yields it with its first stderr line."""
    (directory / "t.toml").write_text(config)
    port = free_port()
    argv = [toolshell_exe(), "triggers", "serve", "--config", str(directory / "t.toml"), "--port", str(port)]
    env = {**os.environ, "HOOK_TOKEN": "the-hook-token"}
    proc = subprocess.Popen(
        [*argv, "--state-dir", str(directory / "state")], stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stderr is not None
        yield proc, proc.stderr.readline(), port  # the start line, or the error it exits with
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_webhook_without_secret_env_is_refused_at_start_naming_secret_env(tmp_path: Path, outsider: Outsider) -> None:
    with triggers_serve(tmp_path, OPEN) as (proc, first_line, port):
        if "webhooks at" in first_line:  # it started open: show what that lets another account do
            wait_for_port(port)
            fired = outsider.run("curl", "-s", "-X", "POST", f"http://127.0.0.1:{port}/hooks/deploy")
            pytest.fail(f"triggers serve started an open webhook; nobody fired it: {fired.stdout}")
        code = proc.wait(30)
    error = json.loads(first_line)["error"]
    assert code == 1
    assert error["code"] == "invalid_input"
    assert "webhook trigger 'deploy' has no secret_env" in error["message"]
    assert "allow_unauthenticated = true" in error["message"]


def test_a_second_local_account_fires_only_the_webhook_that_allows_it(outsider: Outsider) -> None:
    with triggers_serve(outsider.directory, GUARDED + ALLOWED) as (_, first_line, port):
        assert "webhooks at" in first_line, first_line
        wait_for_port(port)
        base = f"http://127.0.0.1:{port}/hooks"
        status = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"]
        guarded = outsider.run(*status, f"{base}/guarded")
        guessed = outsider.run(*status, "-H", "Authorization: Bearer guess", f"{base}/guarded")
        allowed = outsider.run(*status, f"{base}/ping")
    assert (guarded.stdout, guessed.stdout) == ("401", "401")
    assert allowed.stdout == "200", "allow_unauthenticated = true serves that one webhook open, as configured"


def test_allow_unauthenticated_with_a_secret_env_is_a_contradiction_in_the_config() -> None:
    from toolshell.config.triggers import TriggerConfig

    with pytest.raises(ValueError, match="allow_unauthenticated = true and secret_env contradict"):
        TriggerConfig(name="t", script="s", webhook=True, secret_env="X", allow_unauthenticated=True)


def test_the_start_check_passes_a_webhook_that_allows_unauthenticated_calls_and_refuses_one_that_does_not() -> None:
    assert tokens_from_env([Trigger("ping", "s", webhook=True, allow_unauthenticated=True)], {}) == {}
    with pytest.raises(ToolshellError) as info:
        tokens_from_env([Trigger("deploy", "s", webhook=True)], {})
    assert info.value.code == ErrorCode.INVALID_INPUT and "secret_env" in info.value.message
