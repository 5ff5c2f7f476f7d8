//! `om bench conv`: the convolution kernels on the three 3×3, pad-1 layers of the convnet
//! benchmark (`../shared/BENCHMARKS.md`), one line per layer with the median milliseconds of
//! the forward pass, the input, weight and bias gradients, and their total.
//!
//! `om bench conv --threads T --mode fast|exact [--layer 1|2|3] [--path P] [--reps R] [--stat median|min]`
//!
//! `--stat min` reports the fastest repetition instead of the median: on a busy shared
//! machine it leaves out the repetitions the scheduler interrupted.

use onemodel::core::kernels::conv::{conv2d_backward_bias, conv2d_backward_input, conv2d_backward_weight, conv2d_forward, ConvGeom};
use onemodel::{compute::Settings, Error, KernelPath, Mode, Result};
use std::time::Instant;

/// The convnet's convolutions: `(N, C, H·W side, O)`, all 3×3, stride 1, pad 1, bias.
const LAYERS: [(usize, usize, usize, usize); 3] = [(32, 3, 32, 32), (32, 32, 16, 64), (32, 64, 8, 128)];

/// Runs `om bench conv ...`.
pub fn run(args: &[String]) -> Result<()> {
    let mut settings = Settings { mode: Mode::Fast, threads: 1, path: KernelPath::best() };
    let (mut reps, mut only, mut min) = (11usize, None, false);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| Error::argument("bench", format!("{flag} needs a value")))?;
        let bad = || Error::argument("bench", format!("invalid value `{v}` for {flag}"));
        let num = || v.parse::<usize>().map_err(|_| bad());
        match flag.as_str() {
            "--reps" => reps = num()?.max(1),
            "--stat" => {
                min = match v.as_str() {
                    "min" => true,
                    "median" => false,
                    _ => return Err(bad()),
                }
            }
            "--layer" => only = Some(num()?.clamp(1, LAYERS.len())),
            "--threads" => settings.threads = num()?.clamp(1, onemodel::compute::MAX_THREADS),
            "--mode" => settings.mode = Mode::parse(v).ok_or_else(bad)?,
            "--path" => {
                settings.path = KernelPath::parse(v).ok_or_else(bad)?;
                if !settings.path.is_supported() {
                    return Err(Error::argument("bench", format!("path {v} is not supported by this CPU")));
                }
            }
            _ => return Err(Error::argument("bench", format!("unknown option `{flag}`"))),
        }
    }
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
        let fwd = time_ms(reps, min, || conv2d_forward(settings, &geo, &x, &w, Some(&b), &mut y));
        let bx = time_ms(reps, min, || conv2d_backward_input(settings, &geo, &g, &w, &mut dx));
        let bw = time_ms(reps, min, || conv2d_backward_weight(settings, &geo, &x, &g, &mut dw));
        let bb = time_ms(reps, min, || conv2d_backward_bias(&geo, &g, &mut db));
        println!(
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

/// The median (or the minimum, when `min`) over `reps` timed calls of `f` (after one
/// warm-up call), in milliseconds.
fn time_ms(reps: usize, min: bool, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    if min {
        times[0]
    } else {
        times[times.len() / 2]
    }
}
