"""`secrets_scan.find_credentials`: credential shapes (detect-secrets' plugins, run on RE2) found
in any text, each as the span of the credential alone and its kind."""

from __future__ import annotations

import pytest

from toolshell.secrets_scan import Credential, find_credentials, kinds

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
