//! Proof that the two-pass erf GELU of [`super::gelu_with_slope`] has the bits of the one-pass
//! loop it replaced ([`Reference`]: `tr::gelu_erf_with_grad` on every full vector, the same
//! code at width 1 on the tail) on every path, mode, length, offset and thread count (NaN
//! outputs: exact mode's canonical value as bits, otherwise NaN for NaN); that
//! the shortened exponentials have [`tr::exp`]'s bits on their domains; and an A/B timing
//! of the two (`--ignored`).

use super::*;
use crate::compute::KernelPath;
use crate::kernels::simd::Lanes;

/// The replaced loop: [`pair_full`] of [`Erf`] on the full vectors, then the scalar tail.
struct Reference<'a, 'o> {
    x: &'a [f32],
    y: &'o mut [f32],
    s: &'o mut [f32],
    mode: Mode,
}

impl LaneTask for Reference<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let Reference { x, y, s, mode } = self;
        let full = y.len() / L::WIDTH * L::WIDTH;
        let (yf, yt) = y.split_at_mut(full);
        let (sf, st) = s.split_at_mut(full);
        pair_full::<L, Erf>(isa, x, yf, sf, mode);
        pair_full::<f32, Erf>(Scalar, &x[full..], yt, st, mode);
    }
}

/// The reference's value and slope of `x` on `settings.path` (one thread: the elements are
/// independent).
fn reference(settings: Settings, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (mut y, mut s) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    dispatch(settings.path, Reference { x, y: &mut y, s: &mut s, mode: settings.mode });
    (y, s)
}

/// The new loop's value and slope of `x`.
fn new(settings: Settings, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (mut y, mut s) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    gelu_with_slope(settings, GeluFormula::Erf, x, &mut y, &mut s);
    (y, s)
}

/// Index and bits of the first element where `a` and `b` differ: in their bits, except
/// that with `any_nan` two NaNs are equal whatever their sign and payload (spec section 7:
/// those may differ between two compilations of the same expression, so only exact mode's
/// canonical NaN is compared as bits; the slope's NaNs become canonical in `g·slope`).
fn first_difference(a: &[f32], b: &[f32], any_nan: bool) -> Option<(usize, u32, u32)> {
    let differ = |a: &f32, b: &f32| a.to_bits() != b.to_bits() && !(any_nan && a.is_nan() && b.is_nan());
    a.iter().zip(b).enumerate().find(|(_, (a, b))| differ(a, b)).map(|(i, (a, b))| (i, a.to_bits(), b.to_bits()))
}

/// A deterministic pseudo-random stream (64-bit LCG, high bits).
fn lcg(state: &mut u64) -> u32 {
    *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    (*state >> 32) as u32
}

/// Every sign and exponent with several significands, NaN payloads, ±0, ±inf, subnormals,
/// runs of ulps around the erf split `±0.875·√2` and the clamp `±20`, and a GELU layer's
/// typical pre-activations, shuffled so that covered and uncovered lanes mix in every
/// proportion, followed by a run where every lane is uncovered and one where none is.
fn dense_sample() -> Vec<f32> {
    let mut bits: Vec<u32> = Vec::new();
    let mut state = 7u64;
    for sign in [0u32, 0x8000_0000] {
        for exp in 0..256u32 {
            for m in [0u32, 1, 2, 0x40_0000, 0x7f_fffe, 0x7f_ffff] {
                bits.push(sign | exp << 23 | m);
            }
            for _ in 0..8 {
                bits.push(sign | exp << 23 | (lcg(&mut state) & 0x7f_ffff));
            }
        }
    }
    let split = 0.875f32 * std::f32::consts::SQRT_2;
    for centre in [split, -split, 20.0, -20.0, 0.0, -0.0] {
        let c = f32::to_bits(centre) as i64;
        bits.extend((-300..=300).map(|d| (c + d).clamp(0, u32::MAX as i64) as u32));
    }
    // ~N(0, 0.6) (Irwin–Hall of 12 uniforms), like the benchmark's GELU inputs.
    for _ in 0..20_000 {
        let u: f32 = (0..12).map(|_| lcg(&mut state) as f32 / 4_294_967_296.0).sum::<f32>() - 6.0;
        bits.push((0.6 * u).to_bits());
    }
    // Fisher–Yates.
    for i in (1..bits.len()).rev() {
        let j = lcg(&mut state) as usize % (i + 1);
        bits.swap(i, j);
    }
    let mut x: Vec<f32> = bits.into_iter().map(f32::from_bits).collect();
    x.extend((0..3000).map(|i| 1.3 + i as f32 * 0.01));
    x.extend((0..3000).map(|i| -1.2 + i as f32 * 0.0008));
    x
}

