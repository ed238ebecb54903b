"""Ratings of unlabeled tools: the heuristic, the command rater, and ratings stored once per schema."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from toolshell.config import ApprovalConfig
from toolshell.errors import ConfigError
from toolshell.policy import (
    CallableRater,
    CommandRater,
    HeuristicRater,
    RaterFailed,
    Ratings,
    heuristic_rating,
    make_rater,
)
from toolshell.policy.canonical import schema_hash
from toolshell.policy.rating import parse_rating
from toolshell.registry.entry import ToolEntry
from toolshell.store.sqlite import Store


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("name", "description", "expected"),
    [
        ("list_pulls", "List pull requests in a repository.", "read_only"),
        ("get_file_contents", "Get the contents of a file.", "read_only"),
        ("search_issues", "Search issues with GitHub's query syntax.", "read_only"),
        ("create_issue", "Open a new issue.", "changes"),
        ("delete-branch", "", "changes"),
        ("mergePullRequest", "Merge a pull request.", "changes"),
        ("send_message", "Send a Slack message to a channel.", "changes"),
        ("git_push", "", "changes"),
        ("get_or_create_user", "Return the user, creating it when missing.", "changes"),  # a change verb wins
        ("describe_table", "Show the columns of a table.", "read_only"),
        ("issue_tracker", "Deletes the given issue permanently.", "changes"),  # the description tells
        ("weather", "Returns the forecast; read-only.", "read_only"),
        ("weather", "Looks up the forecast for a city.", "read_only"),
        ("notes", "Notes tool.", "changes"),  # nothing tells: a rating may only add a question
        ("kv", "A key-value store.", "changes"),
    ],
)
def test_the_heuristic_rates_realistic_tools(name: str, description: str, expected: str) -> None:
    assert heuristic_rating(ToolEntry("s", name, description)) == expected


def test_the_heuristic_reads_input_property_names_when_the_rest_says_nothing() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}, "overwrite": {"type": "boolean"}}}
    assert heuristic_rating(ToolEntry("fs", "file", "A file.", input_schema=schema)) == "changes"


@pytest.mark.anyio
async def test_the_heuristic_rater_wraps_the_rule() -> None:
    assert await HeuristicRater().rate(ToolEntry("s", "list_things")) == "read_only"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("changes\n", "changes"),
        ("read_only", "read_only"),
        ("read-only", "read_only"),
        ("  CHANGES ", "changes"),
        ('{"rating": "read_only", "because": "it lists"}', "read_only"),
    ],
)
def test_rater_answers_are_read_bare_or_as_json(text: str, expected: str) -> None:
    assert parse_rating(text) == expected


@pytest.mark.parametrize("text", ["", "maybe", '{"rating": 1}', "[1]", '{"x": "changes"}'])
def test_an_unreadable_answer_is_a_rater_failure(text: str) -> None:
    with pytest.raises(RaterFailed):
        parse_rating(text)


def _rater_script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "rate.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


@pytest.mark.anyio
async def test_the_command_rater_sends_the_tool_as_json_and_reads_the_answer(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    argv = _rater_script(
        tmp_path,
        f"""
        import json, sys
        tool = json.load(sys.stdin)
        open({str(seen)!r}, "w").write(json.dumps(tool))
        print(json.dumps({{"rating": "changes" if "delete" in tool["name"] else "read_only"}}))
    """,
    )
    entry = ToolEntry("gh", "delete_branch", "Delete a branch.", {"type": "object", "properties": {}})
    assert await CommandRater(argv).rate(entry) == "changes"
    assert json.loads(seen.read_text()) == {
        "server": "gh",
        "name": "delete_branch",
        "description": "Delete a branch.",
        "input_schema": {"type": "object", "properties": {}},
    }
    assert await CommandRater(argv).rate(ToolEntry("gh", "list_pulls")) == "read_only"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "says"),
    [("import sys; sys.exit(3)", "exited with 3"), ("print('perhaps')", "it must print")],
)
async def test_a_failing_command_rater_raises(tmp_path: Path, body: str, says: str) -> None:
    with pytest.raises(RaterFailed, match=says):
        await CommandRater(_rater_script(tmp_path, body)).rate(ToolEntry("s", "t"))


@pytest.mark.anyio
async def test_a_missing_rater_program_raises(tmp_path: Path) -> None:
    with pytest.raises(RaterFailed, match="cannot run the rater"):
        await CommandRater([str(tmp_path / "nope")]).rate(ToolEntry("s", "t"))


@pytest.mark.anyio
async def test_a_slow_command_rater_times_out(tmp_path: Path) -> None:
    argv = _rater_script(tmp_path, "import time; time.sleep(30)")
    with pytest.raises(RaterFailed, match="no rating within"):
        await CommandRater(argv, timeout_seconds=0.2).rate(ToolEntry("s", "t"))


class Counting:
    def __init__(self, answer: str = "changes") -> None:
        self.calls: list[str] = []
        self.answer = answer

    def __call__(self, entry: ToolEntry) -> str:
        self.calls.append(entry.name)
        if self.answer == "boom":
            raise RuntimeError("decision service down")
        return self.answer


@pytest.mark.anyio
async def test_a_rating_is_stored_and_not_asked_for_again() -> None:
    store, counting = Store(), Counting("read_only")
    entry = ToolEntry("s", "thing")
    assert await Ratings(store, CallableRater(counting)).get(entry) == "read_only"
    assert await Ratings(store, CallableRater(counting)).get(entry) == "read_only"  # a new Ratings: from SQLite
    assert counting.calls == ["thing"]
    rows = store.query("SELECT server, tool, rating FROM tool_ratings")
    assert [tuple(r) for r in rows] == [("s", "thing", "read_only")]


@pytest.mark.anyio
async def test_a_rating_belongs_to_the_program_not_to_the_servers_name() -> None:
    store, counting = Store(), Counting("read_only")
    program_a = ToolEntry("evil", "thing", server_id="sha256:a")
    program_b = replace(program_a, server_id="sha256:b")
    ratings = Ratings(store, CallableRater(counting))
    assert await ratings.get(program_a) == "read_only"
    counting.answer = "changes"
    assert await ratings.get(program_b) == "changes"  # another program under the same name is rated afresh
    assert await ratings.get(program_a) == "read_only"  # and program A keeps its own rating
    assert counting.calls == ["thing", "thing"]


@pytest.mark.anyio
async def test_ratings_stored_before_they_recorded_the_program_are_not_used(tmp_path: Path) -> None:
    old = Store(tmp_path / "toolshell.db")
    old.ensure(
        "CREATE TABLE ratings (server TEXT NOT NULL, tool TEXT NOT NULL, schema_hash TEXT NOT NULL, "
        "rating TEXT NOT NULL, rated_at REAL NOT NULL, PRIMARY KEY (server, tool, schema_hash))"
    )
    entry = ToolEntry("evil", "thing", server_id="sha256:b")
    old.execute("INSERT INTO ratings VALUES (?,?,?,?,?)", ("evil", "thing", schema_hash(entry), "read_only", 0.0))
    old.close()
    counting = Counting("changes")
    assert await Ratings(Store(tmp_path / "toolshell.db"), CallableRater(counting)).get(entry) == "changes"
    assert counting.calls == ["thing"]


@pytest.mark.anyio
async def test_a_changed_schema_is_rated_again() -> None:
    counting = Counting()
    ratings = Ratings(Store(), CallableRater(counting))
    await ratings.get(ToolEntry("s", "thing", input_schema={"type": "object"}))
    await ratings.get(ToolEntry("s", "thing", input_schema={"type": "object", "properties": {"x": {}}}))
    await ratings.get(ToolEntry("s", "thing", input_schema={"type": "object"}))
    assert counting.calls == ["thing", "thing"]


@pytest.mark.anyio
async def test_labeled_tools_are_never_rated_but_untrusted_ones_are() -> None:
    counting = Counting()
    ratings = Ratings(Store(), CallableRater(counting))
    assert await ratings.get(ToolEntry("s", "a", annotations={"destructiveHint": False})) is None
    assert await ratings.get(ToolEntry("s", "b", annotations={"readOnlyHint": True}, trusted=False)) == "changes"
    assert counting.calls == ["b"]


@pytest.mark.anyio
async def test_rate_unlabeled_tools_off_rates_nothing() -> None:
    counting = Counting()
    assert await Ratings(Store(), CallableRater(counting), enabled=False).get(ToolEntry("s", "t")) is None
    assert counting.calls == []


@pytest.mark.anyio
async def test_a_failed_rater_rates_changes_without_storing_it_and_is_not_asked_again() -> None:
    store, counting = Store(), Counting("boom")
    ratings = Ratings(store, CallableRater(counting))
    assert await ratings.get(ToolEntry("s", "t")) == "changes"
    assert await ratings.get(ToolEntry("s", "t")) == "changes"
    assert counting.calls == ["t"]
    assert store.query("SELECT * FROM tool_ratings") == []


@pytest.mark.anyio
async def test_an_async_callable_rater_is_awaited() -> None:
    async def rate(entry: ToolEntry) -> str:
        return "read_only"

    assert await CallableRater(rate).rate(ToolEntry("s", "t")) == "read_only"


def test_the_config_names_the_rater() -> None:
    assert isinstance(make_rater(ApprovalConfig()), HeuristicRater)
    assert make_rater(ApprovalConfig(rater="none")) is None
    rater = make_rater(ApprovalConfig(rater="command", rater_command=["rate", "--fast"]))
    assert isinstance(rater, CommandRater) and rater.argv == ["rate", "--fast"]
    with pytest.raises(ConfigError, match="rater_command"):
        make_rater(ApprovalConfig.model_construct(rater="command", rater_command=[]))
