# README's two commands (.ci/run) on a clean clone of this checkout's HEAD, in a fresh
# venv, beside a CPU load: two `yes` processes keep both CPUs busy (BURN=no: none of its
# own, for a second run started beside the first). Writes LOG (default
# /tmp/ci-beside-load-TAG.log): the commit first, .ci/run's output, then rc, wall-clock
# seconds and the load average at the end.
#   bash benchmarks/ci_beside_load.sh TAG            # with two busy processes
#   BURN=no bash benchmarks/ci_beside_load.sh TAG2   # beside the first run
set -u
TAG=${1:?usage: bash benchmarks/ci_beside_load.sh TAG}
ROOT=$(git rev-parse --show-toplevel)
LOG=${LOG:-/tmp/ci-beside-load-$TAG.log}
DIR=/tmp/ci-beside-load-$TAG; VENV=/tmp/ci-beside-load-venv-$TAG
rm -rf "$DIR" "$VENV"
git clone -q "$ROOT" "$DIR"
(cd "$DIR" && git rev-parse HEAD) > "$LOG"
PIDS=""
if [ "${BURN:-yes}" = yes ]; then
  yes > /dev/null & PIDS="$PIDS $!"
  yes > /dev/null & PIDS="$PIDS $!"
fi
start=$(date +%s)
( cd "$DIR" && python3 -m venv "$VENV" && . "$VENV/bin/activate" && bash .ci/run ) >> "$LOG" 2>&1
rc=$?
end=$(date +%s)
[ -n "$PIDS" ] && kill $PIDS
echo "rc=$rc wall=$((end - start))s loadavg=$(cat /proc/loadavg)" >> "$LOG"
tail -3 "$LOG"
exit $rc
