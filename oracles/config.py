"""``[tool.stagecheck]`` in ``pyproject.toml``: defaults for the command line.

Found as pytest finds its rootdir file: from the current folder up to the first
``pyproject.toml`` (the search stops there, whether or not it has the table). Every
key is an option's long name (``max-capacity``; ``max_capacity`` is read the same),
applies to the commands its option in ``options.TABLE`` names, and is validated by the
option's own check, so a bad value reads the same whichever way it came, said of
``[tool.stagecheck] KEY in PATH``. An unknown key is an error, never ignored, with the
closest key (``did_you_mean``, the command line's hint for a misspelt option). The
command line wins over the file. Relative paths (``save-dir``, ``shims``, a ``schema``
file) are taken from the folder of the ``pyproject.toml``.

Standard library only (``tomllib``; ``tomli`` on Python 3.10): read before any heavy
import.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from stagecheck.oracles import messages
from stagecheck.oracles.errors import ConfigError, StagecheckError
from stagecheck.oracles.text import did_you_mean
from stagecheck.oracles.options import TABLE, Integer, Names, Seconds, Texts, Whole

__all__ = ["KEYS", "Config", "find_pyproject", "load_config"]


@dataclass(frozen=True)
class Key:
    """One ``[tool.stagecheck]`` key (derived from its option in ``options.TABLE``): the
    commands it sets, the argparse ``dest`` there, how its value is checked (the
    option's own check, said of the option's field), whether it is a path."""

    commands: tuple[str, ...]
    dest: str
    field: str
    check: Callable[[str, Any], Any]
    path: bool = False     # a path (or paths): taken from the pyproject.toml's folder


def _keys() -> dict[str, Key]:
    keys: dict[str, Key] = {}
    for o in TABLE:
        if o.key is None:
            continue
        if o.key in keys:
            raise ImportError(f"two options of the table claim the key {o.key!r}")
        keys[o.key] = Key(o.key_commands, o.dest, o.field, o.check, o.path)
    return keys


#: every key there is, by its option's long name (options.TABLE)
KEYS: dict[str, Key] = _keys()


@dataclass
class Config:
    """The ``[tool.stagecheck]`` table of ``path`` (None: no pyproject.toml, or no table),
    checked; ``values`` by key, paths made absolute."""

    path: str | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def defaults_for(self, command: str) -> dict[str, Any]:
        """``dest -> value`` for the options of ``command`` the file sets."""
        return {KEYS[k].dest: v for k, v in self.values.items()
                if command in KEYS[k].commands}

    def summary(self, command: str, args: Any = None) -> str:
        """The file's settings for ``command``; given the parsed ``args``, only those the
        command line did not override."""
        shown = [f"{k}={v!r}" for k, v in self.values.items() if command in KEYS[k].commands
                 and (args is None or getattr(args, KEYS[k].dest, None) == v)]
        return ", ".join(shown)


def find_pyproject(start: str | None = None) -> str | None:
    """The first ``pyproject.toml`` from ``start`` (the current folder) upwards. The
    search stops at the first entry of that name: one that is not a regular file (a
    folder, a FIFO, a link to nothing) is a ``ConfigError``, never passed over for a
    file further up nor opened (a FIFO would block)."""
    folder = os.path.abspath(start or os.getcwd())
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.lexists(candidate):
            if os.path.isfile(candidate):
                return candidate
            raise ConfigError.of(messages.CONFIG_NOT_FILE, candidate,
                                 what=_not_a_file(candidate))
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _not_a_file(path: str) -> str:
    """What ``path`` is, said of an entry that is not a regular file."""
    if os.path.isdir(path):
        return "a folder"
    if not os.path.exists(path):
        return "a link to nothing"
    return "a FIFO, socket or device"


def _toml():
    if sys.version_info >= (3, 11):
        import tomllib   # the standard library's reader, on the Pythons that have it
        return tomllib
    import tomli   # the 'tomli; python_version < "3.11"' dependency
    return tomli


def file_words(problem: str, flag: str, key: str, value: Any) -> str:
    """An option's ``problem`` in the words of the file that set it: its key, not the
    command line's flag, and a boolean as TOML writes it (``false``, not ``False``)."""
    problem = problem.replace(f"{flag} ", f"{key} ")
    if isinstance(value, bool):
        problem = problem.replace(str(value), str(value).lower(), 1)
    return problem


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
    except (OSError, ValueError) as exc:    # TOMLDecodeError; UnicodeDecodeError: not UTF-8
        raise ConfigError.of(messages.CONFIG_UNREADABLE, path, error=str(exc)) from None
    except RecursionError:                  # arrays or tables nested thousands deep
        raise ConfigError.of(messages.CONFIG_UNREADABLE, path,
                             error=messages.CONFIG_TOO_DEEP) from None
    table = document.get("tool", {}).get("stagecheck") if isinstance(
        document.get("tool"), dict) else None
    if table is None:
        return Config(path=None)
    if not isinstance(table, dict):
        raise ConfigError.of(messages.CONFIG_NOT_TABLE, path)
    folder = os.path.dirname(path)
    values: dict[str, Any] = {}
    spelt: dict[str, str] = {}          # key -> how the table spelt it
    for raw_key, raw_value in table.items():
        key = raw_key.replace("_", "-")
        spec = KEYS.get(key)
        if spec is None:
            raise ConfigError.of(messages.CONFIG_UNKNOWN_KEY, raw_key, path=path,
                                 known=", ".join(sorted(KEYS)),
                                 hint=did_you_mean(key, KEYS))
        if key in spelt:
            raise ConfigError.of(messages.CONFIG_TWICE, key, path=path, first=spelt[key],
                                 second=raw_key)
        spelt[key] = raw_key
        try:
            _refuse_wrong_type(spec, raw_key, raw_value)
            value = spec.check(spec.field, raw_value)
        except StagecheckError as exc:
            error = exc if isinstance(exc, ConfigError) else ConfigError(
                file_words(exc.problem, f"--{key}", raw_key, raw_value), exc.fix,
                value=exc.value, option=key)
            raise error.located(f"[tool.stagecheck] {raw_key} in {path}") from None
        if isinstance(value, tuple):    # a list, as argparse gives a repeatable option
            value = list(value)
        if spec.path or (key == "schema" and (value.endswith(".py") or ".py:" in value)):
            value = ([os.path.join(folder, v) for v in value] if isinstance(value, list)
                     else os.path.join(folder, value))     # a schema file too, not a name
        values[key] = value
    return Config(path=path, values=values)


