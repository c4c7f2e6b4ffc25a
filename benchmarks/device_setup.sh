# Sourced at the start of a run on the GPU machine (no network there): installs the
# stagecheck wheel and crosshair's wheels carried in .whl/ (see docs/cuda.md), then
# works from a copy of the tests and benchmarks outside the checkout, so that
# `import stagecheck` is the installed package and not the checkout's facade folder.
#   pip wheel --no-deps -w .whl .      # here, before the run (crosshair's wheels too)
set -u
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
rm -rf /tmp/run && mkdir -p /tmp/run
cp -r tests benchmarks impl pyproject.toml /tmp/run/
cd /tmp/run
