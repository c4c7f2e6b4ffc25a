"""Docs generated from the code stay in step with it."""

import pathlib

from stagecheck.spec.__main__ import render

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_spec_page_is_what_python_m_spec_prints():
    assert (ROOT / "docs" / "spec.md").read_text() == render(), \
        "docs/spec.md is stale: run 'python -m stagecheck.spec > docs/spec.md'"


def test_readme_quickstart_is_two_commands_and_ci_runs_the_second():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quickstart")[1].split("```bash")[1].split("```")[0]
    commands = [line for line in block.strip().splitlines() if line.strip()]
    assert len(commands) == 2
    assert "stagecheck diff legacy single-loop" in commands[0]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[0] in ci and commands[1] in ci


# ------------------------------------------------------------------------------ every command
# Every `stagecheck ...` command in README.md and docs/*.md goes through the real parser:
# a command in a shell block (or after "$ " in any block) must parse whole, and the cheap
# ones are run; a command quoted in prose must name a real command, and every option it
# mentions must be an option of that command (a synopsis such as
# `stagecheck kernel [--examples N] [--device cpu|cuda]` cannot parse whole).

import argparse  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from stagecheck.oracles.cli import build_parser  # noqa: E402
from stagecheck.oracles.errors import UsageError  # noqa: E402
from stagecheck.oracles.targets import BUILTINS  # noqa: E402

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SHELL = {"bash", "sh", "shell", "console"}
PREFIXES = (["stagecheck"], ["python3", "-m", "stagecheck"], ["python", "-m", "stagecheck"])
SYNOPSIS = ("[", "|", "...", "$")


def _argv(text: str) -> list[str] | None:
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return None
    for prefix in PREFIXES:
        if words[:len(prefix)] == prefix:
            return words[len(prefix):]
    return None


def doc_commands() -> tuple[list, list]:
    """(where, text, argv) of every command in a shell block; of every one in prose."""
    whole, prose = [], []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for block in FENCE.finditer(text):
            lang, body = block.groups()
            for line in body.replace("\\\n", " ").splitlines():
                line, shell = line.strip(), lang in SHELL
                if line.startswith("$ "):
                    line, shell = line[2:], True
                if not shell:
                    continue
                for part in re.split(r"&&|\|\||;|\|", line):
                    argv = _argv(part.strip())
                    if argv is not None:
                        whole.append((path.name, part.strip(), argv))
        for quoted in re.finditer(r"`((?:python3? -m )?stagecheck [^`]+)`", FENCE.sub("", text)):
            argv = _argv(quoted.group(1).replace("\\|", "|"))
            if argv is not None:
                prose.append((path.name, quoted.group(1), argv))
    return whole, prose


WHOLE, PROSE = doc_commands()


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _parse(argv: list[str]):
    """Parse with the real parser; --help and --version answer as they do for users."""
    parser = build_parser()
    try:
        return parser.parse_args(argv)
    except SystemExit as exit_:        # --help
        assert exit_.code == 0, argv
        return None


def test_the_docs_have_commands_to_check():
    assert len(WHOLE) >= 15 and len(PROSE) >= 30
    assert any(argv[:2] == ["diff", "legacy"] for _, _, argv in WHOLE)


@pytest.mark.parametrize("where,text,argv", WHOLE, ids=[f"{w}: {t}" for w, t, _ in WHOLE])
def test_every_command_in_a_shell_block_parses(where, text, argv):
    _parse(argv)      # a usage error raises UsageError naming the argument


@pytest.mark.parametrize("where,text,argv", PROSE, ids=[f"{w}: {t}" for w, t, _ in PROSE])
def test_every_command_quoted_in_prose_names_real_commands_and_options(where, text, argv):
    commands = _commands(build_parser())
    if not argv or argv[0].startswith("-"):
        _parse(argv)                             # `stagecheck --version`
        return
    name = argv[0]
    if name.isupper():                           # `stagecheck COMMAND --help`
        options = {o for p in commands.values() for a in p._actions for o in a.option_strings}
    else:
        assert name in commands, f"{where}: {text!r}: no command {name!r}"
        options = {o for a in commands[name]._actions for o in a.option_strings}
    for word in argv[1:]:
        if word.startswith("--"):
            assert word.split("=")[0] in options, f"{where}: {text!r}: {name} has no {word}"
    if len(argv) > 1 and not any(mark in text for mark in SYNOPSIS) and not name.isupper():
        try:
            _parse(argv)                          # parses whole, or lacks only arguments
        except UsageError as error:               # a fragment: `stagecheck diff --seed 0`
            assert error.problem.startswith("missing argument(s): "), (where, text)


def _cheap(argv: list[str]) -> bool:
    if argv[:1] == ["schema"] or "--list" in argv or argv[:1] == ["--version"]:
        return True
    if argv[:1] in (["diff"], ["spec"]):
        args = _parse(argv)
        targets = [args.baseline, args.candidate] if argv[0] == "diff" else [args.target]
        return all(t in BUILTINS for t in targets) and args.device == "cpu" and \
            int(args.examples) <= 2000 and args.schema is None
    return False


CHEAP = [(w, t, a) for w, t, a in WHOLE if _cheap(a)]


def test_the_cheap_commands_include_the_main_job():
    assert any(a == ["diff", "legacy", "single-loop"] for _, _, a in CHEAP)
    assert any(a[:1] == ["schema"] for _, _, a in CHEAP)
    assert any("--list" in a for _, _, a in CHEAP)


@pytest.mark.parametrize("where,text,argv", CHEAP, ids=[f"{w}: {t}" for w, t, _ in CHEAP])
def test_the_cheap_commands_run_as_documented(where, text, argv, tmp_path):
    """Run in the repository (the docs' paths are relative to it); files they write go
    to a temporary folder."""
    argv = list(argv)
    for option in ("--json", "--junit-xml"):
        if option in argv:
            at = argv.index(option) + 1
            argv[at] = str(tmp_path / os.path.basename(argv[at]))
    if argv[0] in ("diff", "spec"):
        argv += ["--save-dir", str(tmp_path / "findings"), "--quiet"]
    proc = subprocess.run([sys.executable, "-m", "stagecheck", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{where}: {text}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------ tables

def test_readme_lists_every_config_key_with_the_commands_it_sets():
    from stagecheck.oracles.config import KEYS
    readme = (ROOT / "README.md").read_text()
    table = readme.split("| key | commands it sets | option |")[1].split("\n\n")[0]
    rows = {}
    for line in table.strip().splitlines()[1:]:
        key, commands, _ = [c.strip() for c in line.strip("|").split("|")]
        rows[key.strip("`")] = tuple(c.strip(" `") for c in commands.split(","))
    assert rows == {k: v.commands for k, v in KEYS.items()}


def test_docs_dependencies_states_every_bound_of_pyproject():
    import tomllib
    with open(ROOT / "pyproject.toml", "rb") as handle:
        project = tomllib.load(handle)["project"]
    page = (ROOT / "docs" / "dependencies.md").read_text()
    requirements = project["dependencies"] + [
        r for extra in project["optional-dependencies"].values() for r in extra]
    for requirement in requirements:
        match = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(>=\s*[\d.]+)?", requirement)
        name, bound = match.group(1), (match.group(2) or "").replace(" ", "")
        row = next((line for line in page.splitlines()
                    if line.startswith("|") and f"`{name}`" in line), None)
        assert row is not None, f"docs/dependencies.md has no row for {name}"
        if bound:
            assert f"`{bound}`" in row, f"{name}: pyproject says {bound}, the page: {row}"
