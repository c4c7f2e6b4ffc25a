set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
. benchmarks/device_setup.sh
LOG="$OUT/gpu_log.txt"
step() { local limit=$1; shift; echo "### $* (limit ${limit}s)" | tee -a "$LOG";
         local t0=$SECONDS; timeout "$limit" "$@" >>"$LOG" 2>&1; local rc=$?
         echo "### rc=$rc wall=$((SECONDS - t0))s" | tee -a "$LOG"; }
step 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import torch, triton, numpy, hypothesis, sys; print(sys.version.split()[0], \"torch\", torch.__version__, \"triton\", triton.__version__, \"numpy\", numpy.__version__, \"hypothesis\", hypothesis.__version__)"'
step 330 python3 -m pytest -q -p no:cacheprovider -rf tests/gpu
step 150 python3 benchmarks/bench_protocols.py --device cuda --sequences 120 --jobs 2
step 60 bash -c 'for i in 1 2; do /usr/bin/time -f "main job on cuda: %e s wall, %U s user" python3 -m stagecheck diff legacy single-loop --device cuda --no-save -q | tail -3; done'
tail -c 11000 "$LOG"
