//! `om bench sweep`: cost as the work grows, from dispatch-bound to GEMM-bound, for
//! same-run comparison with PyTorch (`tools/bench_sweep_torch.py`, `tools/compare_sweep.sh`;
//! figures in `docs/performance.md`).
//!
//! - `mlp`: one training step of linear(W→W)-ReLU-linear(W→10), cross-entropy on a seeded
//!   batch `[B, W]`, SGD (lr 0.01) or Adam (lr 0.001) update: clear the gradients, forward,
//!   loss, backward, optimizer step. One line per `B×W` of `--sizes` (default
//!   `1x32,16x128,64x512,256x1024,1024x2048`), with the GFLOP/s of its matrix products
//!   (`4·B·W² + 6·B·W·10` per step: forward, weight and hidden-input gradients).
//! - `chain`: 64 element-wise operators on a `[N]` leaf (N = `--chain-len`, default 256),
//!   cycling `x·1.01`, `+0.01`, `tanh`, `·x` (a tensor product with the leaf), then a sum
//!   and backward: the cost of an operator's dispatch and autograd record, `us_per_op` =
//!   step time / 64 (each op's forward and backward).
//!
//! Prints `mlp batch=B width=W optim=O threads=T mode=M median_ms=X min_ms=Y gflops=G` and
//! `chain ops=64 len=N threads=T mode=M median_ms=X min_ms=Y us_per_op=U`; each median is
//! over `--reps` timed runs of about 20 ms each (several steps per run when a step is short)
//! after warm-up steps.

use super::{calls_per_20ms, time_ms};
use crate::args::{parse_count, Failure, KernelArgs, Outcome};
use clap::{Args, ValueEnum};
use onemodel::nn::{Forward, Linear, Module};
use onemodel::ops::{self, optim};
use onemodel::optim::Optimizer;
use onemodel::{Result, Tensor};
use std::io::Write;

/// Classes of the MLP's output layer.
const CLASSES: usize = 10;
/// Operators in the element-wise chain.
const CHAIN_OPS: usize = 64;
/// Largest batch × width the MLP sweep accepts (1024 × 2048 × 8 = 16 Mi elements).
const MAX_ELEMENTS: usize = 1 << 24;

/// Which part of the sweep runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SweepCase {
    /// The MLP training step at every size, then the chain
    All,
    /// The MLP training step at every size
    Mlp,
    /// The chain of 64 element-wise operators with backward
    Chain,
}

/// The MLP's optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OptimArg {
    /// Plain SGD, lr 0.01
    Sgd,
    /// Adam, lr 0.001
    Adam,
}

/// Options of `om bench sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Which part of the sweep
    #[arg(long, value_enum, default_value_t = SweepCase::All)]
    case: SweepCase,
    /// The MLP's batch × width sizes, comma-separated
    #[arg(long, default_value = "1x32,16x128,64x512,256x1024,1024x2048", value_parser = parse_sizes)]
    sizes: Sizes,
    /// The MLP's optimizer
    #[arg(long, value_enum, default_value_t = OptimArg::Sgd)]
    optim: OptimArg,
    /// Elements of the chain's tensor
    #[arg(long, default_value_t = 256, value_parser = parse_count)]
    chain_len: usize,
    /// Timed runs per size (the median is printed)
    #[arg(long, default_value_t = 7, value_parser = parse_count)]
    reps: usize,
    /// Untimed warm-up steps per size
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    #[command(flatten)]
    kernel: KernelArgs,
}

/// Batch × width pairs of the MLP sweep.
#[derive(Clone, Debug)]
pub struct Sizes(Vec<(usize, usize)>);

/// Parses `BxW[,BxW...]`, each at least 1 and at most [`MAX_ELEMENTS`] elements of `x`.
fn parse_sizes(v: &str) -> std::result::Result<Sizes, String> {
    let one = |s: &str| -> std::result::Result<(usize, usize), String> {
        let err = || format!("expected BATCHxWIDTH (e.g. 64x512), got {s:?}");
        let (b, w) = s.trim().split_once('x').ok_or_else(err)?;
        let (b, w) = (b.parse::<usize>().map_err(|_| err())?, w.parse::<usize>().map_err(|_| err())?);
        if b == 0 || w == 0 {
            return Err(format!("{s:?}: batch and width must be at least 1"));
        }
        if b.checked_mul(w).is_none_or(|n| n > MAX_ELEMENTS) || w.checked_mul(w).is_none_or(|n| n > MAX_ELEMENTS) {
            return Err(format!("{s:?}: batch × width and width × width must be at most {MAX_ELEMENTS}"));
        }
        Ok((b, w))
    };
    let sizes = v.split(',').map(one).collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Sizes(sizes))
}

