"""The module layer order, no import cycles, and no hidden function-local imports (DESIGN §8).

Read from the source with `ast`, so the rules hold for every module, imported or not. See
docs/architecture.md for the order and what each layer holds.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "toolshell"

LAYERS: list[list[str]] = [
    [
        "toolshell.errors",
        "toolshell.version",
        "toolshell.shipped",
        "toolshell.result",
        "toolshell.redact",
        "toolshell.secrets_scan",
        "toolshell.safe_text",
        "toolshell.utf8",
        "toolshell.places",
        "toolshell.loopback",
        "toolshell.tasks_wire",
    ],
    ["toolshell.store"],
    ["toolshell.config"],
    ["toolshell.registry"],
    ["toolshell.telemetry"],
    ["toolshell.timeline"],
    ["toolshell.policy"],
    ["toolshell.connections"],
    ["toolshell.builtin"],
    ["toolshell.command"],
    ["toolshell.scripts"],
    ["toolshell.calls"],
    ["toolshell.shell"],
    ["toolshell.session"],
    ["toolshell.routing", "toolshell.runtime_overlay", "toolshell.host", "toolshell.shells"],
    ["toolshell.frontends"],
    ["toolshell"],
]
"""Lowest first. A module may import from its own layer and the layers below it, never above."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    best, best_len = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    assert best >= 0, f"{module} is in no layer; add it to LAYERS (and docs/architecture.md)"
    return best


def _imports(tree: ast.Module) -> list[tuple[ast.ImportFrom | ast.Import, bool, bool]]:
    """Every import with (is it at module level, is it under `if TYPE_CHECKING:`)."""
    type_only: set[ast.AST] = set()
    top: set[ast.AST] = set()
    for node in tree.body:
        top.add(node)
        if isinstance(node, ast.If):
            checking = "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node):
                top.add(inner)
                if checking:
                    type_only.add(inner)
    return [
        (node, node in top, node in type_only)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        if not node.module or node.level:
            return []
        if node.module == "toolshell":  # `from toolshell import config`: the submodules named
            return [f"toolshell.{alias.name}" for alias in node.names]
        # `from package import module` imports that module too (a name that is not one falls back
        # to the package in _edges)
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return [alias.name for alias in node.names]


def _sources() -> dict[str, tuple[Path, ast.Module, list[str]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        out[_module_name(path)] = (path, ast.parse(text), text.splitlines())
    return out


def _edges(runtime_only: bool) -> dict[str, set[str]]:
    sources = _sources()
    edges: dict[str, set[str]] = {m: set() for m in sources}
    for module, (_, tree, _) in sources.items():
        for node, _, type_only in _imports(tree):
            if runtime_only and type_only:
                continue
            for target in _targets(node):
                if target.startswith("toolshell") and target != module:
                    edges[module].add(target if target in sources else target.rpartition(".")[0])
    return edges


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    wrong = [
        f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
        for module, targets in _edges(runtime_only=False).items()
        for target in sorted(targets)
        if _layer(target) > _layer(module)
    ]
    assert wrong == []


def test_the_modules_import_each_other_without_cycles() -> None:
    edges = _edges(runtime_only=True)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(edges.get(module, ())):
            if target == "toolshell" or target not in edges:
                continue  # the package root re-exports lazily; importing it imports nothing else
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)
    assert cycles == []


def test_every_function_local_import_is_a_deliberate_lazy_import_with_a_comment() -> None:
    undeclared = []
    for path, tree, lines in _sources().values():
        for node, at_top, _ in _imports(tree):
            if at_top:
                continue
            if not _says_lazy(lines, node.lineno - 1):
                undeclared.append(f"{path.relative_to(SRC)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert undeclared == []


def _says_lazy(lines: list[str], index: int) -> bool:
    """The import line, or the run of import and comment lines right above it, says "lazy" (and why)."""
    while index >= 0:
        line = lines[index].strip()
        if "lazy" in line.lower():
            return True
        if not line.startswith(("#", "import ", "from ")):
            return False
        index -= 1
    return False


def test_the_layer_list_names_only_modules_that_exist() -> None:
    modules = set(_sources())
    missing = [p for layer in LAYERS for p in layer if not any(m == p or m.startswith(p + ".") for m in modules)]
    assert missing == []
