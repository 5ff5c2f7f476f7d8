#!/usr/bin/env bash
# Cost as the work grows: runs `om bench sweep` (an MLP training step at batch × width from
# 1 × 32 to 1024 × 2048, and a chain of 64 element-wise operators with backward) and the same
# in PyTorch (tools/bench_sweep_torch.py) in turn, ROUNDS times per thread count, and prints
# per size the median over rounds of each run's median step time with the ratio ours/PyTorch,
# the GFLOP/s of the MLP's matrix products, and the chain's per-operator cost (µs per
# operator, forward and backward).
# Usage: tools/compare_sweep.sh [ROUNDS] [THREADS...]
#   env TORCH_PY (default /tmp/torch/bin/python), OPTIM (sgd or adam; default sgd),
#   SIZES (default 1x32,16x128,64x512,256x1024,1024x2048), MODE (fast or exact; default fast),
#   REPS (timed runs per size, default 7).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}; shift || true
THREADS=${*:-1 2}
PY=${TORCH_PY:-/tmp/torch/bin/python}
OPTIM=${OPTIM:-sgd}
SIZES=${SIZES:-1x32,16x128,64x512,256x1024,1024x2048}
MODE=${MODE:-fast}
REPS=${REPS:-7}
cargo build --release --quiet --bin om
LOG=$(mktemp)
lscpu | sed -n 's/^Model name: */cpu: /p'
for r in $(seq "$ROUNDS"); do
  for t in $THREADS; do
    ./target/release/om bench sweep --threads "$t" --mode "$MODE" --optim "$OPTIM" --sizes "$SIZES" --reps "$REPS" >>"$LOG"
    "$PY" tools/bench_sweep_torch.py --threads "$t" --optim "$OPTIM" --sizes "$SIZES" --reps "$REPS" >>"$LOG"
  done
done
python3 - "$LOG" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    case = line.split()[0]
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    size = f"{f['batch']}x{f['width']}" if case == "mlp" else f"{f['ops']} ops x {f['len']}"
    key = (case, int(f["threads"]), size)
    who = "torch" if f["mode"] == "torch" else "ours"
    runs.setdefault(key, {}).setdefault(who, []).append(f)
def med(fs, k):
    return statistics.median(float(f[k]) for f in fs)
print(f"{'case':>5} {'thr':>3} {'size':>12} {'ours ms':>10} {'torch ms':>10} {'ours/torch':>10} {'ours GF/s':>9} {'torch GF/s':>10}")
order = lambda k: (k[1], k[0] != "mlp", [int(v) for v in re.findall(r"\d+", k[2])])
slower = []
for key in sorted(runs, key=order):
    case, t, size = key
    o, p = runs[key]["ours"], runs[key]["torch"]
    mo, mp = med(o, "median_ms"), med(p, "median_ms")
    rate = (lambda fs: f"{med(fs, 'gflops'):9.1f}") if case == "mlp" else (lambda fs: f"{'-':>9}")
    print(f"{case:>5} {t:>3} {size:>12} {mo:10.4f} {mp:10.4f} {mo/mp:10.2f} {rate(o)} {rate(p):>10}")
    if mo > mp:
        slower.append(f"{case} {size} at {t} thread(s) ({mo/mp:.2f}x)")
for key in sorted(runs, key=order):
    if key[0] == "chain":
        o, p = runs[key]["ours"], runs[key]["torch"]
        print(f"per-op overhead ({key[2]}, {key[1]} thread(s)): ours {med(o, 'us_per_op'):.2f} µs/op, PyTorch {med(p, 'us_per_op'):.2f} µs/op (forward + backward)")
print("slower than PyTorch: " + ("; ".join(slower) if slower else "none"))
PY
rm -f "$LOG"
