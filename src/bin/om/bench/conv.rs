//! `om bench conv`: the convolution kernels on the three 3×3, pad-1 layers of the convnet
//! benchmark (`../shared/BENCHMARKS.md`), one line per layer with the median milliseconds of
//! the forward pass, the input, weight and bias gradients, and their total.
//!
//! `om bench conv --threads T --mode fast|exact [--layer 1|2|3] [--path P] [--reps R] [--stat median|min]`
//!
//! `--stat min` reports the fastest repetition instead of the median: on a busy shared
//! machine it leaves out the repetitions the scheduler interrupted.

use super::time_ms;
use crate::args::{parse_count, KernelArgs, Outcome};
use clap::{builder::RangedU64ValueParser, Args, ValueEnum};
use onemodel::core::kernels::conv::{conv2d_backward_bias, conv2d_backward_input, conv2d_backward_weight, conv2d_forward, ConvGeom};
use onemodel::Result;
use std::io::Write;

/// The convnet's convolutions: `(N, C, H·W side, O)`, all 3×3, stride 1, pad 1, bias.
const LAYERS: [(usize, usize, usize, usize); 3] = [(32, 3, 32, 32), (32, 32, 16, 64), (32, 64, 8, 128)];

/// Which repetition `om bench conv` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Stat {
    /// The median repetition
    Median,
    /// The fastest repetition (the one the scheduler interrupted least)
    Min,
}

/// Options of `om bench conv`.
#[derive(Args, Debug)]
pub struct ConvArgs {
    /// Only this layer (1, 2 or 3) [default: all three]
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=LAYERS.len() as u64))]
    layer: Option<usize>,
    /// The statistic reported
    #[arg(long, value_enum, default_value_t = Stat::Median)]
    stat: Stat,
    /// Timed repetitions
    #[arg(long, default_value_t = 11, value_parser = parse_count)]
    reps: usize,
    #[command(flatten)]
    kernel: KernelArgs,
}

/// Runs `om bench conv ...`.
pub fn run(o: &ConvArgs) -> Outcome {
    let (settings, reps, only, min) = (o.kernel.settings()?, o.reps, o.layer, o.stat == Stat::Min);
    let time_ms = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let t = time_ms(1, reps, 1, f)?;
        Ok(if min { t.min() } else { t.median() })
    };
    for (i, &(n, c, side, o)) in LAYERS.iter().enumerate() {
        if only.is_some_and(|l| l != i + 1) {
            continue;
        }
        let geo =
            ConvGeom { n, c, h: side, w: side, o, groups: 1, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, dh: 1, dw: 1, oh: side, ow: side };
        let x: Vec<f32> = (0..n * c * side * side).map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0).collect();
        let w: Vec<f32> = (0..o * c * 9).map(|i| ((i * 5 % 11) as f32 - 5.0) / 16.0).collect();
        let b: Vec<f32> = (0..o).map(|i| i as f32 / 64.0).collect();
        let g: Vec<f32> = (0..n * o * side * side).map(|i| ((i * 3 % 17) as f32 - 8.0) / 32.0).collect();
        let (mut y, mut dx, mut dw, mut db) = (vec![0.0; g.len()], vec![0.0; x.len()], vec![0.0; w.len()], vec![0.0; o]);
        let fwd = time_ms(&mut || conv2d_forward(settings, &geo, &x, &w, Some(&b), &mut y))?;
        let bx = time_ms(&mut || conv2d_backward_input(settings, &geo, &g, &w, &mut dx))?;
        let bw = time_ms(&mut || conv2d_backward_weight(settings, &geo, &x, &g, &mut dw))?;
        let bb = time_ms(&mut || conv2d_backward_bias(settings, &geo, &g, &mut db))?;
        outln!(
            "conv layer={} x=[{n},{c},{side},{side}] o={o} threads={} mode={} path={} fwd_ms={fwd:.3} dx_ms={bx:.3} dw_ms={bw:.3} db_ms={bb:.3} total_ms={:.3}",
            i + 1,
            settings.threads,
            settings.mode,
            settings.path,
            fwd + bx + bw + bb
        );
    }
    Ok(())
}
