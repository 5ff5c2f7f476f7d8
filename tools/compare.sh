#!/usr/bin/env bash
# Runs `om bench gemm` (fast and exact) and torch.matmul alternately, ROUNDS times per thread
# count, and prints the median GFLOP/s of each and the ratios ours/torch.
# Usage: tools/compare.sh [ROUNDS] [THREADS...]   (env TORCH_PY, SHAPES override defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}; shift || true
THREADS=${*:-1 2}
PY=${TORCH_PY:-/tmp/torch/bin/python}
SHAPES=${SHAPES:-"64x64x64 256x256x256 512x512x512 1024x1024x1024 2048x64x64 64x2048x64 8x128x512 32x288x1024"}
cargo build --release --quiet --bin om
LOG=$(mktemp)
bench() {
  for s in $SHAPES; do
    IFS=x read -r m k n <<<"$s"
    ./target/release/om bench gemm --m "$m" --k "$k" --n "$n" --threads "$1" --mode "$2" --reps 9 >>"$LOG"
  done
}
for t in $THREADS; do
  for r in $(seq "$ROUNDS"); do
    bench "$t" fast
    "$PY" tools/bench_matmul_torch.py --threads "$t" --reps 9 $SHAPES >>"$LOG"
    bench "$t" exact
  done
done
python3 - "$LOG" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    key = (int(f["m"]), int(f["k"]), int(f["n"]), int(f["threads"]))
    runs.setdefault(key, {}).setdefault(f["mode"], []).append(float(f["gflops"]))
print(f"{'m x k x n':>16} {'thr':>3} {'fast':>7} {'exact':>7} {'torch':>7} {'fast/t':>7} {'exact/t':>7}")
for (m, k, n, t), modes in sorted(runs.items(), key=lambda kv: (kv[0][3], kv[0][0] * kv[0][1] * kv[0][2])):
    med = {mode: statistics.median(v) for mode, v in modes.items()}
    fa, ex, to = med["fast"], med["exact"], max(med["torch"], 1e-9)
    print(f"{f'{m}x{k}x{n}':>16} {t:>3} {fa:7.1f} {ex:7.1f} {to:7.1f} {fa/to:7.2f} {ex/to:7.2f}")
PY
rm -f "$LOG"
