"""`toolshell shell`: multi-line input (continuations and heredocs) and answers at the terminal."""

from __future__ import annotations

from typing import Any

import pytest

from toolshell.frontends import interactive

pytestmark = pytest.mark.anyio


def _feed(monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    it = iter(lines)

    async def read(prompt: str) -> str | None:
        return next(it, None)

    monkeypatch.setattr(interactive, "_read", read)


async def test_a_line_ending_in_backslash_continues_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    _feed(monkeypatch, ["echo a \\", "  b", "echo next"])
    assert await interactive.read_script() == "echo a \\\n  b"
    assert await interactive.read_script() == "echo next"
    assert await interactive.read_script() is None


async def test_a_heredoc_is_read_to_its_end_word(monkeypatch: pytest.MonkeyPatch) -> None:
    _feed(monkeypatch, ["tools plan <<'EOF'", "tools a b", "EOF"])
    assert await interactive.read_script() == "tools plan <<'EOF'\ntools a b\nEOF"


@pytest.mark.parametrize(("typed", "answer"), [("y", "once"), ("a", "always"), ("", "deny"), ("n", "deny")])
async def test_approval_answers_at_the_terminal(monkeypatch: pytest.MonkeyPatch, typed: str, answer: str) -> None:
    _feed(monkeypatch, [typed])

    class Entry:
        command = "tools github delete-branch"

    class Risk:
        why = "destructive"
        message = "may delete data"

    assert await interactive.ask_approval(Entry(), {"branch": "x"}, Risk()) == answer


async def test_the_terminal_answers_an_elicitation_with_json_or_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    class Params:
        message = "Name?"
        requested_schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

    _feed(monkeypatch, ['{"name": "Ada"}', "", "Grace", '{"name": 3}', '{"name": "Bo"}'])
    answerer: Any = interactive.TerminalAnswerer()
    accepted = await answerer.elicit("greeter", Params())
    declined = await answerer.elicit("greeter", Params())
    bare_word = await answerer.elicit("greeter", Params())
    checked = await answerer.elicit("greeter", Params())
    assert (accepted.action, accepted.content) == ("accept", {"name": "Ada"})
    assert declined.action == "decline"
    assert (bare_word.action, bare_word.content) == ("accept", {"name": "Grace"}), "a word answers the only field"
    assert checked.content == {"name": "Bo"}, "an answer that does not fit the schema is asked again"


async def test_an_unfinished_command_continues_and_an_empty_line_sends_a_broken_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _feed(monkeypatch, ["for i in 1 2", "do echo $i", "done", "echo )", "", "echo ok"])
    assert await interactive.read_script() == "for i in 1 2\ndo echo $i\ndone"
    assert await interactive.read_script() == "echo )\n"
    assert await interactive.read_script() == "echo ok"


async def test_the_terminal_shows_choices_and_defaults_and_prefills_the_defaults(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Params:
        message = "Which color?"
        requested_schema = {
            "type": "object",
            "properties": {"color": {"type": "string", "enum": ["red", "green"], "default": "green"}},
        }

    prefilled: list[str] = []
    answers = iter(['{"color": "green"}', "1"])

    async def read(prompt: str, prefill: str = "") -> str | None:
        prefilled.append(prefill)
        return next(answers, None)

    monkeypatch.setattr(interactive, "_read", read)
    answerer: Any = interactive.TerminalAnswerer()
    kept = await answerer.elicit("paint", Params())
    numbered = await answerer.elicit("paint", Params())
    shown = capsys.readouterr().err
    assert "one of: 1=red, 2=green" in shown and '[default: "green"]' in shown
    assert prefilled == ['{"color": "green"}', '{"color": "green"}']
    assert (kept.content, numbered.content) == ({"color": "green"}, {"color": "red"})
