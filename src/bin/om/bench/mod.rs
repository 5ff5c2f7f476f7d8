//! `om bench`: benchmarks printing one `key=value` line per measurement, for same-run
//! comparison with PyTorch by the scripts in `tools/` (see `docs/performance.md`).
//!
//! - `om bench gemm` ([`gemm`]): one GEMM shape, GFLOP/s (`tools/compare.sh`).
//! - `om bench step` ([`step`]): the training steps of `shared/BENCHMARKS.md`
//!   (`tools/compare_steps.sh`).
//! - `om bench conv` ([`conv`]): the convnet benchmark's convolutions, per kernel.
//! - `om bench norm-pool` ([`norm_pool`]): pooling and normalisation on the benchmark shapes.
//! - `om bench lstm|attention` ([`layers`]): crnn_ctc's LSTM stack and the encoder's
//!   attention (`tools/bench_layers_torch.py`).
//! - `om bench sweep` ([`sweep`]): an MLP training step from 1 × 32 to 1024 × 2048 and a
//!   chain of 64 element-wise operators (`tools/compare_sweep.sh`).
//! - `om bench memory` ([`memory`]): pool, heap and RSS figures of a warm benchmark step
//!   inside an activation scope (`docs/memory.md`).
//!
//! Every benchmark takes the kernel settings of [`crate::args::KernelArgs`] (`--threads`,
//! `--mode`, `--path` mean the same everywhere; `--reps` too where it applies) and times
//! through [`time_ms`].

use crate::args::Outcome;
use clap::{Subcommand, ValueEnum};
use om_models::benchmarks::BenchModel;
use onemodel::Result;
use std::time::Instant;

mod conv;
mod gemm;
mod layers;
mod memory;
mod norm_pool;
mod step;
mod sweep;

/// The benchmarks of `om bench`.
#[derive(Subcommand, Debug)]
pub enum Bench {
    /// One GEMM shape, GFLOP/s (tools/compare.sh)
    Gemm(gemm::GemmArgs),
    /// The training steps of shared/BENCHMARKS.md, median and fastest ms (tools/compare_steps.sh)
    Step(step::StepArgs),
    /// The convnet benchmark's convolutions, per kernel
    Conv(conv::ConvArgs),
    /// Pooling and normalisation on the benchmark models' shapes
    NormPool(norm_pool::NormPoolArgs),
    /// crnn_ctc's LSTM stack, forward + backward
    Lstm(layers::LayerArgs),
    /// The encoder's attention, forward + backward
    Attention(layers::LayerArgs),
    /// Pool, heap and RSS figures of a warm benchmark step (docs/memory.md)
    Memory(memory::MemoryArgs),
    /// An MLP step from 1 × 32 to 1024 × 2048 and a 64-op element-wise chain (tools/compare_sweep.sh)
    Sweep(sweep::SweepArgs),
}

impl Bench {
    /// The command's name (`bench gemm`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Bench::Gemm(_) => "bench gemm",
            Bench::Step(_) => "bench step",
            Bench::Conv(_) => "bench conv",
            Bench::NormPool(_) => "bench norm-pool",
            Bench::Lstm(_) => "bench lstm",
            Bench::Attention(_) => "bench attention",
            Bench::Memory(_) => "bench memory",
            Bench::Sweep(_) => "bench sweep",
        }
    }
}

/// Runs `om bench <what> ...`.
pub fn run(bench: &Bench) -> Outcome {
    match bench {
        Bench::Gemm(a) => gemm::run(a),
        Bench::Step(a) => step::run(a),
        Bench::Conv(a) => conv::run(a),
        Bench::NormPool(a) => norm_pool::run(a),
        Bench::Lstm(a) => layers::run(layers::Layer::Lstm, a),
        Bench::Attention(a) => layers::run(layers::Layer::Attention, a),
        Bench::Memory(a) => memory::run(a),
        Bench::Sweep(a) => sweep::run(a),
    }
}

/// A benchmark model of `shared/BENCHMARKS.md` (`om_models::benchmarks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelArg {
    /// Conv-BN-ReLU-pool ×2, conv-ReLU, global average pool, linear
    Convnet,
    /// Embedding and two post-norm transformer layers
    Encoder,
    /// Conv-ReLU-pool ×2, 2-layer bidirectional LSTM, linear, CTC
    #[value(name = "crnn_ctc")]
    CrnnCtc,
}

impl From<ModelArg> for BenchModel {
    fn from(m: ModelArg) -> BenchModel {
        match m {
            ModelArg::Convnet => BenchModel::Convnet,
            ModelArg::Encoder => BenchModel::Encoder,
            ModelArg::CrnnCtc => BenchModel::CrnnCtc,
        }
    }
}

/// Wall times of repeated runs, in milliseconds, sorted.
pub struct Times(Vec<f64>);

impl Times {
    /// The median run.
    pub fn median(&self) -> f64 {
        self.0[self.0.len() / 2]
    }

    /// The fastest run (on a busy machine, the one the scheduler interrupted least).
    pub fn min(&self) -> f64 {
        self.0[0]
    }
}

/// Runs `f` `warmup` times untimed, then `reps` (at least 1) times timed, each timed run
/// made of `inner` calls (its time is divided by `inner`).
pub fn time_ms(warmup: usize, reps: usize, inner: usize, mut f: impl FnMut() -> Result<()>) -> Result<Times> {
    for _ in 0..warmup {
        f()?;
    }
    let inner = inner.max(1);
    let mut ms = (0..reps.max(1))
        .map(|_| {
            let start = Instant::now();
            for _ in 0..inner {
                f()?;
            }
            Ok(start.elapsed().as_secs_f64() * 1e3 / inner as f64)
        })
        .collect::<Result<Vec<f64>>>()?;
    ms.sort_by(f64::total_cmp);
    Ok(Times(ms))
}

/// How many calls of `f` fill about 20 ms (at least 1, at most `cap`), from one timed call.
pub fn calls_per_20ms(cap: usize, mut f: impl FnMut() -> Result<()>) -> Result<usize> {
    let start = Instant::now();
    f()?;
    let once = start.elapsed().as_secs_f64().max(1e-7);
    Ok(((0.02 / once) as usize).clamp(1, cap))
}
