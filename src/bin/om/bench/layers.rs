//! `om bench lstm` and `om bench attention`: forward + backward of one layer at a benchmark
//! model's shape, timed in-process (median of repetitions), for same-run comparison with
//! PyTorch (`tools/bench_layers_torch.py` times the same work in PyTorch).
//!
//! - `lstm`: crnn_ctc's recurrent stack, `x` `[32, 8, 512]` (time-major) through a 2-layer
//!   bidirectional LSTM with hidden size 128 (`ops::lstm`), backward from a fixed gradient
//!   of `y`.
//! - `attention`: one encoder attention call, q, k, v `[16, 4, 64, 64]` split from
//!   `[16, 64, 256]` projections by reshape and permute (strided views, as
//!   `MultiheadAttention` makes them), scale 1/8, an additive `[64, 64]` zero mask, the
//!   heads joined again, backward from a fixed gradient.
//!
//! Options: `--threads T --mode fast|exact [--reps R]`; prints
//! `BENCH threads=T mode=M median_ms=X min_ms=Y warm_pool_allocs=N` (N: buffers the pool
//! had to get from the system during the timed repetitions, after three warm-up steps).

use super::time_ms;
use crate::args::{parse_count, KernelArgs, Outcome};
use clap::Args;
use onemodel::core::pool;
use onemodel::ops::{self, RnnConfig, RnnWeights};
use onemodel::{Result, Tensor};
use std::io::Write;

/// Which layer `om bench lstm|attention` times.
#[derive(Clone, Copy, Debug)]
pub enum Layer {
    /// crnn_ctc's LSTM stack.
    Lstm,
    /// The encoder's attention.
    Attention,
}

/// Options of `om bench lstm` and `om bench attention`.
#[derive(Args, Debug)]
pub struct LayerArgs {
    /// Timed repetitions
    #[arg(long, default_value_t = 20, value_parser = parse_count)]
    reps: usize,
    #[command(flatten)]
    kernel: KernelArgs,
}

/// Runs `om bench lstm|attention ...`.
pub fn run(layer: Layer, o: &LayerArgs) -> Outcome {
    let (settings, reps) = (o.kernel.apply()?, o.reps);
    let (what, mut step): (&str, Box<dyn FnMut() -> Result<()>>) = match layer {
        Layer::Lstm => ("lstm", lstm_step()?),
        Layer::Attention => ("attention", attention_step()?),
    };
    for _ in 0..3 {
        step()?;
    }
    let native = pool::stats().native_allocations;
    let times = time_ms(0, reps, 1, &mut step)?;
    // Native pool allocations during the timed (warm) steps: 0 when a step reuses the pool.
    let warm_allocs = pool::stats().native_allocations - native;
    outln!(
        "{what} threads={} mode={} median_ms={:.3} min_ms={:.3} warm_pool_allocs={warm_allocs}",
        settings.threads,
        settings.mode,
        times.median(),
        times.min()
    );
    Ok(())
}

fn leaf(shape: &[usize], seed: u64, bound: f32) -> Result<Tensor> {
    Tensor::rand_uniform(shape, -bound, bound, seed)?.requires_grad()
}

fn lstm_step() -> Result<Box<dyn FnMut() -> Result<()>>> {
    let (t, b, i, h) = (32, 8, 512, 128);
    let x = leaf(&[t, b, i], 1, 1.0)?;
    let bound = 1.0 / (h as f32).sqrt();
    let mut params = Vec::new();
    for (k, features) in [i, i, 2 * h, 2 * h].into_iter().enumerate() {
        let s = 10 * (k as u64 + 1);
        params.push(leaf(&[4 * h, features], s, bound)?);
        params.push(leaf(&[4 * h, h], s + 1, bound)?);
        params.push(leaf(&[4 * h], s + 2, bound)?);
        params.push(leaf(&[4 * h], s + 3, bound)?);
    }
    let weights = RnnWeights::from_flat(&params, true);
    let config = RnnConfig { layers: 2, bidirectional: true, batch_first: false };
    let gy = Tensor::rand_uniform(&[t, b, 2 * h], -1.0, 1.0, 99)?;
    Ok(Box::new(move || {
        x.clear_grad();
        params.iter().for_each(Tensor::clear_grad);
        let out = ops::lstm(&x, None, None, &weights, config)?;
        out.y.backward_with(Some(&gy), false)
    }))
}

fn attention_step() -> Result<Box<dyn FnMut() -> Result<()>>> {
    let (b, t, e, heads) = (16usize, 64usize, 256usize, 4usize);
    let d = e / heads;
    let projections = [leaf(&[b, t, e], 1, 1.0)?, leaf(&[b, t, e], 2, 1.0)?, leaf(&[b, t, e], 3, 1.0)?];
    let mask = Tensor::zeros(&[t, t])?;
    let gy = Tensor::rand_uniform(&[b, t, e], -1.0, 1.0, 4)?;
    let split = move |p: &Tensor| ops::permute(&ops::reshape(p, [b as isize, t as isize, heads as isize, d as isize])?, [0, 2, 1, 3]);
    Ok(Box::new(move || {
        projections.iter().for_each(Tensor::clear_grad);
        let [q, k, v] = [split(&projections[0])?, split(&projections[1])?, split(&projections[2])?];
        let y = ops::attention(&q, &k, &v, Some(&mask), 1.0 / (d as f32).sqrt())?;
        let y = ops::reshape(&ops::permute(&y, [0, 2, 1, 3])?, [b as isize, t as isize, e as isize])?;
        y.backward_with(Some(&gy), false)
    }))
}
