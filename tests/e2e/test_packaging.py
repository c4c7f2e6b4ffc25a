"""One import name: what the distribution installs, and the facade it offers."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

import stagecheck

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    # built from a copy, so setuptools' build/ folder never lands in the checkout
    source = tmp_path_factory.mktemp("source") / "stagecheck"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".stagecheck", ".hypothesis",
        ".pytest_cache", "docs", "benchmarks"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(source)], check=True, capture_output=True, timeout=300)
    (path,) = out.glob("stagecheck-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_installs_one_top_level_name(wheel):
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"stagecheck"}


def test_every_module_of_the_repository_layout_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    for folder in ("spec", "impl", "oracles", "stagecheck"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).as_posix()
            installed = f"stagecheck/{rel}" if folder == "stagecheck" else \
                f"stagecheck/{folder}/{rel}"
            assert installed in names, f"{path} is not packaged (pyproject's packages list)"


def test_the_facade_offers_exactly_its_all():
    assert stagecheck.__version__ == "0.1.0"
    for name in stagecheck.__all__:
        assert getattr(stagecheck, name) is not None, name
    with pytest.raises(AttributeError):
        stagecheck.no_such_name   # noqa: B018


def test_importing_stagecheck_loads_no_heavy_library():
    code = ("import sys, stagecheck, stagecheck.oracles.cli; "
            "print(sorted(m for m in ('torch', 'hypothesis', 'triton', 'crosshair', 'numpy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT / "tests").stdout
    assert out.strip() == "[]"


def test_python_m_stagecheck_is_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "stagecheck", "--help"], capture_output=True,
                          text=True, cwd=ROOT / "tests")
    assert proc.returncode == 0
    for command in ("diff", "spec", "replay", "kernel", "symbolic", "bench", "mutants"):
        assert command in proc.stdout