#: the TOML types a key of each kind of check takes (the command line's checks also read
#: text, since argparse gives every value as text; a TOML value has a type of its own)
_TOML_TYPES = {Whole: ((int,), "a whole number", "{key} = {example}"),
               Integer: ((int,), "a whole number", "{key} = {example}"),
               Seconds: ((int, float), "a number of seconds", "{key} = {example}"),
               Texts: ((list,), "a list of strings", '{key} = ["..."]'),
               Names: ((list,), "a list of strings", '{key} = ["..."]')}


def _refuse_wrong_type(spec: Key, raw_key: str, value: Any) -> None:
    """A value of another TOML type than its key takes (``examples = "50"``, ``shims =
    "x.py"``) is a ``ConfigError``, never read as the command line would read text."""
    kind = _TOML_TYPES.get(type(spec.check))
    if kind is None:
        return
    types, wanted, example = kind
    if isinstance(value, bool) or not isinstance(value, types):
        given = f"a TOML {'string' if isinstance(value, str) else type(value).__name__} " \
            f"({value!r})"
        shown = getattr(spec.check, "example", "1")
        try:                # the number it meant ('50', 50.0), where it is one of the type
            number = float(value) if isinstance(value, (str, float)) else math.nan
        except ValueError:
            number = math.nan
        if math.isfinite(number) and (number.is_integer() or float in types):
            shown = str(int(number)) if number.is_integer() else str(number)
        raise ConfigError.of(messages.CONFIG_WRONG_TYPE, raw_key, raw_key, given=given,
                             wanted=wanted, example=example.format(key=raw_key,
                                                                   example=shown))