/// Runs `om bench sweep ...`.
pub fn run(o: &SweepArgs) -> Outcome {
    let settings = o.kernel.apply()?;
    let tag = format!("threads={} mode={}", settings.threads, settings.mode);
    if o.case != SweepCase::Chain {
        for &(batch, width) in &o.sizes.0 {
            let mut step = mlp_step(batch, width, o.optim)?;
            let times = timed(o, &mut step)?;
            let flops = (4 * batch * width * width + 6 * batch * width * CLASSES) as f64;
            let optim = if o.optim == OptimArg::Sgd { "sgd" } else { "adam" };
            outln!(
                "mlp batch={batch} width={width} optim={optim} {tag} median_ms={:.4} min_ms={:.4} gflops={:.1}",
                times.median(),
                times.min(),
                flops / (times.median() * 1e6)
            );
        }
    }
    if o.case != SweepCase::Mlp {
        let mut step = chain_step(o.chain_len)?;
        let times = timed(o, &mut step)?;
        outln!(
            "chain ops={CHAIN_OPS} len={} {tag} median_ms={:.4} min_ms={:.4} us_per_op={:.3}",
            o.chain_len,
            times.median(),
            times.min(),
            times.median() * 1e3 / CHAIN_OPS as f64
        );
    }
    Ok(())
}

/// Warm-up, then `--reps` timed runs of about 20 ms each.
fn timed(o: &SweepArgs, step: &mut dyn FnMut() -> Result<()>) -> Outcome<super::Times> {
    for _ in 0..o.warmup {
        step()?;
    }
    let inner = calls_per_20ms(10_000, &mut *step)?;
    time_ms(0, o.reps, inner, step).map_err(Failure::from)
}

/// The MLP training step at `batch × width`: weights, batch and labels from fixed seeds.
fn mlp_step(batch: usize, width: usize, optim: OptimArg) -> Result<Box<dyn FnMut() -> Result<()>>> {
    let fc1 = Linear::with_seed(width, width, true, 1)?;
    let fc2 = Linear::with_seed(width, CLASSES, true, 2)?;
    let x = Tensor::randn_with_seed(&[batch, width], 3)?;
    let y = Tensor::from_vec_i32((0..batch).map(|i| ((i * 7 + 3) % CLASSES) as i32).collect(), &[batch])?;
    let mut params = fc1.parameter_tensors();
    params.extend(fc2.parameter_tensors());
    let mut opt: Box<dyn Optimizer> = match optim {
        OptimArg::Sgd => Box::new(optim::Sgd::new(params.clone(), 0.01)?),
        OptimArg::Adam => Box::new(optim::Adam::new(params.clone(), 0.001)?),
    };
    Ok(Box::new(move || {
        for p in &params {
            p.clear_grad();
        }
        let logits = fc2.forward(&ops::relu(&fc1.forward(&x)?)?)?;
        ops::cross_entropy(&logits, &y, None, Default::default())?.backward()?;
        opt.step()
    }))
}

/// The chain of [`CHAIN_OPS`] element-wise operators on a `[len]` leaf, summed, backward.
fn chain_step(len: usize) -> Result<Box<dyn FnMut() -> Result<()>>> {
    let x = Tensor::rand_uniform(&[len], -1.0, 1.0, 4)?.requires_grad()?;
    Ok(Box::new(move || {
        x.clear_grad();
        let mut y = x.clone();
        for i in 0..CHAIN_OPS {
            y = match i % 4 {
                0 => ops::mul_scalar(&y, 1.01)?,
                1 => ops::add_scalar(&y, 0.01)?,
                2 => ops::tanh(&y)?,
                _ => ops::mul(&y, &x)?,
            };
        }
        ops::sum(&y, None, false)?.backward()
    }))
}
