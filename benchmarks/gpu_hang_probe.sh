# The CUDA false hang, probed: the batched-engine CUDA tests of tests/gpu/test_gpu.py in
# three pytest processes at once (each campaign starts one worker per CPU), this wheel
# (.whl) and another (.whl_base); each hang the checker ends is traced
# (STAGECHECK_TRACE_HANGS) with the clock that passed its deadline.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$PWD
for w in ${WHEELS:-head base}; do
  dir=.whl; [ $w = base ] && dir=.whl_base
  rm -rf /tmp/site_$w && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_$w $ROOT/$dir/*.whl
  rm -rf /tmp/run_$w && mkdir -p /tmp/run_$w && cp -r $ROOT/tests $ROOT/impl $ROOT/pyproject.toml /tmp/run_$w/
  start=$(date +%s)
  for i in 1 2 3; do
    ( cd /tmp/run_$w && unset TRITON_INTERPRET && STAGECHECK_TRACE_HANGS=$OUT/trace_$w.jsonl PYTHONPATH=/tmp/site_$w \
      timeout ${LIMIT:-110} python3 -m pytest -q -p no:cacheprovider -rf tests/gpu/test_gpu.py -k "silent or batched" 2>&1 | tail -5 ) > "$OUT/probe_${w}_$i.txt" &
  done
  wait
  echo "### $w ($(( $(date +%s) - start )) s)"; cat "$OUT"/probe_${w}_*.txt | grep -E "passed|failed|FAILED|hang" | cut -c1-300
  echo "hangs the checker ended:"; cat "$OUT/trace_$w.jsonl" 2>/dev/null
done
