"""Timeline events: the `tool.nested_call` shape, input previews, and outcomes."""

from __future__ import annotations

import pytest

from toolshell.timeline import NestedCall, ShellCall, is_secret_key, outcome_for, preview, script_preview


def test_preview_is_canonical_json_with_sorted_keys_and_no_spaces():
    assert preview({"state": "open", "repo": "acme/api", "n": [1, 2]}) == '{"n":[1,2],"repo":"acme/api","state":"open"}'


def test_preview_keeps_non_ascii_text_readable():
    assert preview({"title": "Grüße"}) == '{"title":"Grüße"}'


def test_preview_cuts_long_input_to_the_limit_ending_with_an_ellipsis():
    text = preview({"body": "x" * 300})
    assert len(text) == 120
    assert text == '{"body":"' + "x" * 110 + "…"


def test_preview_takes_a_custom_limit():
    assert preview({"body": "abcdefghij"}, limit=10) == '{"body":"…'


def test_preview_at_exactly_the_limit_is_not_cut():
    exact = {"k": "v" * 112}  # {"k":"…"} is 8 characters of framing
    assert preview(exact) == '{"k":"' + "v" * 112 + '"}'


@pytest.mark.parametrize(
    "key", ["token", "access_token", "Password", "passwd", "client-secret", "api_key", "apiKey", "API-KEY",
            "Authorization", "credentials", "private_key", "Cookie"],
)  # fmt: skip
def test_secret_looking_keys_are_recognised_whatever_their_case_or_separators(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["repo", "author", "title", "number", "keys", "passage"])
def test_ordinary_keys_are_not_taken_for_secrets(key):
    assert not is_secret_key(key)


def test_preview_masks_secret_values_at_any_depth_and_in_lists():
    value = {
        "repo": "acme/api",
        "auth": {"Authorization": "Bearer abc", "user": "ann"},
        "items": [{"password": "hunter2", "name": "x"}],
        "api_key": ["k1", "k2"],
    }
    assert preview(value, limit=500) == (
        '{"api_key":"***","auth":{"Authorization":"***","user":"ann"},'
        '"items":[{"name":"x","password":"***"}],"repo":"acme/api"}'
    )


def test_preview_leaves_counts_under_token_like_keys_visible():
    text = preview({"max_tokens": 100, "token": None, "secret": True})
    assert text == '{"max_tokens":100,"secret":true,"token":null}'


def test_preview_never_shows_a_secret_even_when_the_cut_would_fall_inside_it():
    text = preview({"a": "y" * 5, "token": "s3cr3t-value-that-is-long"}, limit=25)
    assert "s3cr3t" not in text
    assert text == '{"a":"yyyyy","token":"**…'


def test_preview_of_no_input_is_null():
    assert preview(None) == "null"


def test_script_preview_joins_lines_and_collapses_spaces():
    script = "tools github list-pulls   state=open\n\n  | jq -r '.[].number'\n"
    assert script_preview(script) == "tools github list-pulls state=open ⏎ | jq -r '.[].number'"


def test_script_preview_is_cut_to_its_limit():
    assert script_preview("echo " + "a" * 200, limit=20) == "echo aaaaaaaaaaaaaa…"


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (None, "completed"),
        ("tool_error", "failed"),
        ("invalid_input", "failed"),
        ("unknown_command", "failed"),
        ("connection_required", "failed"),
        ("unavailable", "failed"),
        ("denied", "refused"),
        ("call_limit", "refused"),
        ("stopped", "refused"),
        ("needs_approval", "stopped_for_approval"),
    ],
)
def test_each_error_code_maps_to_one_timeline_outcome(code, outcome):
    assert outcome_for(code) == outcome


def test_nested_call_event_has_its_type_and_every_field_in_its_dict():
    event = NestedCall("n1", "s1", "sess", "tools github get-pull", '{"number":7}', "failed", "tool_error", 12.5, 1.0)
    assert event.to_dict() == {
        "id": "n1",
        "shell_call_id": "s1",
        "session_id": "sess",
        "command": "tools github get-pull",
        "input_preview": '{"number":7}',
        "outcome": "failed",
        "error_code": "tool_error",
        "duration_ms": 12.5,
        "started_at": 1.0,
        "type": "tool.nested_call",
    }


def test_shell_call_event_has_its_type_and_every_field_in_its_dict():
    event = ShellCall("s1", "sess", "echo hi", 0, 2.0, 3.5, "cli")
    assert event.to_dict() == {
        "id": "s1",
        "session_id": "sess",
        "script_preview": "echo hi",
        "exit_code": 0,
        "started_at": 2.0,
        "duration_ms": 3.5,
        "source": "cli",
        "caller": None,
        "address": None,
        "worker": None,
        "ended_by": None,
        "type": "shell.call",
    }
