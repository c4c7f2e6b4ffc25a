"""The targets stage: resolve a target specification to a staging function.

``target.py``: the specs (builtin, ``module:function``, ``file.py::function``,
``git:REV:file.py::function``), the ``Target`` type and ``load_target``; ``source.py``:
compiling a file's function with its shims, without running its module; ``git.py``:
reading a file at a revision; ``trust.py``: which specs a replay file may run. This
face only names what they offer.
"""

from __future__ import annotations

from stagecheck.oracles.targets.source import (BUILTIN_SHIMS, MAX_SOURCE_BYTES, Shim,
                                               decode_source, load_function_from_source,
                                               load_shims)
from stagecheck.oracles.targets.target import (BUILTINS, FileSource, Target, TargetRef,
                                               is_file_spec, load_target, read_file_target,
                                               remember_schema_spec, schema_spec,
                                               target_from_callable, target_ref, target_source)
from stagecheck.oracles.targets.trust import repository_root, trusted_path, trusted_spec

__all__ = ["BUILTINS", "BUILTIN_SHIMS", "FileSource", "MAX_SOURCE_BYTES", "Shim", "Target",
           "TargetRef", "decode_source", "is_file_spec", "load_function_from_source",
           "load_shims", "load_target", "read_file_target", "remember_schema_spec",
           "repository_root", "schema_spec", "target_from_callable", "target_ref",
           "target_source", "trusted_path", "trusted_spec"]
