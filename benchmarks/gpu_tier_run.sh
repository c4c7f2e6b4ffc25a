# The GPU tier alone: benchmarks/gpu_gates_run.sh without its benchmarks, for a short device
# budget (docs/cuda.md). Run like it, with .whl/ carried.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
. benchmarks/device_setup.sh
LOG="$OUT/gpu_log.txt"
python3 -c "import torch, triton, sys; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)" > "$LOG" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
t0=$SECONDS
tier() { local name=$1; shift
         ( timeout 280 python3 -m pytest -q -p no:cacheprovider -rf "$@" > "$OUT/tier_$name.txt" 2>&1
           echo "rc=$?" >> "$OUT/tier_$name.txt" ) & }
tier calls tests/gpu/test_gpu.py tests/gpu/test_names_bound_at_load_gpu.py
tier buggy tests/gpu/test_protocols_gpu.py -k buggy
tier rest tests/gpu/test_protocols_gpu.py -k "not buggy and not host_issued"
tier early tests/gpu/test_protocols_gpu.py -k host_issued
wait
echo "### tests/gpu in four processes: $((SECONDS - t0)) s wall" >> "$LOG"
for f in "$OUT"/tier_*.txt; do echo "### $f" >> "$LOG"; tail -8 "$f" >> "$LOG"; done
