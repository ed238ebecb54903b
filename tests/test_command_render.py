"""Rendering tool results for the shell: text, JSON, images, errors, the output cap, error lines."""

from __future__ import annotations

import base64
from typing import Any

import mcp_types as t
import pytest

from toolshell.command import Image, Rendered, cap, render_result
from toolshell.errors import ErrorCode, ToolshellError, error_line

PNG = b"\x89PNG\r\n\x1a\nfake"
PNG_B64 = base64.b64encode(PNG).decode()


def text(s: str) -> t.TextContent:
    return t.TextContent(type="text", text=s)


def image(data: str = PNG_B64, mime: str = "image/png") -> t.ImageContent:
    return t.ImageContent(type="image", data=data, mime_type=mime)


def render(result: t.CallToolResult, **kw: Any) -> Rendered:
    kw.setdefault("max_bytes", 10_000)
    return render_result(result, **kw)


def test_single_text_block_prints_as_is_with_one_newline() -> None:
    assert render(t.CallToolResult(content=[text("hello")])) == Rendered("hello\n", [], None)
    assert render(t.CallToolResult(content=[text("a\nb\n\n\n")])).stdout == "a\nb\n"


def test_text_that_looks_like_json_is_still_printed_as_is() -> None:
    assert render(t.CallToolResult(content=[text('{\n  "a": 1\n}')])).stdout == '{\n  "a": 1\n}\n'


def test_empty_result_prints_nothing() -> None:
    assert render(t.CallToolResult(content=[])) == Rendered("", [], None)
    assert render(t.CallToolResult(content=[text("")])).stdout == ""


def test_structured_content_is_preferred_as_compact_json_when_the_text_is_its_copy() -> None:
    result = t.CallToolResult(
        content=[text('{\n  "número": 1,\n  "b": [1, 2]\n}')], structured_content={"número": 1, "b": [1, 2]}
    )
    assert render(result).stdout == '{"número":1,"b":[1,2]}\n'


def test_a_plain_text_result_with_structured_metadata_prints_the_text() -> None:
    result = t.CallToolResult(content=[text("5")], structured_content={"unit": "unicode_scalar", "count": 5})
    assert render(result).stdout == "5\n"


def test_structured_content_with_no_text_block_prints_as_compact_json() -> None:
    result = t.CallToolResult(content=[], structured_content={"a": [1, 2]})
    assert render(result).stdout == '{"a":[1,2]}\n'


def test_sdk_result_wrapper_is_removed_when_the_output_schema_is_the_sdks() -> None:
    schema = {
        "properties": {"result": {"type": "array", "items": {"type": "object"}}},
        "required": ["result"],
        "title": "itemsOutput",
        "type": "object",
    }
    result = t.CallToolResult(
        content=[text('{\n  "a": 1\n}'), text('{\n  "b": 2\n}')],
        structured_content={"result": [{"a": 1}, {"b": 2}]},
    )
    assert render(result, output_schema=schema).stdout == '[{"a":1},{"b":2}]\n'
    assert render(result).stdout == '{"result":[{"a":1},{"b":2}]}\n'


def test_wrapped_string_equal_to_the_text_prints_as_text_without_a_schema() -> None:
    result = t.CallToolResult(content=[text("hi x")], structured_content={"result": "hi x"})
    assert render(result).stdout == "hi x\n"


def test_a_tools_own_result_object_is_kept_when_its_schema_is_not_the_sdk_wrapper() -> None:
    schema = {"type": "object", "properties": {"result": {"type": "integer"}}, "title": "Answer"}
    result = t.CallToolResult(content=[text('{"result": 42}')], structured_content={"result": 42})
    assert render(result, output_schema=schema).stdout == '{"result":42}\n'


def test_several_blocks_print_as_a_json_list_of_blocks() -> None:
    result = t.CallToolResult(
        content=[
            text("one"),
            t.EmbeddedResource(
                type="resource", resource=t.TextResourceContents(uri="file:///a.txt", mime_type="text/plain", text="A")
            ),
        ]
    )
    assert render(result).stdout == (
        '[{"type":"text","text":"one"},'
        '{"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"A"}}]\n'
    )


