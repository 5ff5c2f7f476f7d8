//! `om bench step --model convnet|encoder|crnn_ctc [--threads T] [--mode fast|exact]
//! [--steps N] [--warmup W]`: the training steps of `shared/BENCHMARKS.md` (clear grads,
//! forward, loss, backward; `om_ops::models::benchmarks`), N = 20 timed steps after W = 5
//! warm-up steps. Prints `MODEL threads=T mode=M median_ms=X min_ms=Y`.

use super::{time_ms, Flags};
use onemodel::ops::models::benchmarks::{BenchModel, BenchStep};
use onemodel::{Error, Result};

pub fn run(args: &[String]) -> Result<()> {
    let flags = Flags::parse(args, &["--model", "--threads", "--mode", "--path", "--steps", "--warmup"], &[])?;
    let model = flags.get("--model").ok_or_else(|| Error::argument("bench", "--model convnet|encoder|crnn_ctc is required"))?;
    let model = BenchModel::parse(model)
        .ok_or_else(|| Error::argument("bench", format!("unknown model `{model}` (convnet, encoder, crnn_ctc)")))?;
    let (steps, warmup) = (flags.usize_or("--steps", 20)?, flags.usize_or("--warmup", 5)?);
    let settings = flags.apply_settings()?;
    let step = BenchStep::new(model, 0)?;
    let times = time_ms(warmup, steps, 1, || step.step().map(drop))?;
    println!(
        "{} threads={} mode={} median_ms={:.2} min_ms={:.2}",
        model.name(),
        settings.threads,
        settings.mode,
        times.median(),
        times.min()
    );
    Ok(())
}
