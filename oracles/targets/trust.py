"""The replay trust check: which targets, shims and schemas a file may name and run.

A replay file is written by whoever made it; running what it names runs their code.
Builtins, and files (or revisions of files) inside the user's repository, may run
without the user naming them; a module target never may.
"""

from __future__ import annotations

import os
from typing import Any

from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.targets.git import GitHung, run_git
from stagecheck.oracles.targets.target import (BUILTINS, is_file_spec, is_module_spec,
                                               split_file_spec, split_git_spec)

__all__ = ["repository_root", "trusted_path", "trusted_spec"]


def repository_root(folder: str | None = None) -> str:
    """The git top level of ``folder`` (default: the current folder), else the folder
    itself: what a replay file may name code inside of."""
    folder = os.path.realpath(folder or os.getcwd())
    try:
        top = run_git("rev-parse", "--show-toplevel", cwd=folder)
    except OSError:           # no git on this machine
        return folder
    except GitHung:           # the narrower root: trusts less; a git target says why
        return folder
    return os.path.realpath(top.stdout.strip()) if top.returncode == 0 and \
        top.stdout.strip() else folder


def _inside(path: str, top: str) -> bool:
    real = os.path.realpath(path)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def trusted_spec(spec: Any, top: str) -> bool:
    """Whether a target spec read from a file (a replay file) may run without the user
    naming it: a builtin, or a file (or ``git:REV:`` file) whose path is inside ``top``.
    A module target is not: importing a module runs code chosen by whoever made the
    file, wherever the module lies."""
    if not isinstance(spec, str):
        return False
    if spec in BUILTINS:
        return True
    if is_file_spec(spec):
        try:
            path = split_git_spec(spec)[1] if spec.startswith("git:") else split_file_spec(spec, spec)[0]
        except TargetLoadError:
            return True           # not a loadable spec: loading it says what is wrong
        return _inside(path, top)
    return not is_module_spec(spec)   # neither form: loading it says what is wrong


def trusted_path(path: Any, top: str) -> bool:
    """Whether a shim or schema file named by a replay file lies inside ``top``."""
    return isinstance(path, str) and _inside(path, top)
