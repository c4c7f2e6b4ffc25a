"""``python -m stagecheck``: the command line."""

from stagecheck.oracles.cli import entry_point

if __name__ == "__main__":
    entry_point()
