"""``[tool.stagecheck]`` in ``pyproject.toml``: defaults for the command line.

Found as pytest finds its rootdir file: from the current folder up to the first
``pyproject.toml`` (the search stops there, whether or not it has the table). Every
key is an option's long name (``max-capacity``; ``max_capacity`` is read the same),
applies to each command that has that option, and is validated by the same code as
the option, so a bad value reads the same whichever way it came, said of
``[tool.stagecheck] KEY in PATH``. An unknown key is an error, never ignored. The
command line wins over the file. Relative paths (``save-dir``, ``shims``) are taken
from the folder of the ``pyproject.toml``.

Standard library only (``tomllib``; ``tomli`` on Python 3.10): read before any heavy
import.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from stagecheck.oracles import messages
from stagecheck.oracles.errors import ConfigError, StagecheckError
from stagecheck.oracles.options import (DEVICES, KERNEL_BACKENDS, KERNEL_MODES, choice, integer,
                                        seconds, whole)

__all__ = ["KEYS", "Config", "find_pyproject", "load_config"]

_CAMPAIGN = ("diff", "spec")
_TARGETS = ("diff", "spec", "symbolic", "bench", "mutants", "replay")


def _flag(option: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError.of(messages.CONFIG_NOT_BOOL, value, option)
    return value


def _text(option: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError.of(messages.CONFIG_NOT_TEXT, value, option)
    return value


def _texts(option: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError.of(messages.CONFIG_NOT_TEXTS, value, option)
    return value


@dataclass(frozen=True)
class Key:
    """One ``[tool.stagecheck]`` key: the commands it sets, the argparse ``dest`` there,
    how its value is checked (the option's own validator), how it is stored."""

    commands: tuple[str, ...]
    dest: str
    check: Callable[[str, Any], Any]
    store: Callable[[Any], Any] = lambda v: v
    path: bool = False     # a path (or paths): taken from the pyproject.toml's folder


#: every key there is, by its option's long name
KEYS: dict[str, Key] = {
    "examples": Key(_CAMPAIGN + ("kernel",), "examples",
                    lambda o, v: whole(o, v, 1, "500")),
    "seed": Key(_CAMPAIGN + ("kernel",), "seed", lambda o, v: integer(o, v)),
    "max-capacity": Key(_CAMPAIGN, "max_capacity", lambda o, v: whole(o, v, 1, "8")),
    "max-drafts": Key(_CAMPAIGN, "max_drafts", lambda o, v: whole(o, v, 0, "16")),
    "timeout": Key(_CAMPAIGN, "timeout", lambda o, v: seconds(o, v)),
    "steps": Key(_CAMPAIGN, "steps", lambda o, v: whole(o, v, 1, "2")),
    "gpu-busy-cycles": Key(_CAMPAIGN, "gpu_busy_cycles", lambda o, v: whole(o, v, 0, "1000000")),
    "device": Key(_CAMPAIGN + ("kernel", "bench"), "device", lambda o, v: choice(o, v, DEVICES)),
    "kernel": Key(_CAMPAIGN, "kernel", lambda o, v: choice(o, v, KERNEL_MODES)),
    "kernel-backend": Key(_CAMPAIGN, "kernel_backend",
                          lambda o, v: choice(o, v, KERNEL_BACKENDS)),
    "deferred-copies": Key(_CAMPAIGN, "deferred_copies", _flag),
    "out-of-contract": Key(_CAMPAIGN + ("mutants",), "no_out_of_contract", _flag,
                           store=lambda v: not v),
    "strict": Key(_CAMPAIGN + ("symbolic",), "strict", _flag),
    "save-dir": Key(_CAMPAIGN, "save_dir", _text, path=True),
    "shims": Key(_TARGETS, "shim", _texts, path=True),
    "schema": Key(_TARGETS, "schema", _text),
    "budget": Key(("mutants",), "budget", lambda o, v: whole(o, v, 1, "300")),
    "jobs": Key(("mutants",), "jobs", lambda o, v: whole(o, v, 1, "2")),
}


@dataclass
class Config:
    """The ``[tool.stagecheck]`` table of ``path`` (None: no pyproject.toml, or no table),
    checked; ``values`` by key, paths made absolute."""

    path: str | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def defaults_for(self, command: str) -> dict[str, Any]:
        """``dest -> value`` for the options of ``command`` the file sets."""
        return {KEYS[k].dest: KEYS[k].store(v) for k, v in self.values.items()
                if command in KEYS[k].commands}

    def summary(self, command: str, args: Any = None) -> str:
        """The file's settings for ``command``; given the parsed ``args``, only those the
        command line did not override."""
        shown = [f"{k}={v!r}" for k, v in self.values.items() if command in KEYS[k].commands
                 and (args is None or getattr(args, KEYS[k].dest, None) == KEYS[k].store(v))]
        return ", ".join(shown)


def find_pyproject(start: str | None = None) -> str | None:
    """The first ``pyproject.toml`` from ``start`` (the current folder) upwards."""
    folder = os.path.abspath(start or os.getcwd())
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _toml():
    if sys.version_info >= (3, 11):
        import tomllib
        return tomllib
    import tomli   # the 'tomli; python_version < "3.11"' dependency
    return tomli


def load_config(start: str | None = None) -> Config:
    """The checked ``[tool.stagecheck]`` table of the first pyproject.toml upwards from
    ``start``; an empty ``Config`` where there is none. Raises ``ConfigError`` (located
    at the key and the file) for an unreadable file, an unknown key or a bad value."""
    path = find_pyproject(start)
    if path is None:
        return Config()
    toml = _toml()
    try:
        with open(path, "rb") as handle:
            document = toml.load(handle)
    except (OSError, toml.TOMLDecodeError) as exc:
        raise ConfigError.of(messages.CONFIG_UNREADABLE, path, error=str(exc)) from None
    table = document.get("tool", {}).get("stagecheck") if isinstance(
        document.get("tool"), dict) else None
    if table is None:
        return Config(path=None)
    if not isinstance(table, dict):
        raise ConfigError.of(messages.CONFIG_NOT_TABLE, path)
    folder = os.path.dirname(path)
    values: dict[str, Any] = {}
    for raw_key, raw_value in table.items():
        key = raw_key.replace("_", "-")
        spec = KEYS.get(key)
        if spec is None:
            raise ConfigError.of(messages.CONFIG_UNKNOWN_KEY, raw_key, path=path,
                                 known=", ".join(sorted(KEYS)))
        try:
            value = spec.check(key.replace("-", "_"), raw_value)
        except StagecheckError as exc:
            error = exc if isinstance(exc, ConfigError) else ConfigError(
                exc.problem, exc.fix, value=exc.value, option=key)
            raise error.located(f"[tool.stagecheck] {raw_key} in {path}") from None
        if spec.path:
            value = ([os.path.join(folder, v) for v in value] if isinstance(value, list)
                     else os.path.join(folder, value))
        values[key] = value
    return Config(path=path, values=values)
