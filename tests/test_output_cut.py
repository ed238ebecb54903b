"""The pure cut of a shell call's output (`shell.output`, `shell.json_cut`): head and tail with one
marker, the JSON cut that stays valid, bounded collection, and the too-big error."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolshell.errors import ErrorCode
from toolshell.shell.json_cut import cut_json
from toolshell.shell.output import SHELL_CUT, Collected, Collector, bound, too_big, where_saved

WHERE = where_saved("/home/user/tool-output/abc.stdout")


def size(text: str) -> int:
    return len(text.encode())


def test_output_that_fits_is_returned_unchanged() -> None:
    assert bound(Collected.of("hello\n"), 1_000, WHERE) == bound(Collected.of("hello\n"), 6, WHERE)
    assert bound(Collected.of("hello\n"), 6, WHERE).text == "hello\n"


def test_past_the_cap_the_head_and_the_tail_are_kept_around_one_marker_line() -> None:
    text = "".join(f"line-{i}\n" for i in range(1, 201))
    out = bound(Collected.of(text), 500, WHERE).text
    head, marker, tail = out.partition("[output cut:")
    assert head == "".join(f"line-{i}\n" for i in range(1, 21))
    assert marker + tail.partition("\n")[0] == (
        "[output cut: 1,298 bytes dropped (153 lines); the whole output is in /home/user/tool-output/abc.stdout]"
    )
    assert tail.partition("\n")[2] == "".join(f"line-{i}\n" for i in range(174, 201))
    assert size(out) <= 500


@given(st.text(min_size=1, max_size=3_000), st.integers(min_value=300, max_value=2_000))
def test_the_text_cut_stays_within_the_cap_and_keeps_a_prefix_and_a_suffix(text: str, cap: int) -> None:
    out = bound(Collected.of(text), cap, WHERE).text
    assert size(out) <= cap
    if size(text) <= cap:
        assert out == text
        return
    head, _, rest = out.partition("[output cut: ")
    tail = rest.partition("]\n")[2]
    assert text.startswith(head.removesuffix("\n")) and text.endswith(tail)


def test_a_long_array_keeps_its_first_items_and_counts_the_rest() -> None:
    text = json.dumps([{"id": i} for i in range(10_000)]) + "\n"
    out = bound(Collected.of(text), 1_000, WHERE, as_json=True)
    value = json.loads(out.text)
    assert value[:3] == [{"id": 0}, {"id": 1}, {"id": 2}]
    assert value[-1] == f"… {10_000 - (len(value) - 1):,} more items"
    assert out.text.endswith("]\n") and size(out.text) <= 1_000
    assert out.note == (
        f"[stdout cut: one JSON document of {size(text):,} bytes, cut so it stays valid JSON; "
        "the whole output is in /home/user/tool-output/abc.stdout]\n"
    )


def test_a_long_string_is_shortened_with_a_note_and_keys_beyond_the_first_are_counted() -> None:
    doc = {"body": "a" * 50_000, **{f"k{i}": i for i in range(100)}}
    value = json.loads(cut_json(doc, 800) or "null")
    assert value["body"].startswith("aaaa") and value["body"].endswith("more characters]")
    assert value["…"].endswith("more keys")


def test_pretty_printed_json_stays_pretty_printed() -> None:
    text = json.dumps(list(range(5_000)), indent=2) + "\n"
    out = bound(Collected.of(text), 1_000, WHERE, as_json=True).text
    assert out.startswith("[\n  0,\n  1,")
    assert isinstance(json.loads(out), list)


def test_text_that_is_not_one_json_document_is_cut_as_text() -> None:
    text = '{"a": 1}\n' * 1_000
    out = bound(Collected.of(text), 500, WHERE, as_json=True)
    assert "[output cut:" in out.text and out.note == ""


_json: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=30) | st.dictionaries(st.text(max_size=10), inner, max_size=12),
    max_leaves=150,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_json, min_size=1, max_size=40) | st.dictionaries(st.text(), _json, min_size=1), st.booleans())
def test_the_json_cut_always_parses_keeps_its_shape_and_stays_within_the_cap(doc: Any, pretty: bool) -> None:
    text = json.dumps(doc, indent=2 if pretty else None, ensure_ascii=False) + "\n"
    out = bound(Collected.of(text), 1_000, WHERE, as_json=True)
    assert size(out.text) <= 1_000
    if size(text) <= 1_000:
        assert out.text == text
    else:
        assert out.note.startswith("[stdout cut: one JSON document")
        assert type(json.loads(out.text)) is type(doc)


@given(st.lists(st.text(max_size=300), max_size=60), st.integers(1, 500), st.integers(1, 500))
def test_collecting_keeps_the_head_and_the_tail_and_counts_the_middle(chunks: list[str], keep: int, tail: int) -> None:
    collector = Collector(keep, tail)
    for chunk in chunks:
        collector.add(chunk)
    got, whole = collector.collected(), "".join(chunks)
    assert got.size == size(whole) and got.lines == whole.count("\n")
    assert size(got.head) <= keep and size(got.tail) <= tail
    assert whole.startswith(got.head) and whole.endswith(got.tail)
    if size(whole) <= keep:
        assert got.whole == whole


def test_an_output_bigger_than_what_is_kept_says_the_file_holds_what_was_kept() -> None:
    collector = Collector(100, 100)
    collector.add("a" * 1_000 + "end\n")
    got = collector.collected()
    assert got.whole is None and got.left_out == 804
    assert got.saved_text() == "a" * 100 + "\n[… 804 bytes not kept …]\n" + "a" * 96 + "end\n"
    assert bound(got, 400, WHERE).text.endswith("end\n")


def test_a_result_too_big_names_the_paging_arguments_of_the_tool() -> None:
    schema = {"properties": {"repo": {}, "per_page": {}, "page": {}, "query": {}}}
    err = too_big("tools github list-issues", 40_000_000, 30_000_000, schema)
    assert err.code == ErrorCode.TOOL_ERROR
    assert err.message == (
        "the result of tools github list-issues is 40,000,000 bytes, past the shell's limit of 30,000,000 bytes "
        "([tools_in_shell] max_result_bytes); ask the server for less with page, per_page, query "
        "(see `tools github list-issues --help`)"
    )
    bare = too_big("tools x dump", 70_000, 65_536, {"properties": {"path": {}}})
    assert bare.message.endswith(
        "ask for a narrower input (see `tools x dump --help`) or raise [tools_in_shell] max_result_bytes"
    )


def test_a_stream_the_shell_cut_ends_with_a_line_saying_so_and_stays_within_the_cap() -> None:
    stream = Collected("a" * 1_000, "b" * 1_000 + "cut mid-li", 5_000, 10, shell_cut=True)
    out = bound(stream, 700, WHERE).text
    assert out.endswith("cut mid-li\n" + SHELL_CUT) and size(out) <= 700
    assert stream.saved_text().endswith("cut mid-li\n" + SHELL_CUT)
