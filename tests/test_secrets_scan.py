"""`secrets_scan.find_credentials`: credential shapes (detect-secrets' plugins, run on RE2) found
in any text, each as the span of the credential alone and its kind."""

from __future__ import annotations

import re

import pytest

from toolshell.policy import credentials
from toolshell.policy.credentials import masker
from toolshell.secrets_scan import Credential, _patterns, find_credentials, kinds

AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
OPENAI = "sk-proj-" + "abcdEFGHijklMNOPqrst" + "T3BlbkFJ" + "uvwxYZabcdEFGHijklMN"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjaS1ib3QiLCJpYXQiOjE3MDAwMDAwMDB9."
    "k3lmiV2t79wzCltM07cY1pVE4lDLZOgVI8naGS6GSTk"
)
KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
    "-----END RSA PRIVATE KEY-----"
)


def spans(text: str) -> list[tuple[str, str]]:
    return [(text[c.start : c.end], c.kind) for c in find_credentials(text)]


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (f"--key {AWS_KEY} --region eu", AWS_KEY, "AWS Access Key"),
        (f'aws_secret_access_key = "{AWS_SECRET}"', AWS_SECRET, "AWS Access Key"),
        (f"GH={GITHUB}", GITHUB, "GitHub Token"),
        (f"token: {SLACK}\n", SLACK, "Slack Token"),
        (f"https://proxy.example/{OPENAI}/v1", OPENAI, "OpenAI Token"),
        (f"Authorization: Bearer {JWT}", JWT, "JSON Web Token"),
        (f"key:\n{KEY}\nafter", KEY, "Private Key"),
        ("postgres://admin:Pw-db-5ecret@db.example/app", "Pw-db-5ecret", "Basic Auth Credentials"),
    ],
)
def test_each_common_credential_shape_is_found_as_the_credential_alone(text: str, secret: str, kind: str) -> None:
    assert spans(text) == [(secret, kind)]


def test_several_credentials_in_one_text_come_in_order_with_their_positions() -> None:
    text = f"a {SLACK} b {GITHUB} c"
    found = find_credentials(text)
    assert found == [
        Credential(2, 2 + len(SLACK), "Slack Token"),
        Credential(text.index(GITHUB), text.index(GITHUB) + len(GITHUB), "GitHub Token"),
    ]


def test_a_private_key_cut_short_runs_to_the_end_of_the_text() -> None:
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU="
    assert spans(text) == [(text, "Private Key")]


@pytest.mark.parametrize(
    "text",
    [
        "/home/me/project/src/main.py --repository /srv/git/toolshell",
        "commit 3f9c0e1a2b4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f",
        "id 123e4567-e89b-12d3-a456-426614174000 at 2026-12-04T13:36:55Z",
        "eyJub3QiOiJhIHRva2VuIn0 alone is base64 of JSON, not a JWT",
        "the AKIA prefix alone, AKIA1234, is not a key",
        "https://docs.example.com/mcp?team=blue&region=eu",
    ],
)
def test_ordinary_text_holds_no_credential(text: str) -> None:
    assert find_credentials(text) == []


def test_the_kinds_include_the_shapes_setup_lifts_and_leave_out_public_ip_addresses() -> None:
    known = kinds()
    for kind in ("AWS Access Key", "GitHub Token", "Slack Token", "OpenAI Token", "JSON Web Token", "Private Key"):
        assert kind in known
    assert "Public IP (ipv4)" not in known
    assert spans("server 8.8.8.8 answered") == []


ARTIFACTORY = "AKC" + "p8abcdefghijklmnop"
"""Artifactory's shape is anchored: `(?:\\s|=|:|"|^)AKC…(?:\\s|"|$)`, so it is found as a whole text."""


@pytest.mark.parametrize(
    "secret", [AWS_KEY, GITHUB, SLACK, OPENAI, JWT, KEY, ARTIFACTORY, "postgres://admin:Pw-db-5ecret@db.example/app"]
)
def test_a_credential_that_is_a_whole_text_among_others_is_masked_as_alone(secret: str) -> None:
    texts = ["text-length", '{"length": 6}AKC', secret, "=x", "ok"]
    alone = [masker().pieces([t])[0] for t in texts]
    found = masker()
    assert found.pieces(texts) == alone
    assert secret not in alone[2] and found.kinds


def test_results_with_no_credential_are_told_in_one_pass_and_come_back_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scanned: list[str] = []
    monkeypatch.setattr(credentials, "find_credentials", lambda text: scanned.append(text) or find_credentials(text))
    texts = ["text-length", '{"length": 6}', "x12345 has 6 characters"]
    found = masker()
    assert found.pieces(texts) is texts and found.kinds == []
    assert scanned == []  # no text was scanned on its own
    assert found.pieces([*texts, GITHUB]) != [*texts, GITHUB] and GITHUB in scanned


def test_the_shapes_assert_nothing_about_their_context_but_what_a_newline_also_satisfies() -> None:
    """The one-pass pre-filter (`may_hold_credentials`) scans the texts joined by newlines; a shape
    anchored to a text's start or end, or to a non-word boundary, would be missed there."""
    for kind, pattern, _ in _patterns():
        assert _context_free_but_at_whitespace(pattern.pattern), (kind, pattern.pattern)


def _context_free_but_at_whitespace(source: str) -> bool:
    """No `\\A`, `\\z`, `\\B`; a `^` or `$` only as one choice of a group that also takes `\\s`."""
    if re.search(r"\\[AzB]", source):
        return False
    rest = re.sub(r"\[(?:\\.|[^\]])*\]", "", source)  # character classes: their ^ is a negation
    while (group := re.search(r"\(([^()]*)\)", rest)) is not None:
        inner = group.group(1)
        if re.search(r"[$^]", re.sub(r"\\.", "", inner)) and not ("|" in inner and r"\s" in inner):
            return False
        rest = rest[: group.start()] + rest[group.end() :]
    return not re.search(r"[$^]", re.sub(r"\\.", "", rest))


def test_the_context_check_refuses_an_anchor_a_newline_would_not_satisfy() -> None:
    assert _context_free_but_at_whitespace(r'(?:\s|=|^)AKC[a-z]{10,}(?:\s|"|$)')
    assert _context_free_but_at_whitespace(r"://[^:/\$]+:([^@]+)@")
    for anchored in (r"^AKC[a-z]+", r"AKC[a-z]+$", r"(?:=|^)AKC", r"\AAKC", r"\BAKC"):
        assert not _context_free_but_at_whitespace(anchored), anchored
