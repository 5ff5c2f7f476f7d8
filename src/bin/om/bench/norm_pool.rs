//! `om bench norm-pool`: forward and forward+backward of the pooling and normalisation
//! operators on the shapes of the benchmark models (`../shared/BENCHMARKS.md`), through
//! the public API with autograd, one `key=value` line per case (median of repetitions).
//!
//! `om bench norm-pool --threads T --mode fast|exact [--reps R] [--inner I] [--case NAME]`
//! (`--inner` fixes the calls per repetition, e.g. to count cycles with a profiler;
//! by default they fill about 20 ms)
//!
//! Cases: `bn_32x32x32x32`, `bn_32x64x16x16` (convnet, training with affine and running
//! stats), `maxpool_32x32x32x32`, `maxpool_32x64x16x16` (convnet), `maxpool_8x32x32x128`,
//! `maxpool_8x64x16x64` (crnn_ctc), `layernorm_1024x256` (encoder, affine).

use super::{calls_per_20ms, time_ms};
use crate::args::{parse_count, KernelArgs, Outcome};
use clap::{builder::PossibleValuesParser, Args};
use onemodel::{ops, Result, Tensor};
use std::io::Write;

/// One benchmark case: its name and a forward pass from the prepared inputs.
struct Case {
    name: &'static str,
    shape: &'static [usize],
    forward: fn(&Tensor, &Params) -> Result<Tensor>,
}

/// Affine parameters and running statistics (built once per case).
struct Params {
    gamma: Tensor,
    beta: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
}

fn bn(x: &Tensor, p: &Params) -> Result<Tensor> {
    ops::batch_norm2d(x, Some(&p.gamma), Some(&p.beta), Some(&p.running_mean), Some(&p.running_var), ops::BatchNormOptions::train())
}

fn maxpool(x: &Tensor, _: &Params) -> Result<Tensor> {
    ops::max_pool2d(x, 2)
}

fn layernorm(x: &Tensor, p: &Params) -> Result<Tensor> {
    ops::layer_norm(x, Some(&p.gamma), Some(&p.beta), 1e-5)
}

const CASES: &[Case] = &[
    Case { name: "bn_32x32x32x32", shape: &[32, 32, 32, 32], forward: bn },
    Case { name: "bn_32x64x16x16", shape: &[32, 64, 16, 16], forward: bn },
    Case { name: "maxpool_32x32x32x32", shape: &[32, 32, 32, 32], forward: maxpool },
    Case { name: "maxpool_32x64x16x16", shape: &[32, 64, 16, 16], forward: maxpool },
    Case { name: "maxpool_8x32x32x128", shape: &[8, 32, 32, 128], forward: maxpool },
    Case { name: "maxpool_8x64x16x64", shape: &[8, 64, 16, 64], forward: maxpool },
    Case { name: "layernorm_1024x256", shape: &[1024, 256], forward: layernorm },
];

/// Options of `om bench norm-pool`.
#[derive(Args, Debug)]
pub struct NormPoolArgs {
    /// Only this case [default: all]
    #[arg(long, value_parser = PossibleValuesParser::new(CASES.iter().map(|c| c.name)))]
    case: Option<String>,
    /// Calls per repetition [default: as many as fill about 20 ms]
    #[arg(long, value_parser = parse_count)]
    inner: Option<usize>,
    /// Timed repetitions
    #[arg(long, default_value_t = 15, value_parser = parse_count)]
    reps: usize,
    #[command(flatten)]
    kernel: KernelArgs,
}

/// Runs `om bench norm-pool ...`.
pub fn run(o: &NormPoolArgs) -> Outcome {
    let (settings, reps, inner, only) = (o.kernel.apply()?, o.reps, o.inner, o.case.as_deref());
    let (threads, mode) = (settings.threads, settings.mode);
    for case in CASES.iter().filter(|c| only.is_none_or(|o| o == c.name)) {
        let ((fwd, fwd_min), (both, both_min)) = measure(case, reps, inner)?;
        outln!(
            "norm_pool case={} threads={threads} mode={mode} fwd_ms={fwd:.4} fwdbwd_ms={both:.4} fwd_min_ms={fwd_min:.4} fwdbwd_min_ms={both_min:.4}",
            case.name
        );
    }
    Ok(())
}

/// Median and minimum milliseconds of the forward alone and of forward + backward.
fn measure(case: &Case, reps: usize, fixed: Option<usize>) -> Result<((f64, f64), (f64, f64))> {
    let ch = if case.shape.len() == 4 { case.shape[1] } else { case.shape[case.shape.len() - 1] };
    let p = Params {
        gamma: Tensor::randn_with_seed(&[ch], 2)?.requires_grad()?,
        beta: Tensor::randn_with_seed(&[ch], 3)?.requires_grad()?,
        running_mean: Tensor::zeros(&[ch])?,
        running_var: Tensor::ones(&[ch])?,
    };
    let x = Tensor::randn_with_seed(case.shape, 1)?.requires_grad()?;
    let y = (case.forward)(&x, &p)?;
    let g = Tensor::randn_with_seed(y.shape(), 4)?;
    drop(y);
    let step = |backward: bool| -> Result<()> {
        for t in [&x, &p.gamma, &p.beta] {
            t.clear_grad();
        }
        let y = (case.forward)(&x, &p)?;
        if backward {
            y.backward_with(Some(&g), false)?;
        }
        Ok(())
    };
    let time = |backward: bool| -> Result<(f64, f64)> {
        let inner = match fixed {
            Some(n) => n,
            None => calls_per_20ms(1000, || step(backward))?,
        };
        let t = time_ms(0, reps, inner, || step(backward))?;
        Ok((t.median(), t.min()))
    };
    Ok((time(false)?, time(true)?))
}
