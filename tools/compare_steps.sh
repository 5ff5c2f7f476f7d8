#!/usr/bin/env bash
# Runs `om bench step` (fast and exact) and the same steps in PyTorch eager
# (tools/bench_steps_torch.py), PyTorch compiled (`--compile`: torch.compile, inductor default
# mode) and JAX (tools/bench_steps_jax.py: jit(value_and_grad), pinned with taskset to T
# cores) in turn, ROUNDS times per model and thread count, and prints the median over rounds
# of each run's median step time, the best anchor (the fastest of eager, compiled and JAX)
# with the ratios ours/best and ours/eager, the compile times (never part of a step time),
# the 1-thread/2-thread speed-ups, and a sanity check of every anchor: same parameter count
# as ours, finite loss at step 0, loss lower after 3 SGD steps, compiled loss = eager loss.
# Usage: tools/compare_steps.sh [ROUNDS] [THREADS...]
#   env TORCH_PY (default /tmp/torch/bin/python), MODELS (default: all three), STEPS (20),
#   ANCHORS (default "torch compiled jax"; an anchor that cannot run here is dropped with a
#   note: jax needs `pip install -r tools/requirements.txt`),
#   BASE_OM (optional: another build's `om` binary, e.g. of an older commit, run in the same
#   rounds in fast mode and reported as `base` for a before/after ratio).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}; shift || true
THREADS=${*:-1 2}
PY=${TORCH_PY:-/tmp/torch/bin/python}
MODELS=${MODELS:-"convnet encoder crnn_ctc"}
STEPS=${STEPS:-20}
ANCHORS=${ANCHORS:-"torch compiled jax"}
if [[ " $ANCHORS " == *" jax "* ]] && ! "$PY" -c "import jax, optax" 2>/dev/null; then
  echo "note: jax/optax not importable by $PY: no JAX column (pip install -r tools/requirements.txt)"
  ANCHORS=${ANCHORS//jax/}
fi
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
      for a in $ANCHORS; do
        case $a in
          torch) "$PY" tools/bench_steps_torch.py --model "$m" --threads "$t" --steps "$STEPS" >>"$LOG" ;;
          compiled) "$PY" tools/bench_steps_torch.py --compile --model "$m" --threads "$t" --steps "$STEPS" 2>/dev/null >>"$LOG" ;;
          jax) taskset -c "0-$((t - 1))" "$PY" tools/bench_steps_jax.py --model "$m" --threads "$t" --steps "$STEPS" 2>/dev/null >>"$LOG" ;;
          *) echo "unknown anchor $a (torch, compiled, jax)"; exit 2 ;;
        esac
      done
      ./target/release/om bench step --model "$m" --threads "$t" --mode exact --steps "$STEPS" >>"$LOG"
    done
  done
done
python3 - "$LOG" <<'PY'
import math, re, statistics, sys
runs, fields = {}, {}
for line in open(sys.argv[1]):
    model = line.split()[0]
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    key = (model, int(f["threads"]))
    runs.setdefault(key, {}).setdefault(f["mode"], []).append(float(f["median_ms"]))
    fields.setdefault((model, f["mode"]), []).append(f)
med = {key: {mode: statistics.median(v) for mode, v in modes.items()} for key, modes in runs.items()}
anchors = [a for a in ("torch", "compiled", "jax") if all(a in m for m in med.values())]
base = all("base" in m for m in med.values())
cols = "".join(f" {a + ' ms':>11}" for a in anchors)
extra = f" {'base ms':>8} {'base/best':>9} {'fast/base':>9}" if base else ""
print(f"{'model':>9} {'thr':>3} {'fast ms':>8} {'exact ms':>8}{cols} {'best':>8} {'fast/best':>9} {'exact/best':>10} {'fast/eager':>10} {'exact/fast':>10}{extra}")
for (model, t), m in sorted(med.items()):
    fa, ex = m["fast"], m["exact"]
    best_name = min(anchors, key=lambda a: m[a])
    best = m[best_name]
    row = f"{model:>9} {t:>3} {fa:8.1f} {ex:8.1f}" + "".join(f" {m[a]:11.1f}" for a in anchors)
    row += f" {best_name:>8} {fa/best:9.2f} {ex/best:10.2f} {fa/m['torch']:10.2f} {ex/fa:10.2f}" if "torch" in m else f" {best_name:>8} {fa/best:9.2f} {ex/best:10.2f} {'-':>10} {ex/fa:10.2f}"
    if base:
        row += f" {m['base']:8.1f} {m['base']/best:9.2f} {fa/m['base']:9.2f}"
    print(row)
for model in sorted({k[0] for k in med}):
    if (model, 1) in med and (model, 2) in med:
        one, two = med[(model, 1)], med[(model, 2)]
        ups = ", ".join(f"{mode} {one[mode]/two[mode]:.2f}x" for mode in ["fast", "exact"] + anchors)
        print(f"{model}: 2-thread speed-up {ups}")
# compile times (first step of a compiled/JAX run: tracing + compilation + one step; not in any median)
for (model, mode), fs in sorted(fields.items()):
    c = [float(f["compile_ms"]) for f in fs if "compile_ms" in f]
    if c:
        print(f"{model}: {mode} compile (first step) median {statistics.median(c)/1e3:.1f} s over {len(c)} runs")
# sanity checks of the anchors against ours
bad = 0
for model in sorted({k[0] for k in med}):
    ours = fields.get((model, "fast"), [])
    n_ours = {f.get("params") for f in ours}
    notes = []
    for mode in anchors:
        fs = fields.get((model, mode), [])
        n = {f.get("params") for f in fs}
        loss0 = [float(f["loss0"]) for f in fs]
        after = [float(f.get("loss_after", "nan")) for f in fs]
        ok = n == n_ours and all(math.isfinite(x) for x in loss0) and all(a < l for a, l in zip(after, loss0))
        bad += not ok
        notes.append(f"{mode} params={'/'.join(sorted(n))} loss0={statistics.median(loss0):.4f}→{statistics.median(after):.4f} {'ok' if ok else 'MISMATCH'}")
    if "torch" in anchors and "compiled" in anchors:
        e = [float(f["loss0"]) for f in fields[(model, "torch")]]
        c = [float(f["loss0"]) for f in fields[(model, "compiled")]]
        same = max(abs(a - b) / abs(a) for a, b in zip(e, c)) < 1e-4
        bad += not same
        notes.append(f"compiled loss0 {'=' if same else '!='} eager loss0 (rel 1e-4)")
    loss_ours = statistics.median(float(f["loss0"]) for f in ours)
    print(f"check {model}: ours params={'/'.join(sorted(n_ours))} loss0={loss_ours:.4f}; " + "; ".join(notes))
if bad:
    print(f"check: {bad} anchor check(s) failed")
PY
rm -f "$LOG"