def test_a_single_non_text_block_prints_as_json() -> None:
    link = t.ResourceLink(type="resource_link", name="a", uri="file:///a")
    assert (
        render(t.CallToolResult(content=[link])).stdout == '[{"name":"a","uri":"file:///a","type":"resource_link"}]\n'
    )


def test_images_are_returned_as_files_and_named_in_the_json() -> None:
    result = t.CallToolResult(content=[text("shot"), image(), image(mime="image/jpeg")])
    rendered = render(result, tool="browser-screenshot")
    assert rendered.images == [
        Image(PNG, "image/png", "tool-images/browser-screenshot-1.png"),
        Image(PNG, "image/jpeg", "tool-images/browser-screenshot-2.jpg"),
    ]
    assert rendered.stdout == (
        '[{"type":"text","text":"shot"},'
        '{"type":"image","mimeType":"image/png","file":"tool-images/browser-screenshot-1.png"},'
        '{"type":"image","mimeType":"image/jpeg","file":"tool-images/browser-screenshot-2.jpg"}]\n'
    )


def test_image_names_skip_taken_paths_and_clean_the_tool_name() -> None:
    taken = {"tool-images/gh-shot-1.png", "tool-images/gh-shot-2.png"}
    rendered = render(t.CallToolResult(content=[image()]), tool="gh shot/", taken=taken)
    assert rendered.images == [Image(PNG, "image/png", "tool-images/gh-shot-3.png")]


def test_an_unknown_image_type_uses_its_subtype_as_extension() -> None:
    rendered = render(t.CallToolResult(content=[image(mime="image/svg+xml"), image(mime="image/x-bmp")]), tool="x")
    assert [i.suggested_name for i in rendered.images] == ["tool-images/x-1.svg", "tool-images/x-2.xbmp"]


def test_images_are_saved_even_when_structured_content_is_printed() -> None:
    rendered = render(t.CallToolResult(content=[image()], structured_content={"ok": True}), tool="cam")
    assert rendered == Rendered('{"ok":true}\n', [Image(PNG, "image/png", "tool-images/cam-1.png")], None)


def test_bad_base64_image_is_noted_and_not_saved() -> None:
    rendered = render(t.CallToolResult(content=[image(data="@@not base64@@")]), tool="x")
    assert rendered.images == []
    assert rendered.stdout == (
        '[{"type":"image","mimeType":"image/png","error":"the image data is not valid base64; nothing was saved"}]\n'
    )


def test_error_result_becomes_a_tool_error_with_empty_stdout() -> None:
    result = t.CallToolResult(content=[text("repo not found\n"), text("check the name")], is_error=True)
    rendered = render(result)
    assert (rendered.stdout, rendered.images) == ("", [])
    assert rendered.error is not None
    assert error_line(rendered.error) == (
        '{"error":{"code":"tool_error","message":"repo not found\\ncheck the name","retryable":false}}\n'
    )


def test_error_result_without_text_uses_structured_content_or_a_default() -> None:
    structured = render(t.CallToolResult(content=[], structured_content={"why": "gone"}, is_error=True))
    assert structured.error is not None and structured.error.message == '{"why":"gone"}'
    bare = render(t.CallToolResult(content=[], is_error=True))
    assert bare.error is not None and bare.error.message == "the tool reported an error without a message"


def test_a_long_error_message_is_cut_on_one_line() -> None:
    rendered = render(t.CallToolResult(content=[text("x" * 30)], is_error=True), max_bytes=10)
    assert rendered.error is not None
    assert rendered.error.message == "xxxxxxxxxx… [20 of 30 bytes dropped]"


def test_big_output_is_cut_with_a_marker() -> None:
    rendered = render(t.CallToolResult(content=[text("a" * 112_345)]), max_bytes=100_000)
    assert rendered.stdout == "a" * 100_000 + (
        "\n[output cut: 12,346 of 112,346 bytes dropped; narrow the query or filter with jq]\n"
    )


