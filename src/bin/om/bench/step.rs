//! `om bench step --model convnet|encoder|crnn_ctc [--threads T] [--mode fast|exact]
//! [--steps N] [--warmup W]`: the training steps of `shared/BENCHMARKS.md` (clear grads,
//! forward, loss, backward; `om_models::benchmarks`), N = 20 timed steps after W = 5
//! warm-up steps. Prints `MODEL threads=T mode=M median_ms=X min_ms=Y params=N loss0=L`
//! (N: the parameter count; L: the loss of the first warm-up step, for the anchors'
//! sanity check in `tools/compare_steps.sh`).

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
    let params: usize = step.parameters().iter().map(|p| p.numel()).sum();
    // the first warm-up step (if any) gives the starting loss
    let loss0 = if warmup > 0 { step.step()? } else { f32::NAN };
    let times = time_ms(warmup.saturating_sub(1), steps, 1, || step.step().map(drop))?;
    outln!(
        "{} threads={} mode={} median_ms={:.2} min_ms={:.2} params={params} loss0={loss0:.4}",
        model.name(),
        settings.threads,
        settings.mode,
        times.median(),
        times.min()
    );
    Ok(())
}
