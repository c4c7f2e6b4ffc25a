"""The floors of stagecheck and its import rules, checked on the installed package's source.

Every import a module writes, at its top or inside a function, is an arrow from that
module to the one it names (``from P import m`` names submodule ``P.m`` where there is
one). ``FLOORS`` lists the floors, lowest first, in the pipeline's order: a module may
import modules of its own floor and of the floors below, never one above, and no
arrows may close a loop. ``EXCEPTIONS`` names the one documented arrow that runs up.
docs/architecture.md describes each floor. No module of ``oracles/``, ``spec/`` or
``impl/`` is longer than ``MAX_MODULE_LINES`` lines but the catalogs of ``LONG_MODULES``.

``python tests/unit/test_architecture.py [FOLDER]`` prints the figures of a checkout
(the installed package, or the ``spec``, ``impl``, ``oracles`` and ``stagecheck``
folders under FOLDER): files, floors, arrows, upward arrows, loops, and the imports
written inside functions per 1,000 lines.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import pathlib
import sys
import tokenize
from dataclasses import dataclass, field

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEAVY = {"torch", "numpy", "hypothesis", "triton", "crosshair", "z3"}
#: the installed packages, and the folder of this repository each one comes from
PACKAGES = {"stagecheck": "stagecheck", "stagecheck.spec": "spec", "stagecheck.impl": "impl",
            "stagecheck.oracles": "oracles"}

#: The floors, lowest first. ``name`` is that module; ``name.*`` that module and every
#: module below it. The pipeline for one example runs up the oracles' floors:
#: generate -> targets -> device -> observe -> run -> compare -> evaluate -> campaign -> report -> cli.
FLOORS: list[tuple[str, list[str]]] = [
    ("facade", ["stagecheck"]),     # names load on first use: it imports nothing
    ("code under test", ["stagecheck.impl.*"]),
    ("statement", ["stagecheck.spec.*"]),
    ("leaves", ["stagecheck.oracles", "stagecheck.oracles.errors",
                "stagecheck.oracles.messages", "stagecheck.oracles.interrupt",
                "stagecheck.oracles.text", "stagecheck.oracles.progress",
                "stagecheck.oracles.results", "stagecheck.oracles._preload",
                "stagecheck.oracles.stdio", "stagecheck.oracles.paths",
                "stagecheck.oracles.guard", "stagecheck.oracles.gcpause",
                "stagecheck.oracles.memory", "stagecheck.oracles.process_state",
                "stagecheck.oracles.environment",
                # how Triton runs, decided before triton is first imported: by the kernel
                # oracles and by the loader of a file target that imports triton
                "stagecheck.oracles.kernel"]),
    ("options", ["stagecheck.oracles.options", "stagecheck.oracles.config"]),
    ("generate", ["stagecheck.oracles.generate", "stagecheck.oracles.sample"]),
    ("targets", ["stagecheck.oracles.targets.*"]),
    ("device", ["stagecheck.oracles.device.*"]),   # the device model: observe's copies run on it
    ("observe", ["stagecheck.oracles.observe.*"]),
    ("schemas", ["stagecheck.oracles.schemas", "stagecheck.oracles.schema_types"]),
    ("run", ["stagecheck.oracles.worker.*", "stagecheck.oracles.runner"]),
    ("compare", ["stagecheck.oracles.compare", "stagecheck.oracles.kernel.scenarios",
                 "stagecheck.oracles.kernel.impact"]),
    ("evaluate", ["stagecheck.oracles.evaluate"]),
    ("campaign", ["stagecheck.oracles.collect", "stagecheck.oracles.shrink",
                  "stagecheck.oracles.campaign_shrinking",
                  "stagecheck.oracles.campaign_hypothesis",
                  "stagecheck.oracles.campaign_impact", "stagecheck.oracles.campaign_progress",
                  "stagecheck.oracles.campaign"]),
    ("other oracles", ["stagecheck.oracles.symbolic.*", "stagecheck.oracles.mutants.*",
                       "stagecheck.oracles.kernel.campaign", "stagecheck.oracles.bench",
                       "stagecheck.oracles.protocol.*"]),
    ("report", ["stagecheck.oracles.report.*"]),
    ("command line", ["stagecheck.oracles.cli", "stagecheck.oracles.commands.*",
                      "stagecheck.oracles.fixture_targets", "stagecheck.oracles.fixture_protocol",
                      "stagecheck.oracles.pytest_plugin", "stagecheck.__main__"]),
]

#: The one documented exception (docs/architecture.md): the contracts CrossHair checks
#: (spec/models.py) run the real generations through the pipeline's one ``observe``, on
#: the list backend, so that the invariants judge what the pipeline observes.
EXCEPTIONS = {("stagecheck.spec.models", "stagecheck.oracles.observe"),
              ("stagecheck.spec.models", "stagecheck.oracles.observe.listmodel"),
              ("stagecheck.spec.models", "stagecheck.oracles.targets")}

#: At most this many imports written inside functions per 1,000 lines of the package,
#: each with a comment (on its line, or above its run of imports) that says why it is
#: there: a heavy library kept off the command line's start or a worker's, a stage loaded
#: only when it runs.
MAX_LAZY_PER_1000_LINES = 4
#: Modules the budget does not count (none: every module is counted).
NOT_YET_COUNTED: set[str] = set()

#: Rooms with one idea each (issue 19): no module of ``oracles/``, ``spec/`` or ``impl/``
#: is longer than this many lines, except the catalogs of ``LONG_MODULES``.
MAX_MODULE_LINES = 500
#: The modules that may be longer: each holds one idea, a catalog of many small entries
#: (path in the repository -> the one idea it holds). Machinery a catalog needs lives
#: in a module of its own (``mutants/mutation.py`` beside ``mutants/operators.py``).
LONG_MODULES = {
    "oracles/messages.py": "the message catalog: every user-visible message, one constant each",
    "oracles/mutants/operators.py": "the operator catalog: one small class per mutation operator",
    "oracles/options.py": "the option table: every option declared once with its check (the "
                          "checks read the table's limits), and what is derived from it: the "
                          "parser's entries, the [tool.stagecheck] keys, the JSON settings and "
                          "each command's frozen config object",
    "spec/invariants.py": "the invariants: each stated once, in prose and as its check",
}


# ---------------------------------------------------------------------------- the checker

@dataclass
class Arrow:
    """One import statement: ``source`` imports ``target`` (at ``line``)."""

    source: str
    target: str
    line: int
    in_function: bool


@dataclass
class Graph:
    """The modules (name -> source) and every import statement of each."""

    sources: dict[str, str]
    packages: set[str] = field(default_factory=set)
    arrows: list[Arrow] = field(default_factory=list)          # between our modules
    outside: list[Arrow] = field(default_factory=list)         # to any other module
    lazy_statements: list[Arrow] = field(default_factory=list)   # one per statement
    lazy_unexplained: list[Arrow] = field(default_factory=list)

    def edges(self) -> set[tuple[str, str]]:
        return {(a.source, a.target) for a in self.arrows if a.source != a.target}

    def lines(self) -> int:
        return sum(len(text.splitlines()) for text in self.sources.values())

    def lazy(self) -> int:
        """Import statements written inside functions."""
        return len(self.lazy_statements)


def sources_in(folders: dict[str, pathlib.Path]) -> tuple[dict[str, str], set[str]]:
    """``(module name -> source, the package names)`` of the modules in ``folders``
    (package name -> its folder), every folder below a package included."""
    sources: dict[str, str] = {}
    packages: set[str] = set()
    for package, folder in folders.items():
        for path in sorted(pathlib.Path(folder).rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
                packages.add(".".join([package, *parts]))
            sources[".".join([package, *parts])] = path.read_text(encoding="utf-8")
    return sources, packages


def installed_folders() -> dict[str, pathlib.Path]:
    """Where the installed ``stagecheck`` packages are (as Python finds them)."""
    return {name: pathlib.Path(importlib.util.find_spec(name).submodule_search_locations[0])
            for name in PACKAGES}


def _comment_lines(text: str) -> set[int]:
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            lines.add(token.start[0])
    return lines


def import_graph(sources: dict[str, str], packages: set[str]) -> Graph:
    """Every import statement of every module in ``sources``, resolved to module names."""
    graph = Graph(sources, packages)
    known = set(sources)
    ours = {name.split(".")[0] for name in known}

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    for module, text in sources.items():
        tree = ast.parse(text)
        comments = _comment_lines(text)
        here = module if module in packages else module.rpartition(".")[0]

        def visit(node, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    record(child, in_function)
                visit(child, in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        def record(node, in_function: bool) -> None:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parent = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                         for a in node.names]
            for name in dict.fromkeys(names):
                target = resolve(name) if name.split(".")[0] in ours else None
                arrow = Arrow(module, target or name, node.lineno, in_function)
                (graph.arrows if target else graph.outside).append(arrow)
            if in_function:
                statement = Arrow(module, names[0], node.lineno, True)
                graph.lazy_statements.append(statement)
                if not comments & explained_by(node):
                    graph.lazy_unexplained.append(statement)

        def explained_by(node) -> set[int]:
            """The lines a comment explaining ``node`` may stand on: its own, or the line
            above the run of import statements it ends."""
            first = node.lineno
            while first - 1 in import_lines:
                first = import_lines[first - 1]
            return {first - 1, *range(node.lineno, node.end_lineno + 1)}

        import_lines = {}       # last line of an import statement -> its first line
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                import_lines[node.end_lineno] = node.lineno

        visit(tree, False)
    return graph


def floor_of(module: str, floors=FLOORS) -> int | None:
    """The index of ``module``'s floor (the longest pattern that matches it)."""
    best, found = -1, None
    for index, (_, patterns) in enumerate(floors):
        for pattern in patterns:
            stem = pattern[:-2] if pattern.endswith(".*") else pattern
            if module == stem or (pattern.endswith(".*") and module.startswith(stem + ".")):
                if len(stem) > best:
                    best, found = len(stem), index
    return found