def test_cap_leaves_text_that_fits_alone() -> None:
    assert cap("héllo\n", 7) == "héllo\n"


def test_cap_never_splits_a_multibyte_character() -> None:
    # "é" is two bytes; a 4-byte cap falls inside the second "é", so only "aé" (3 bytes) is kept.
    assert cap("aééé", 4) == "aé\n[output cut: 4 of 7 bytes dropped; narrow the query or filter with jq]\n"
    assert cap("€€", 2) == "[output cut: 6 of 6 bytes dropped; narrow the query or filter with jq]\n"


def test_cap_does_not_add_a_blank_line_after_a_kept_newline() -> None:
    assert cap("ab\ncd", 3) == "ab\n[output cut: 2 of 5 bytes dropped; narrow the query or filter with jq]\n"


@pytest.mark.parametrize(
    ("err", "line"),
    [
        (
            ToolshellError(ErrorCode.NEEDS_APPROVAL, "tools github delete-branch needs approval"),
            '{"error":{"code":"needs_approval","message":"tools github delete-branch needs approval",'
            '"retryable":false}}\n',
        ),
        (
            ToolshellError(ErrorCode.UNAVAILABLE, "server docs is still loading", retryable=True),
            '{"error":{"code":"unavailable","message":"server docs is still loading","retryable":true}}\n',
        ),
        (
            ToolshellError(ErrorCode.UNKNOWN_COMMAND, 'no tool "gthub"; did you mean "github"?'),
            '{"error":{"code":"unknown_command","message":"no tool \\"gthub\\"; did you mean \\"github\\"?",'
            '"retryable":false}}\n',
        ),
        (
            ToolshellError(ErrorCode.INVALID_INPUT, "número: expected integer\nline two"),
            '{"error":{"code":"invalid_input","message":"número: expected integer\\nline two","retryable":false}}\n',
        ),
        (
            ToolshellError(ErrorCode.CALL_LIMIT, "more than 50 tool calls in one shell call"),
            '{"error":{"code":"call_limit","message":"more than 50 tool calls in one shell call","retryable":false}}\n',
        ),
    ],
)
def test_error_line_is_one_compact_json_line(err: ToolshellError, line: str) -> None:
    assert error_line(err) == line


@pytest.mark.parametrize(
    ("structured", "shown"),
    [({"unit": "unicode_scalar", "count": 5}, "5\n"), ({"count": 5}, '{"count":5}\n')],
)
def test_one_text_block_beside_structured_content_is_rendered_without_making_its_blocks_json(
    monkeypatch: pytest.MonkeyPatch, structured: dict[str, Any], shown: str
) -> None:
    import toolshell.command.render as render_module

    made: list[Any] = []
    real = render_module._blocks_with_files
    monkeypatch.setattr(render_module, "_blocks_with_files", lambda *a: made.append(a) or real(*a))
    text_block = '{"count": 5}' if shown.startswith("{") else "5"
    result = t.CallToolResult(content=[text(text_block)], structured_content=structured)
    assert render(result).stdout == shown
    assert made == []
    render(t.CallToolResult(content=[text("a"), text("b")]))
    assert len(made) == 1  # two blocks: made as JSON, as before


def test_a_text_that_cannot_be_the_json_of_the_structured_content_is_not_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import toolshell.command.render as render_module

    parsed: list[str] = []
    real = render_module.json.loads
    monkeypatch.setattr(render_module.json, "loads", lambda s, **kw: parsed.append(s) or real(s, **kw))
    counted = t.CallToolResult(content=[text("5")], structured_content={"count": 5})
    assert render(counted).stdout == "5\n"
    assert parsed == []  # a number's text is no object's JSON
    copy = t.CallToolResult(content=[text(' \n{"count": 5}')], structured_content={"count": 5})
    assert render(copy).stdout == '{"count":5}\n'
    assert parsed == [' \n{"count": 5}']  # JSON's leading blanks do not hide a copy
