#!/bin/sh
# ts2ir over a directory of TorchScript cases (recipes/fixtures/ts_cases.py): each
# through ts2ir | ir-run, and ts2ir | ir-decompose | ir-run, against the
# outputs torch.jit.load gave. Prints one line per case and stage, and a
# count per stage at the end.
#   recipes/checks/check_ts_zoo.sh BIN_DIR CASE_DIR
set -u
BIN=$1
DIR=$2
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0; read_ok=0; run_ok=0; dec_ok=0
for pt in "$DIR"/*.pt; do
  case=$(basename "$pt" .pt)
  [ -f "$DIR/$case.inputs.npz" ] || continue
  n=$((n + 1))
  if ! "$BIN/ts2ir" "$pt" --example-inputs "$DIR/$case.inputs.npz" -o "$tmp/m.ir" 2> "$tmp/err"; then
    echo "$case: ts2ir: $(head -c 300 "$tmp/err")"
    continue
  fi
  read_ok=$((read_ok + 1))
  "$PY" - "$DIR/$case.inputs.npz" "$tmp/in.npz" <<'PYEOF'
import sys, numpy as np
ex = dict(np.load(sys.argv[1]))
np.savez(sys.argv[2], **{k: v for k, v in ex.items() if v.ndim > 0})
PYEOF
  for stage in run decomposed; do
    if [ $stage = decomposed ]; then
      "$BIN/ir-decompose" "$tmp/m.ir" -o "$tmp/s.ir" 2> "$tmp/err" || { echo "$case: ir-decompose: $(head -c 300 "$tmp/err")"; continue; }
    else
      cp "$tmp/m.ir" "$tmp/s.ir"
    fi
    if ! "$BIN/ir-run" "$tmp/s.ir" --inputs "$tmp/in.npz" -o "$tmp/out.npz" 2> "$tmp/err"; then
      echo "$case ($stage): ir-run: $(head -c 300 "$tmp/err")"
      continue
    fi
    if "$PY" - "$tmp/out.npz" "$DIR/$case.expected.npz" "$case ($stage)" <<'PYEOF'
import sys, numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
g, w = [got[k] for k in got.files], [want[k] for k in want.files]
if len(g) != len(w):
    print(sys.argv[3], "output count", len(g), "!=", len(w)); sys.exit(1)
worst = 0.0
for a, b in zip(g, w):
    if a.shape != b.shape:
        print(sys.argv[3], "shape", a.shape, "!=", b.shape); sys.exit(1)
    if b.size:
        worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b) / (1 + np.abs(b)))))
print(sys.argv[3], "max rel error %.2e" % worst)
sys.exit(0 if worst < 1e-3 else 1)
PYEOF
    then
      if [ $stage = run ]; then run_ok=$((run_ok + 1)); else dec_ok=$((dec_ok + 1)); fi
    fi
  done
done
echo "cases: $n; ts2ir: $read_ok; ts2ir | ir-run: $run_ok; ts2ir | ir-decompose | ir-run: $dec_ok"
