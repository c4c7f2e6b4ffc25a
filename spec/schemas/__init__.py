"""The built-in staging schemas, and the choice of one by a target's function name."""

from __future__ import annotations

from stagecheck.spec.schema import StagingSchema
from stagecheck.spec.schemas import mamba_postprocess

__all__ = ["BUILTIN_SCHEMAS", "DEFAULT_SCHEMA", "schema_for_function"]

#: name -> schema, in the order ``stagecheck schema list`` shows them
BUILTIN_SCHEMAS: dict[str, StagingSchema] = {
    s.name: s for s in (mamba_postprocess.SCHEMA,)
}
DEFAULT_SCHEMA = mamba_postprocess.SCHEMA


def schema_for_function(name: str) -> StagingSchema | None:
    """The built-in schema that describes a function called ``name``, if exactly one does."""
    found = [s for s in BUILTIN_SCHEMAS.values() if name in s.functions]
    return found[0] if len(found) == 1 else None