def loops(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Each group of modules that import one another in a circle (Tarjan's components
    of more than one module), sorted."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in graph:
            if v not in index:
                connect(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def upward(graph: Graph, floors=FLOORS, exceptions=frozenset()) -> list[Arrow]:
    """The arrows that run from a floor to a higher one (``exceptions`` left out)."""
    out = []
    for arrow in graph.arrows:
        a, b = floor_of(arrow.source, floors), floor_of(arrow.target, floors)
        if a is not None and b is not None and b > a \
                and (arrow.source, arrow.target) not in exceptions:
            out.append(arrow)
    return out


def problems(graph: Graph, floors=FLOORS, exceptions=EXCEPTIONS) -> list[str]:
    """What breaks the floors: a module on no floor, an upward arrow, a loop."""
    out = [f"{m} is on no floor: add it to FLOORS in tests/unit/test_architecture.py"
           for m in sorted(graph.sources) if floor_of(m, floors) is None]
    for arrow in upward(graph, floors, exceptions):
        out.append(f"{arrow.source} (floor {floors[floor_of(arrow.source, floors)][0]!r}) "
                   f"imports {arrow.target} (floor {floors[floor_of(arrow.target, floors)][0]!r}"
                   f", higher) at line {arrow.line}")
    for group in loops(graph.edges()):
        out.append("import loop: " + " <-> ".join(group))
    return out


def lazy_budget(graph: Graph, skip=frozenset()) -> tuple[int, int, list[Arrow]]:
    """``(imports inside functions, lines, those without a reason comment)`` of the
    modules not in ``skip``."""
    lines = sum(len(text.splitlines()) for m, text in graph.sources.items() if m not in skip)
    return (sum(a.source not in skip for a in graph.lazy_statements), lines,
            [a for a in graph.lazy_unexplained if a.source not in skip])


def figures(graph: Graph, floors=FLOORS, exceptions=EXCEPTIONS) -> dict:
    """The figures of issue 19: files, floors, arrows, upward arrows, loops, lazy imports."""
    lines = graph.lines()
    return {"files": len(graph.sources),
            "floors": len({floor_of(m, floors) for m in graph.sources} - {None}),
            "arrows": len(graph.edges()),
            "upward arrows": len({(a.source, a.target) for a in upward(graph, floors)}),
            "of which documented": len({(a.source, a.target) for a in upward(graph, floors)}
                                       & set(exceptions)),
            "loops": len(loops(graph.edges())),
            "lines": lines,
            "imports inside functions": graph.lazy(),
            "per 1,000 lines": round(1000 * graph.lazy() / lines, 1),
            "without a reason comment": len(graph.lazy_unexplained),
            "counted by the budget (per 1,000 lines)": round(
                1000 * lazy_budget(graph, NOT_YET_COUNTED)[0]
                / lazy_budget(graph, NOT_YET_COUNTED)[1], 1)}


# ---------------------------------------------------------------------------- the tests

@pytest.fixture(scope="module")
def installed() -> Graph:
    return import_graph(*sources_in(installed_folders()))


def test_the_graph_is_read_from_the_installed_package(installed):
    assert installed_folders()["stagecheck.oracles"] == ROOT / "oracles"
    assert {"stagecheck", "stagecheck.oracles.cli", "stagecheck.spec.schema",
            "stagecheck.impl.buffer"} <= set(installed.sources)
    assert len(installed.arrows) > 200


def test_every_module_is_on_a_floor_and_no_import_runs_up_or_loops(installed):
    assert problems(installed) == []


def test_each_documented_exception_is_still_an_arrow(installed):
    assert EXCEPTIONS <= installed.edges(), "drop the arrows spec/models.py no longer draws"


def _plant(tmp_path: pathlib.Path, modules: dict[str, str]) -> Graph:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(text)
    return import_graph(*sources_in({"pkg": folder}))


PLANTED_FLOORS = [("bottom", ["pkg", "pkg.low", "pkg.other"]), ("top", ["pkg.high"])]


def test_the_checker_finds_a_planted_loop_even_inside_a_function(tmp_path):
    graph = _plant(tmp_path, {
        "low": "import pkg.other\n",
        "other": "def f():\n    from pkg import low  # planted\n    return low\n",
        "high": "from pkg.low import x\n"})
    assert problems(graph, PLANTED_FLOORS, set()) == ["import loop: pkg.low <-> pkg.other"]
    assert figures(graph, PLANTED_FLOORS, set())["loops"] == 1


def test_the_checker_finds_a_planted_upward_import(tmp_path):
    graph = _plant(tmp_path, {"low": "from . import high\n", "other": "", "high": ""})
    found = problems(graph, PLANTED_FLOORS, set())
    assert found == ["pkg.low (floor 'bottom') imports pkg.high (floor 'top', higher) at line 1"]
    assert problems(graph, PLANTED_FLOORS, {("pkg.low", "pkg.high")}) == []


def test_the_checker_finds_a_module_on_no_floor(tmp_path):
    graph = _plant(tmp_path, {"low": "", "other": "", "high": "", "stray": ""})
    assert problems(graph, PLANTED_FLOORS, set()) == [
        "pkg.stray is on no floor: add it to FLOORS in tests/unit/test_architecture.py"]


def test_imports_inside_functions_are_few_and_each_says_why(installed):
    count, lines, unexplained = lazy_budget(installed, NOT_YET_COUNTED)
    assert 1000 * count / lines <= MAX_LAZY_PER_1000_LINES, (count, lines)
    assert [f"{a.source}:{a.line} ({a.target})" for a in unexplained] == []


def test_the_lazy_import_budget_counts_what_it_should(tmp_path):
    graph = _plant(tmp_path, {
        "low": "import os\n\n\ndef f():\n    import json\n"
               "    from pkg import other  # why: planted\n",
        "other": "def g():\n    # why: one comment above a run of imports\n"
                 "    import json\n    import os\n\n    import sys\n",
        "high": ""})
    assert graph.lazy() == 5
    assert [(a.source, a.line) for a in graph.lazy_unexplained] == [("pkg.low", 5),
                                                                   ("pkg.other", 6)]
    count, lines, unexplained = lazy_budget(graph, {"pkg.other"})
    assert (count, lines, len(unexplained)) == (2, 6, 1)


def test_the_command_lines_start_reaches_no_heavy_library(installed):
    """What ``stagecheck --help`` and a usage error import: the modules the command line
    reaches through top-of-module imports; none of them imports a heavy library there."""
    top = [a for a in installed.arrows + installed.outside if not a.in_function]
    reached, todo = set(), ["stagecheck.oracles.cli", "stagecheck"]
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        parent = module.rpartition(".")[0]
        todo += [parent] if parent in installed.sources else []
        todo += [a.target for a in top if a.source == module and a.target in installed.sources]
    heavy = {(a.source, a.target) for a in top
             if a.source in reached and a.target.split(".")[0] in HEAVY}
    assert heavy == set()


def _reached_at_the_top(graph: Graph, roots) -> set[str]:
    """Our modules that importing ``roots`` loads: top-of-module imports, followed."""
    top: dict[str, set[str]] = {}
    for arrow in graph.arrows:
        if not arrow.in_function:
            top.setdefault(arrow.source, set()).add(arrow.target)
    reached, todo = set(), list(roots)
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += top.get(module, ())
    return reached


def test_what_every_run_preloads_imports_no_torch_or_triton(installed):
    """Every campaign imports the project's modules first (``oracles/_preload.py``: all
    but ``_HEAVY``, and every package it walks into); torch and triton take seconds, so
    none of those modules may reach them through imports at its top."""
    from stagecheck.oracles._preload import _HEAVY
    roots = [m for m in installed.sources if not m.endswith(".__main__")
             and (not m.startswith(_HEAVY) or m in installed.packages)]
    reached = _reached_at_the_top(installed, roots)
    slow = {(a.source, a.target) for a in installed.outside if not a.in_function
            and a.source in reached and a.target.split(".")[0] in ("torch", "triton")}
    assert slow == set()


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


def _modules() -> list[pathlib.Path]:
    return sorted(p for folder in PACKAGES.values() for p in (ROOT / folder).rglob("*.py"))


def _lines(path: pathlib.Path) -> int:
    """The lines of ``path``, as ``wc -l`` counts them in a file that ends in a newline."""
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("path", [p for p in _modules() if p.relative_to(ROOT).parts[0]
                                  in ("oracles", "spec", "impl")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_longer_than_500_lines_unless_it_holds_one_idea(path):
    rel = path.relative_to(ROOT).as_posix()
    lines = _lines(path)
    if rel not in LONG_MODULES:
        assert lines <= MAX_MODULE_LINES, (
            f"{rel} has {lines} lines, more than {MAX_MODULE_LINES}: split it into modules "
            "of one idea each, or name the one idea it holds in LONG_MODULES")


def test_each_long_module_is_there_and_still_long():
    """``LONG_MODULES`` names no module that is gone or has become short."""
    found = {rel: _lines(ROOT / rel) for rel in LONG_MODULES if (ROOT / rel).is_file()}
    assert set(found) == set(LONG_MODULES), set(LONG_MODULES) - set(found)
    assert {rel: n for rel, n in found.items() if n <= MAX_MODULE_LINES} == {}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_rules(path):
    rel = path.relative_to(ROOT).as_posix()
    names = _imports(path)
    ours = {n for n in names if n.split(".")[0] == "stagecheck"}
    bare = {n for n in names if n.split(".")[0] in ("spec", "impl", "oracles")}
    assert not bare, f"{rel} imports {bare}: import them as stagecheck.<name>"
    package = path.relative_to(ROOT).parts[0]
    if package == "spec":
        allowed: tuple[str, ...] = ("stagecheck.spec",)
        if rel == "spec/models.py":
            allowed += ("stagecheck.impl",) + tuple(b for _, b in EXCEPTIONS)
        assert all(n.startswith(allowed) for n in ours), (rel, ours)
        assert not {n.split(".")[0] for n in names} & HEAVY, (rel, names)
    if package == "impl":
        assert all(n.startswith("stagecheck.impl") for n in ours), (rel, ours)
    if rel != "oracles/symbolic/_crosshair.py":
        assert not {n for n in names if n.split(".")[0] in ("crosshair", "z3")}, rel


@pytest.mark.parametrize("rel", ["stagecheck/__init__.py", "oracles/errors.py",
                                 "oracles/messages.py", "oracles/options.py",
                                 "oracles/interrupt.py", "oracles/cli.py",
                                 "oracles/config.py", "oracles/commands/__init__.py",
                                 "oracles/stdio.py", "oracles/commands/crash.py",
                                 "oracles/environment.py"])
def test_the_command_lines_first_imports_are_light(rel):
    top = _imports(ROOT / rel, top_level_only=True)
    assert not {n.split(".")[0] for n in top} & HEAVY, top
    ours = {n for n in top if n.startswith("stagecheck")}
    assert ours <= {"stagecheck", "stagecheck.oracles", "stagecheck.oracles.messages",
                    "stagecheck.oracles.errors", "stagecheck.oracles.options",
                    "stagecheck.oracles.config", "stagecheck.oracles.commands",
                    "stagecheck.oracles.stdio", "stagecheck.oracles.text",
                    "stagecheck.oracles.paths", "stagecheck.oracles.commands.crash",
                    "stagecheck.oracles.environment"}, ours


if __name__ == "__main__":
    where = ({name: pathlib.Path(sys.argv[1]) / folder for name, folder in PACKAGES.items()}
             if len(sys.argv) > 1 else installed_folders())
    measured = import_graph(*sources_in(where))
    for key, value in figures(measured).items():
        print(f"{key}: {value}")
    for problem in problems(measured):
        print("  " + problem)
