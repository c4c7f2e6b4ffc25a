# A/B on the GPU: the two batched-engine tests of tests/gpu/test_gpu.py, this wheel (.whl) and another (.whl_base), alternately.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$PWD
for w in head base head base; do
  dir=.whl; [ $w = base ] && dir=.whl_base
  rm -rf /tmp/site && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $ROOT/$dir/*.whl
  rm -rf /tmp/run && mkdir -p /tmp/run && cp -r $ROOT/tests $ROOT/impl $ROOT/pyproject.toml /tmp/run/
  ( cd /tmp/run && unset TRITON_INTERPRET && PYTHONPATH=/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider -rf tests/gpu/test_gpu.py -k "silent or batched" 2>&1 | tail -4 ) > "$OUT/ab_$w.txt"
  echo "### $w"; cat "$OUT/ab_$w.txt" | cut -c1-400
done
