"""Reduce an HTML page to readable text lines for a model: headings, paragraphs, list items, links.

Scripts, styles and other non-text elements are dropped; whitespace is collapsed except inside
`<pre>`. Headings become `# Title`, list items `- item`, links `[text](url)` with the URL made
absolute. Built on the stdlib `html.parser`, which tolerates broken markup without raising.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin

_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas", "select"})
_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "dd", "details", "div", "dl", "dt", "fieldset",
        "figcaption", "figure", "footer", "form", "header", "main", "nav", "section", "summary", "table",
        "tbody", "thead", "tfoot", "tr", "title", "caption",
    }
)  # fmt: skip
_PARAGRAPH = frozenset({"p", "pre", "blockquote", "table", "ul", "ol", "dl", "h1", "h2", "h3", "h4", "h5", "h6"})
_HEADINGS = {f"h{n}": "#" * n + " " for n in range(1, 7)}


class _TextParser(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.lines: list[str] = []
        self._buf: list[str] = []
        self._prefix = ""
        self._skip = 0
        self._pre = 0
        self._lists = 0
        self._links: list[tuple[int, str | None]] = []  # (buffer index where the link text starts, href)

    # -- line assembly --------------------------------------------------------------------------

    def _flush(self) -> None:
        text = "".join(self._buf)
        self._buf = []
        text = text.rstrip() if self._pre else " ".join(text.split())
        if text:
            self.lines.append(self._prefix + text)
        self._prefix = ""
        self._links = []

    def _break(self, *, blank: bool = False) -> None:
        self._flush()
        if blank and self.lines and self.lines[-1] != "":
            self.lines.append("")

    # -- parser callbacks -----------------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skip += 1
        if self._skip:
            return
        if tag in _HEADINGS:
            self._break(blank=True)
            self._prefix = _HEADINGS[tag]
        elif tag == "li":
            self._flush()
            self._prefix = "  " * max(self._lists - 1, 0) + "- "
        elif tag in ("ul", "ol"):
            self._flush()
            self._lists += 1
        elif tag in _PARAGRAPH:
            self._break(blank=True)
            self._pre += tag == "pre"
        elif tag == "br":
            self._flush()
        elif tag == "hr":
            self._break(blank=True)
        elif tag in _BLOCK:
            self._flush()
        elif tag in ("td", "th"):
            self._buf.append(" ")
        elif tag == "a":
            self._links.append((len(self._buf), _usable_href(dict(attrs).get("href"), self.base_url)))

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skip = max(self._skip - 1, 0)
            return
        if self._skip:
            return
        if tag == "a" and self._links:
            start, href = self._links.pop()
            text = " ".join("".join(self._buf[start:]).split())
            if href and text:
                self._buf[start:] = [f"[{text}]({href})"]
        elif tag in ("ul", "ol"):
            self._lists = max(self._lists - 1, 0)
            self._break(blank=self._lists == 0)
        elif tag in _HEADINGS or tag in _PARAGRAPH:
            self._break(blank=True)
            if tag == "pre":
                self._pre = max(self._pre - 1, 0)
        elif tag in _BLOCK or tag == "li":
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if not self._pre:
            self._buf.append(data)
            return
        first, *rest = data.split("\n")
        self._buf.append(first)
        for line in rest:
            self._flush()
            self._buf.append(line)

    def close(self) -> None:
        super().close()
        self._flush()


def _usable_href(href: str | None, base_url: str) -> str | None:
    """An absolute link target, or None for in-page anchors and `javascript:` links."""
    if not href or href.startswith("#") or href.strip().lower().startswith("javascript:"):
        return None
    return urljoin(base_url, href.strip())


def html_to_text(html: str, base_url: str = "") -> str:
    """Readable text of an HTML document, one block per line, paragraphs separated by a blank line.

    Args:
        html: The document (may be broken or truncated).
        base_url: The page's URL, to make relative links absolute.

    Returns:
        The text, without leading or trailing blank lines.
    """
    parser = _TextParser(base_url)
    parser.feed(html)
    parser.close()
    return "\n".join(parser.lines).strip("\n")
