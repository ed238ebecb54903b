"""`WWW-Authenticate` read by the one-pass tokenizer (RFC 9110 §11.6.1), and bounded."""

from __future__ import annotations

import httpx2
import pytest

from toolshell.connections import auth_params
from toolshell.connections.auth_params import Challenge, parse
from toolshell.connections.http import describe_challenge


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ('Bearer realm="x", error="invalid_token"', [Challenge("bearer", {"realm": "x", "error": "invalid_token"})]),
        (
            'Bearer error_description="say \\"hi\\" \\\\ bye"',
            [Challenge("bearer", {"error_description": 'say "hi" \\ bye'})],
        ),
        (
            'Basic realm="a, b", Bearer scope="s t"',
            [Challenge("basic", {"realm": "a, b"}), Challenge("bearer", {"scope": "s t"})],
        ),
        ("Negotiate abc+/def==, Bearer", [Challenge("negotiate", token68="abc+/def=="), Challenge("bearer")]),
        ("Bearer  Scope = read ,error=x", [Challenge("bearer", {"scope": "read", "error": "x"})]),
        ('Bearer scope="first", scope="second"', [Challenge("bearer", {"scope": "first"})]),
        ('Bearer error="unterminated', [Challenge("bearer", {"error": "unterminated"})]),
        ('"junk" ,, Bearer error=x @@@, scope=y', [Challenge("bearer", {"error": "x", "scope": "y"})]),
        ("", []),
    ],
)
def test_a_header_is_read_into_its_challenges(header: str, expected: list[Challenge]) -> None:
    assert parse(header).items == expected


def test_only_the_first_8_kib_are_read_and_the_reason_says_the_rest_was_ignored() -> None:
    header = 'Bearer error="invalid_token", error_description="' + "a" * 90_000 + '", scope="late"'
    read = parse(header)
    assert read.cut and read.param("scope") is None and read.param("error") == "invalid_token"
    assert describe_challenge(header) == ('invalid_token: "' + "a" * 183 + "…; WWW-Authenticate past 8 KiB ignored")


def test_the_header_the_sdk_reads_is_the_bearer_challenge_with_its_own_parameters_first() -> None:
    header = (
        'Basic realm="r", Bearer error_description="scope=admin", realm="x", scope="read", error="insufficient_scope"'
    )
    response = httpx2.Response(403, headers={"WWW-Authenticate": header})
    auth_params.tame(response)
    assert response.headers["WWW-Authenticate"] == (
        'Bearer error="insufficient_scope", scope="read", error_description="scope=admin"'
    )
    assert auth_params.sent_challenge(response) == header
