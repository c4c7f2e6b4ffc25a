"""The installed package holds every package folder: ``[tool.setuptools] packages`` in
pyproject.toml lists them by hand, and an editable install (the suite's) would hide one
left out until a wheel is built (the GPU machine installs a wheel)."""

from __future__ import annotations

import pathlib

import pytest

tomllib = pytest.importorskip("tomllib")     # Python 3.11+

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDERS = {"stagecheck": "stagecheck", "stagecheck.spec": "spec", "stagecheck.impl": "impl",
           "stagecheck.oracles": "oracles"}


def package_folders() -> set[str]:
    found = set()
    for name, folder in FOLDERS.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            if "__pycache__" not in rel:
                found.add(".".join((name,) + rel))
    return found


def test_every_package_folder_is_listed_and_every_listed_one_exists():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    assert package_folders() - listed == set(), "add these to pyproject.toml's packages"
    assert listed - package_folders() == set(), "these are listed but have no __init__.py"
