# The GPU tier and the protocol benchmark on the H200 in one call of the device tool
# (docs/cuda.md): the tier in four pytest processes at once, then the benchmark alone.
#   pip wheel --no-deps -w .whl .      # here, before the run
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
. benchmarks/device_setup.sh
LOG="$OUT/gpu_log.txt"
python3 -c "import torch, triton, numpy, hypothesis, sys; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, 'hypothesis', hypothesis.__version__)" > "$LOG" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
t0=$SECONDS
tier() { local name=$1; shift
         ( timeout 280 python3 -m pytest -q -p no:cacheprovider -rf "$@" > "$OUT/tier_$name.txt" 2>&1
           echo "rc=$?" >> "$OUT/tier_$name.txt" ) & }
tier calls tests/gpu/test_gpu.py tests/gpu/test_names_bound_at_load_gpu.py
tier buggy tests/gpu/test_protocols_gpu.py -k buggy
tier rest tests/gpu/test_protocols_gpu.py -k "not buggy and not host_issued"
tier early tests/gpu/test_protocols_gpu.py -k host_issued --durations=6
wait
echo "### tests/gpu in four processes: $((SECONDS - t0)) s wall" >> "$LOG"
for f in "$OUT"/tier_*.txt; do echo "### $f" >> "$LOG"; tail -15 "$f" >> "$LOG"; done
t0=$SECONDS
timeout 90 python3 benchmarks/bench_protocols.py --device cuda --sequences 40 --jobs 2 --skip first-finding >> "$LOG" 2>&1
echo "### bench throughput rc=$? $((SECONDS - t0)) s" >> "$LOG"
t0=$SECONDS
timeout 170 python3 benchmarks/bench_protocols.py --device cuda --skip throughput >> "$LOG" 2>&1
echo "### bench first-finding rc=$? $((SECONDS - t0)) s" >> "$LOG"
tail -c 9000 "$LOG"
t0=$SECONDS
timeout 120 python3 benchmarks/protocol_startup.py --device cuda --repeats 1 >> "$LOG" 2>&1
echo "### startup rc=$? $((SECONDS - t0)) s" >> "$LOG"
tail -c 3000 "$LOG"