#[test]
fn erf_two_pass_has_the_bits_of_the_one_pass_loop_on_a_dense_sample() {
    let x = dense_sample();
    let n = x.len();
    for path in KernelPath::supported() {
        for mode in [Mode::Fast, Mode::Exact] {
            for threads in [1, 2] {
                let settings = Settings { mode, threads, path };
                let spans = [(0, n), (1, n - 1), (7, 1024), (3, 1025), (5, 1023), (0, 17), (2, 15), (0, 0), (9, 2049), (11, 30_000)];
                for (off, len) in spans {
                    let xs = &x[off..off + len];
                    let (want_y, want_s) = reference(settings, xs);
                    let (y, s) = new(settings, xs);
                    let what = format!("{path} {mode:?} {threads} threads, offset {off}, length {len}");
                    assert_eq!(first_difference(&y, &want_y, mode == Mode::Fast), None, "value, {what}");
                    assert_eq!(first_difference(&s, &want_s, true), None, "slope, {what}");
                }
            }
        }
    }
}

/// All `2^32` inputs, every path, both modes (bits compared exactly; NaNs as in
/// [`first_difference`]).
/// `cargo test --release -p om-core --lib all_inputs -- --ignored --nocapture`.
#[test]
#[ignore = "all 2^32 inputs: minutes"]
fn erf_two_pass_has_the_bits_of_the_one_pass_loop_on_all_inputs() {
    const CHUNK: u64 = 1 << 16;
    let start = std::time::Instant::now();
    // Widest path first (the one that runs); `OM_GELU_PATHS=n` checks only the n widest.
    let mut paths = KernelPath::supported();
    paths.reverse();
    let n_paths = std::env::var("OM_GELU_PATHS").ok().and_then(|v| v.parse().ok()).unwrap_or(paths.len());
    for &path in &paths[..n_paths.min(paths.len())] {
        let path_start = std::time::Instant::now();
        std::thread::scope(|scope| {
            for part in 0..2u64 {
                scope.spawn(move || {
                    let mut x = vec![0.0f32; CHUNK as usize];
                    for chunk in (part..(1u64 << 32) / CHUNK).step_by(2) {
                        for (i, v) in x.iter_mut().enumerate() {
                            *v = f32::from_bits((chunk * CHUNK + i as u64) as u32);
                        }
                        for mode in [Mode::Fast, Mode::Exact] {
                            let settings = Settings { mode, threads: 1, path };
                            let (want_y, want_s) = reference(settings, &x);
                            let (y, s) = new(settings, &x);
                            assert_eq!(first_difference(&y, &want_y, mode == Mode::Fast), None, "value, {path} {mode:?}, chunk {chunk}");
                            assert_eq!(first_difference(&s, &want_s, true), None, "slope, {path} {mode:?}, chunk {chunk}");
                        }
                        if chunk % 4096 == part {
                            println!("{path}: chunk {chunk} of 65536 done ({:.1} s)", path_start.elapsed().as_secs_f64());
                        }
                    }
                });
            }
        });
        println!("{path}: all 2^32 inputs, both modes, identical bits ({:.1} s)", path_start.elapsed().as_secs_f64());
    }
    println!("total {:.1} s", start.elapsed().as_secs_f64());
}

/// `(v, tr::exp(v), short(v))` for the scalar lanes, for the checks below.
fn exp_pairs(v: f32) -> (u32, u32, u32) {
    (tr::exp(v).to_bits(), tr::exp_unit(v).to_bits(), tr::exp_near0(v).to_bits())
}

