"""What masking secrets costs per `tools` call: a 1 MB result, 5 configured secrets.

Usage: `python benchmarks/redaction.py [--rounds N]`. No server: each case times the redaction a
result goes through on the shell path (`render_result(..., redact=)` masks the blocks, the
builtin's stdout pass, the shell call's stdout pass) against what it went through before (the two
stdout passes of a Python `re` alternation of the 5 literals). Medians of N rounds, in ms per call.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
import statistics
import string
import time
from collections.abc import Callable, Iterable

import mcp_types as types

from toolshell.command.render import render_result
from toolshell.redact import Redactor, forms_of

MB = 1_000_000


class LiteralRedactor:
    """The redactor before encodings were masked: the literal secrets only, Python `re`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = sorted(set(secrets), key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in values))

    def __call__(self, text: str) -> str:
        return self._pattern.sub("***", text)


def _text(rng: random.Random, size: int, secrets: list[str], hits: int) -> str:
    alphabet = string.ascii_letters + string.digits + ' \n{}":,.-_/+='
    chars = rng.choices(alphabet, k=size)
    for i in range(hits):  # the secrets, plain and in base64, spread through the text
        secret = secrets[i % len(secrets)]
        form = secret if i % 2 else base64.b64encode(secret.encode()).decode()
        at = rng.randrange(size - len(form))
        chars[at : at + len(form)] = form
    return "".join(chars)[:size]


def _cases(rng: random.Random, secrets: list[str]) -> dict[str, types.CallToolResult]:
    clean = _text(rng, MB, secrets, 0)
    png = bytes(rng.getrandbits(8) for _ in range(MB))
    return {
        "1 text block, no secret": types.CallToolResult(content=[types.TextContent(text=clean)]),
        "1 text block, 100 secrets": types.CallToolResult(
            content=[types.TextContent(text=_text(rng, MB, secrets, 100))]
        ),
        "1000 text blocks, no secret": types.CallToolResult(
            content=[types.TextContent(text=clean[i : i + 1000]) for i in range(0, MB, 1000)]
        ),
        "structured JSON, no secret": types.CallToolResult(
            content=[], structured_content={"rows": [{"id": i, "text": clean[i : i + 100]} for i in range(0, MB, 100)]}
        ),
        "1 MB image": types.CallToolResult(
            content=[types.ImageContent(data=base64.b64encode(png).decode(), mime_type="image/png")]
        ),
    }


def _median_ms(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rng = random.Random(7)
    secrets = ["".join(rng.choices(string.ascii_letters + string.digits, k=24)) for _ in range(5)]
    start = time.perf_counter()
    new = Redactor(secrets)
    built_ms = (time.perf_counter() - start) * 1000
    old = LiteralRedactor(secrets)
    rows = []
    for name, result in _cases(rng, secrets).items():

        def before(result: types.CallToolResult = result) -> object:
            return old(old(render_result(result).stdout))

        def after(result: types.CallToolResult = result) -> object:
            return new(new(render_result(result, redact=new).stdout))

        def render_only(result: types.CallToolResult = result) -> object:
            return render_result(result)

        base = _median_ms(render_only, args.rounds)
        b, a = _median_ms(before, args.rounds), _median_ms(after, args.rounds)
        rows.append({"case": name, "render_ms": base, "before_ms": b - base, "after_ms": a - base})
    forms = sum(len(forms_of(s)) for s in secrets)
    print(f"5 secrets of 24 characters: {forms} forms, redactor built in {built_ms:.1f} ms")
    print(f"{'case (1 MB)':<30} {'render':>8} {'redaction before':>17} {'redaction after':>16}")
    for r in rows:
        print(f"{r['case']:<30} {r['render_ms']:>6.1f}ms {r['before_ms']:>15.1f}ms {r['after_ms']:>14.1f}ms")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
