#!/usr/bin/env bash
# Whether a change altered any verdict: the JSON reports of this checkout and another
# (each with its own .venv), on the fixtures and the main runs, compared with the times,
# the command lines and the checkouts' paths left out.
#   bash benchmarks/same_reports.sh OTHER_CHECKOUT [OUT_DIR]
# Prints each report that differs (and whether its verdict and error findings are equal),
# then the count, and whether the exit codes are equal.
set -u
THIS=$(cd "$(dirname "$0")/.." && pwd)
OTHER=$(cd "$1" && pwd)
OUT=${2:-$(mktemp -d)}
reports() {     # CHECKOUT DIR
  local ck=$1 dir=$2
  mkdir -p "$dir"; rm -f "$dir/codes.txt"
  run() { local name=$1; shift
          (cd "$ck" && .venv/bin/python -m stagecheck "$@" --json "$dir/$name.json" --no-save \
             >/dev/null 2>&1); echo "$name rc=$?" >> "$dir/codes.txt"; }
  for f in "$ck"/tests/targets/buggy_*.py "$ck"/tests/targets/equivalent_*.py; do
    run "$(basename "$f" .py)" diff single-loop "tests/targets/$(basename "$f")::stage_postprocess_inputs_to_gpu"
  done
  run main0 diff legacy single-loop
  run main3 diff legacy single-loop --seed 3
  run main2000 diff legacy single-loop --examples 2000
  run spec spec single-loop
  run prefix diff single-loop prefix-migration
  run specdec diff specdec specdec
}
reports "$THIS" "$OUT/this" & reports "$OTHER" "$OUT/other" & wait
python3 - "$OUT" "$THIS" "$OTHER" <<'PY'
import glob, json, os, sys
out, this, other = sys.argv[1:4]

def norm(path, root):
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items()
                    if "seconds" not in k and k not in ("manifest", "command", "version")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return json.dumps(strip(json.load(open(path))), sort_keys=True).replace(root, "ROOT")

names = sorted(os.path.basename(p) for p in glob.glob(f"{out}/this/*.json"))
differ = [n for n in names if not os.path.exists(f"{out}/other/{n}")
          or norm(f"{out}/this/{n}", this) != norm(f"{out}/other/{n}", other)]
def errors(path, root):
    r = json.loads(norm(path, root))
    return r.get("verdict"), [f for f in r.get("findings", []) if f.get("severity") == "error"]

for n in differ:
    same = (os.path.exists(f"{out}/other/{n}")
            and errors(f"{out}/this/{n}", this) == errors(f"{out}/other/{n}", other))
    print(f"differs: {n} (verdict and error findings {'equal' if same else 'DIFFER'})")
print(f"{len(names)} reports, {len(differ)} differ; exit codes equal:",
      open(f"{out}/this/codes.txt").read() == open(f"{out}/other/codes.txt").read())
PY
