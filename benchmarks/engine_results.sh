#!/usr/bin/env bash
# The engine's figures in docs/benchmarks.md and docs/cuda.md (issue 15), on the H200
# host through the `device` tool:
#   OUT=some/dir bash benchmarks/engine_results.sh cpu     # bench_engine, mutants
#   OUT=some/dir bash benchmarks/engine_results.sh suite   # python -m pytest -n 2
#   OUT=some/dir bash benchmarks/engine_results.sh gpu     # CUDA tests, diff --device cuda
# Every step runs on two physical cores (taskset): the 2-core machine the goals name.
# The cpu and suite steps hide the GPU (CUDA_VISIBLE_DEVICES=), as on a CPU machine.
set -u
OUT=$(realpath -m "${OUT:-engine-results}"); mkdir -p "$OUT"
. benchmarks/device_setup.sh
export PATH=/tmp/site/bin:$PATH
CORES=$(lscpu -p=CPU,CORE | grep -v '^#' |
        awk -F, 'NR==1{c=$2; printf "%s", $1; next} $2!=c && !d {printf ",%s", $1; d=1}')
LOG="$OUT/engine_log.txt"
step() { local limit=$1; shift; echo "### $* (limit ${limit}s)" | tee -a "$LOG";
         local t0=$SECONDS; timeout "$limit" "$@" >>"$LOG" 2>&1; local rc=$?
         echo "### rc=$rc wall=$((SECONDS - t0))s" | tee -a "$LOG"; }
echo "### cores $CORES of: $(lscpu | grep -E '^Model name' | sed 's/  */ /g')" | tee -a "$LOG"
case "${1:-cpu}" in
cpu)
  export CUDA_VISIBLE_DEVICES=
  step 330 taskset -c "$CORES" python3 benchmarks/bench_engine.py --examples 20000 \
    --repeats 3 --skip shrink
  for target in single-loop legacy; do
    echo "### mutants $target" | tee -a "$LOG"; t0=$SECONDS
    timeout 200 taskset -c "$CORES" python3 -m stagecheck mutants "$target" --jobs 2 \
      --quiet --json "$OUT/mutants_$target.json" > "$OUT/mutants_$target.txt" 2>&1
    echo "### rc=$? wall=$((SECONDS - t0))s" | tee -a "$LOG"
  done ;;
suite)
  export CUDA_VISIBLE_DEVICES=
  # the whole checkout but its import facade (the installed wheel is the package), as a
  # git repository of its own (the pre-merge tests read revisions of it)
  (cd "$ROOT" && tar --exclude=./stagecheck --exclude=./.whl --exclude=./.git -cf - .) | tar -xf -
  git init -q && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm run
  step 590 taskset -c "$CORES" python3 -m pytest -n 2 -q -p no:cacheprovider --durations=20 ;;
gpu)
  step 240 python3 -m pytest -q -p no:cacheprovider tests/gpu
  step 200 taskset -c "$CORES" python3 -m stagecheck diff legacy single-loop --device cuda \
    --examples 20000 --save-dir "$OUT/findings" --json "$OUT/diff_cuda.json" ;;
esac
