//! `om bench step --model convnet|encoder|crnn_ctc [--threads T] [--mode fast|exact]
//! [--steps N] [--warmup W]`: the training steps of `shared/BENCHMARKS.md` (clear grads,
//! forward, loss, backward; `om_models::benchmarks`), N = 20 timed steps after W = 5
//! warm-up steps. Prints `MODEL threads=T mode=M median_ms=X min_ms=Y`.

use super::{time_ms, ModelArg};
use crate::args::{parse_count, KernelArgs, Outcome};
use clap::Args;
use om_models::benchmarks::{BenchModel, BenchStep};
use std::io::Write;

/// Options of `om bench step`.
#[derive(Args, Debug)]
pub struct StepArgs {
    /// The benchmark model
    #[arg(long, value_enum)]
    model: ModelArg,
    /// Timed steps
    #[arg(long, default_value_t = 20, value_parser = parse_count)]
    steps: usize,
    /// Untimed warm-up steps
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    #[command(flatten)]
    kernel: KernelArgs,
}

/// Runs `om bench step ...`.
pub fn run(o: &StepArgs) -> Outcome {
    let (model, steps, warmup) = (BenchModel::from(o.model), o.steps, o.warmup);
    let settings = o.kernel.apply()?;
    let step = BenchStep::new(model, 0)?;
    let times = time_ms(warmup, steps, 1, || step.step().map(drop))?;
    outln!(
        "{} threads={} mode={} median_ms={:.2} min_ms={:.2}",
        model.name(),
        settings.threads,
        settings.mode,
        times.median(),
        times.min()
    );
    Ok(())
}
