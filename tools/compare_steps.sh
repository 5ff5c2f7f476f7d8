#!/usr/bin/env bash
# Runs `om bench step` (fast and exact) and the same steps in PyTorch
# (tools/bench_steps_torch.py) in turn, ROUNDS times per model and thread count, and prints
# the median over rounds of each run's median step time with the ratios ours/PyTorch, and
# the 1-thread/2-thread speed-ups.
# Usage: tools/compare_steps.sh [ROUNDS] [THREADS...]
#   env TORCH_PY (default /tmp/torch/bin/python), MODELS (default: all three), STEPS (20),
#   BASE_OM (optional: another build's `om` binary, e.g. of an older commit, run in the same
#   rounds in fast mode and reported as `base` for a before/after ratio).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}; shift || true
THREADS=${*:-1 2}
PY=${TORCH_PY:-/tmp/torch/bin/python}
MODELS=${MODELS:-"convnet encoder crnn_ctc"}
STEPS=${STEPS:-20}
cargo build --release --quiet --bin om
LOG=$(mktemp)
lscpu | sed -n 's/^Model name: */cpu: /p'
for r in $(seq "$ROUNDS"); do
  for m in $MODELS; do
    for t in $THREADS; do
      ./target/release/om bench step --model "$m" --threads "$t" --mode fast --steps "$STEPS" >>"$LOG"
      if [ -n "${BASE_OM:-}" ]; then
        "$BASE_OM" bench step --model "$m" --threads "$t" --mode fast --steps "$STEPS" | sed 's/mode=fast/mode=base/' >>"$LOG"
      fi
      "$PY" tools/bench_steps_torch.py --model "$m" --threads "$t" --steps "$STEPS" >>"$LOG"
      ./target/release/om bench step --model "$m" --threads "$t" --mode exact --steps "$STEPS" >>"$LOG"
    done
  done
done
python3 - "$LOG" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    model = line.split()[0]
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    runs.setdefault((model, int(f["threads"])), {}).setdefault(f["mode"], []).append(float(f["median_ms"]))
med = {key: {mode: statistics.median(v) for mode, v in modes.items()} for key, modes in runs.items()}
base = all("base" in m for m in med.values())
extra = f" {'base ms':>8} {'base/t':>7} {'fast/base':>9}" if base else ""
print(f"{'model':>9} {'thr':>3} {'fast ms':>8} {'exact ms':>8} {'torch ms':>8} {'fast/t':>7} {'exact/t':>7} {'exact/fast':>10}{extra}")
for (model, t), m in sorted(med.items()):
    fa, ex, to = m["fast"], m["exact"], m["torch"]
    row = f"{model:>9} {t:>3} {fa:8.1f} {ex:8.1f} {to:8.1f} {fa/to:7.2f} {ex/to:7.2f} {ex/fa:10.2f}"
    if base:
        row += f" {m['base']:8.1f} {m['base']/to:7.2f} {fa/m['base']:9.2f}"
    print(row)
for model in sorted({k[0] for k in med}):
    if (model, 1) in med and (model, 2) in med:
        one, two = med[(model, 1)], med[(model, 2)]
        print(f"{model}: 2-thread speed-up fast {one['fast']/two['fast']:.2f}x, exact {one['exact']/two['exact']:.2f}x, torch {one['torch']/two['torch']:.2f}x")
PY
rm -f "$LOG"
