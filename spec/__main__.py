"""Print the specification as Markdown: ``python -m stagecheck.spec > docs/spec.md``."""

from stagecheck.spec.prose import render_spec
from stagecheck.spec.schemas import BUILTIN_SCHEMAS


def render() -> str:
    return render_spec(list(BUILTIN_SCHEMAS.values()))


if __name__ == "__main__":
    print(render(), end="")
