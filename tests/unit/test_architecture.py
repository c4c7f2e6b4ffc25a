"""The import rules of docs/architecture.md, checked on every module's source."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEAVY = {"torch", "numpy", "hypothesis", "triton", "crosshair", "z3"}


def _modules() -> list[pathlib.Path]:
    return sorted(p for folder in ("spec", "impl", "oracles", "stagecheck")
                  for p in (ROOT / folder).rglob("*.py"))


def _imports(path: pathlib.Path, top_level_only: bool = False) -> set[str]:
    """Absolute module names imported by ``path`` (at module level only, if asked)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def _package(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).parts[0]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_rules(path):
    rel = path.relative_to(ROOT).as_posix()
    names = _imports(path)
    ours = {n for n in names if n.split(".")[0] == "stagecheck"}
    bare = {n for n in names if n.split(".")[0] in ("spec", "impl", "oracles")}
    assert not bare, f"{rel} imports {bare}: import them as stagecheck.<name>"
    if _package(path) == "spec":
        allowed = ("stagecheck.spec",)
        if rel == "spec/models.py":
            allowed += ("stagecheck.impl", "stagecheck.oracles.observe",
                        "stagecheck.oracles.targets")
        assert all(n.startswith(allowed) for n in ours), (rel, ours)
        assert not {n.split(".")[0] for n in names} & HEAVY, (rel, names)
    if _package(path) == "impl":
        assert all(n.startswith("stagecheck.impl") for n in ours), (rel, ours)
    if rel != "oracles/symbolic/_crosshair.py":
        assert not {n for n in names if n.split(".")[0] in ("crosshair", "z3")}, rel


@pytest.mark.parametrize("rel", ["stagecheck/__init__.py", "oracles/errors.py",
                                 "oracles/messages.py", "oracles/options.py",
                                 "oracles/interrupt.py", "oracles/cli.py",
                                 "oracles/config.py", "oracles/commands/__init__.py",
                                 "oracles/commands/console.py", "oracles/commands/crash.py"])
def test_the_command_lines_first_imports_are_light(rel):
    top = _imports(ROOT / rel, top_level_only=True)
    assert not {n.split(".")[0] for n in top} & HEAVY, top
    ours = {n for n in top if n.startswith("stagecheck")}
    assert ours <= {"stagecheck", "stagecheck.oracles", "stagecheck.oracles.messages",
                    "stagecheck.oracles.errors", "stagecheck.oracles.options",
                    "stagecheck.oracles.config", "stagecheck.oracles.commands",
                    "stagecheck.oracles.commands.console",
                    "stagecheck.oracles.commands.crash"}, ours
