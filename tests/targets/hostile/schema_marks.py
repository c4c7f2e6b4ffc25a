"""hostile schema: writes schema-ran.txt into the current folder when imported (a replay file
that names it must not make the checker run it)."""

from stagecheck.spec.schemas import BUILTIN_SCHEMAS

with open("schema-ran.txt", "w") as _fh:
    _fh.write("the schema file ran")

SCHEMA = BUILTIN_SCHEMAS["mamba-postprocess"]
