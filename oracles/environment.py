"""The environment variables stagecheck reads, each with what it takes. A reader falls
back to its default on a value it cannot use (a worker, the pytest plugin: nothing to
refuse there), so the command line checks them all before a run and refuses a bad one
(exit 2 naming the variable, its value and the fix): a typo is never silently the
default."""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass

from stagecheck.oracles import messages
from stagecheck.oracles.errors import UsageError

__all__ = ["HYPOTHESIS_HOME", "VARIABLES", "Variable", "hypothesis_outside_the_repository",
           "refuse_bad_environment"]


@dataclass(frozen=True)
class Variable:
    name: str
    takes: str           # "seconds": a finite number above 0; "mib": a whole number >= 64
    sets: str            # what it changes, for the message


VARIABLES = (
    Variable("STAGECHECK_CODE_SECONDS", "seconds",
             "the CPU seconds one call of schema or protocol code may take"),
    Variable("STAGECHECK_LOAD_SECONDS", "seconds", "the seconds loading a target may take"),
    Variable("STAGECHECK_GIT_SECONDS", "seconds", "the seconds one git command may take"),
    Variable("STAGECHECK_PROGRESS_INTERVAL", "seconds",
             "the seconds between two progress lines off a terminal"),
    Variable("STAGECHECK_MEMORY_MIB", "mib", "the memory a worker may hold, in MiB"),
)

#: what each kind of value takes, in the message's words
_TAKES = {"seconds": "a number of seconds above 0 (e.g. 10 or 2.5)",
          "mib": "a whole number of MiB, at least 64 (e.g. 2048)"}


def _usable(takes: str, value: str) -> bool:
    if takes == "mib":
        return value.isdigit() and int(value) >= 64
    try:
        number = float(value)
    except ValueError:
        return False
    return math.isfinite(number) and number > 0


def refuse_bad_environment(environ=None) -> None:
    """A ``UsageError`` for the first variable of ``VARIABLES`` set to a value it does not
    take (an empty value counts as unset)."""
    environ = os.environ if environ is None else environ
    for variable in VARIABLES:
        value = environ.get(variable.name)
        if value and not _usable(variable.takes, value.strip()):
            raise UsageError.of(messages.ENVIRONMENT_VALUE, value, sets=variable.sets,
                                takes=_TAKES[variable.takes], name=variable.name
                                ).located(f"environment variable {variable.name}")


#: hypothesis's own storage variable: where it keeps what it caches (its example database is
#: not used by the command line, ``database`` None; its cache of the constants of local
#: source files, ``.hypothesis/constants``, is written wherever this points)
HYPOTHESIS_HOME = "HYPOTHESIS_STORAGE_DIRECTORY"


def hypothesis_outside_the_repository(environ=None) -> None:
    """Point hypothesis's storage (``HYPOTHESIS_HOME``) at a folder of this user's in the
    temporary folder, unless the variable is set: a command-line run writes nothing into
    the current folder but its save folder (an audit: every run with a target file in the
    current folder wrote ``.hypothesis/constants/`` there, ``--no-save`` too). Set before
    hypothesis is imported; the workers inherit it."""
    environ = os.environ if environ is None else environ
    if not environ.get(HYPOTHESIS_HOME):
        uid = os.getuid() if hasattr(os, "getuid") else "user"
        environ[HYPOTHESIS_HOME] = os.path.join(tempfile.gettempdir(),
                                                f"stagecheck-hypothesis-{uid}")