/// `exp_unit` on `|v| <= 1` and `exp_near0` on `|v| <= 0.34`: every bit pattern in steps
/// of 97 (all of them with `--ignored`, [`short_exps_are_exp_on_all_of_their_domains`]).
fn check_short_exps(step: usize) {
    for sign in [0u32, 0x8000_0000] {
        for b in (0..=1.0f32.to_bits()).step_by(step) {
            let v = f32::from_bits(sign | b);
            let (e, unit, near0) = exp_pairs(v);
            assert_eq!(unit, e, "exp_unit({v:e})");
            if v.abs() <= tr::EXP_NEAR0_MAX {
                assert_eq!(near0, e, "exp_near0({v:e})");
            }
        }
    }
    // The domains' ends, and the first values past them where the short forms stop
    // agreeing (so the test can fail).
    assert_eq!(exp_pairs(1.0).1, exp_pairs(1.0).0);
    assert_ne!(exp_pairs(-120.0).1, exp_pairs(-120.0).0, "exp_unit must differ where the clamp acts");
    let past = (0.35f32.to_bits()..1.0f32.to_bits()).step_by(step).map(f32::from_bits);
    assert!(past.map(exp_pairs).any(|(e, _, near0)| near0 != e), "exp_near0 must differ somewhere past its domain");
}

#[test]
fn short_exps_are_exp_on_a_sample_of_their_domains() {
    check_short_exps(97);
}

#[test]
#[ignore = "2^31 scalar exps: about a minute"]
fn short_exps_are_exp_on_all_of_their_domains() {
    check_short_exps(1);
}

/// A/B timing on a `[1024, 1024]` `N(0, σ)` input (σ = `OM_GELU_SIGMA`, default 0.6),
/// one thread, exact mode, alternating the one-pass reference and the two-pass loop.
/// `cargo test --release -p om-core --lib gelu_timing -- --ignored --nocapture`.
#[test]
#[ignore = "timing, not a check"]
fn gelu_timing() {
    let mut state = 11u64;
    let sigma: f32 = std::env::var("OM_GELU_SIGMA").ok().and_then(|v| v.parse().ok()).unwrap_or(0.6);
    let x: Vec<f32> =
        (0..1 << 20).map(|_| sigma * ((0..12).map(|_| lcg(&mut state) as f32 / 4_294_967_296.0).sum::<f32>() - 6.0)).collect();
    let large = x.iter().filter(|v| v.abs() * std::f32::consts::FRAC_1_SQRT_2 >= 0.875).count();
    println!("{:.2}% of the inputs take the large-argument head", 100.0 * large as f64 / x.len() as f64);
    let (mut y, mut s) = (vec![0.0f32; x.len()], vec![0.0f32; x.len()]);
    // The whole [1024, 1024] (beyond L2), and the same work as 16 passes over 64 Ki
    // elements (in L2: the compute alone).
    for (len, passes) in [(x.len(), 1), (1 << 16, 16)] {
        for path in KernelPath::supported() {
            let settings = Settings { mode: Mode::Exact, threads: 1, path };
            let (mut old_ms, mut new_ms) = (Vec::new(), Vec::new());
            for _ in 0..15 {
                let t = std::time::Instant::now();
                for _ in 0..passes {
                    dispatch(path, Reference { x: &x[..len], y: &mut y[..len], s: &mut s[..len], mode: settings.mode });
                }
                old_ms.push(t.elapsed().as_secs_f64() * 1e3);
                let t = std::time::Instant::now();
                for _ in 0..passes {
                    gelu_with_slope(settings, GeluFormula::Erf, &x[..len], &mut y[..len], &mut s[..len]);
                }
                new_ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
            for v in [&mut old_ms, &mut new_ms] {
                v.sort_by(f64::total_cmp);
            }
            println!(
                "{len} x {passes} {path}: one-pass min {:.3} ms median {:.3} ms; two-pass min {:.3} ms median {:.3} ms",
                old_ms[0], old_ms[7], new_ms[0], new_ms[7]
            );
        }
    }
}
