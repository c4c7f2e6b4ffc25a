#!/usr/bin/env bash
# Every GPU result in docs/cuda.md comes from this one script, run on the H200:
#   OUT=some/dir bash benchmarks/gpu_results.sh
# Each step has its own time limit so one slow step cannot hide the others.
set -u
OUT=$(realpath -m "${OUT:-gpu-results}"); mkdir -p "$OUT"
. benchmarks/device_setup.sh
LOG="$OUT/gpu_log.txt"
step() { local limit=$1; shift; echo "### $* (limit ${limit}s)" | tee -a "$LOG";
         local t0=$SECONDS; timeout "$limit" "$@" >>"$LOG" 2>&1; local rc=$?
         echo "### rc=$rc wall=$((SECONDS - t0))s" | tee -a "$LOG"; }
step 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
  python3 -c "import torch, triton, numpy, hypothesis, sys; print(sys.version.split()[0],
  \"torch\", torch.__version__, \"triton\", triton.__version__, \"numpy\", numpy.__version__,
  \"hypothesis\", hypothesis.__version__)"'
step 150 python3 -m pytest -q -p no:cacheprovider tests/gpu
step 90 python3 -m stagecheck kernel --device cuda --examples 2000 --json "$OUT/kernel_oracle1.json"
step 240 python3 -m stagecheck diff legacy single-loop --device cuda --examples 5000 \
  --kernel always --save-dir "$OUT/findings-unused" --json "$OUT/diff_cuda.json"
step 60 python3 benchmarks/bench_kernel.py --device cuda
step 45 python3 -m stagecheck bench legacy single-loop --device cuda --json "$OUT/bench_single.json"
step 45 python3 -m stagecheck bench legacy prefix-migration --device cuda --json "$OUT/bench_prefix.json"
step 30 python3 benchmarks/hazard_program.py
step 30 python3 benchmarks/hazard_program.py --stagecheck
step 40 env TORCH_CUDA_SANITIZER=1 python3 benchmarks/hazard_program.py
step 60 compute-sanitizer --tool racecheck python3 benchmarks/hazard_program.py
step 60 compute-sanitizer --tool memcheck python3 benchmarks/hazard_program.py
rm -rf "$OUT/findings-unused"
