//! Accuracy of the elementary functions against `f64` references, and bit equality of
//! the widest path with the scalar path on the same inputs.
//!
//! `sampled_*` run by default on every 997th bit pattern plus special values; the
//! `exhaustive_*` tests (all 2^32 patterns, one test per function,
//! `cargo test --release -- --ignored`) produced the figures in `docs/transcendentals.md`.
//! `pow` has two operands: `sampled_pow_*` and the ignored `dense_pow` pair bases spread
//! over every bit pattern with exponents chosen per base ([`pow_pairs`]), and check every
//! supported path against scalar.

use super::simd::Lanes;
use super::transcendentals as tr;
use super::{dispatch, LaneTask};
use crate::compute::KernelPath;
use rayon::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum F {
    Exp,
    Log,
    Tanh,
    Sigmoid,
    Erf,
    GeluErf,
    GeluTanh,
    GeluErfGrad,
    GeluTanhGrad,
    Sin,
    Cos,
}

const ALL: [F; 11] =
    [F::Exp, F::Log, F::Tanh, F::Sigmoid, F::Erf, F::GeluErf, F::GeluTanh, F::GeluErfGrad, F::GeluTanhGrad, F::Sin, F::Cos];

/// Evaluates `f` over `x` (length a multiple of 16) with lanes `L`.
struct Eval<'a> {
    f: F,
    x: &'a [f32],
    out: &'a mut [f32],
}

impl LaneTask for Eval<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let g: fn(L) -> L = match self.f {
            F::Exp => tr::exp,
            F::Log => tr::log,
            F::Tanh => tr::tanh,
            F::Sigmoid => tr::sigmoid,
            F::Erf => tr::erf,
            F::GeluErf => tr::gelu_erf,
            F::GeluTanh => tr::gelu_tanh,
            F::GeluErfGrad => tr::gelu_erf_grad,
            F::GeluTanhGrad => tr::gelu_tanh_grad,
            F::Sin => tr::sin,
            F::Cos => tr::cos,
        };
        for (x, o) in self.x.chunks_exact(L::WIDTH).zip(self.out.chunks_exact_mut(L::WIDTH)) {
            g(L::load(isa, x)).store(o);
        }
    }
}

fn eval(path: KernelPath, f: F, x: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    dispatch(path, Eval { f, x, out: &mut out });
    out
}

const SQRT_HALF: f64 = std::f64::consts::FRAC_1_SQRT_2;
const K: f64 = 0.797_884_560_802_865_4; // sqrt(2/pi)
const C: f64 = 0.044715;

fn sigmoid64(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

fn reference(f: F, x: f64) -> f64 {
    let cdf = || 0.5 * libm::erfc(-x * SQRT_HALF);
    let pdf = || (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let s = || sigmoid64(2.0 * K * (x + C * x * x * x));
    match f {
        F::Exp => x.exp(),
        F::Sin => x.sin(),
        F::Cos => x.cos(),
        F::Log => x.ln(),
        F::Tanh => x.tanh(),
        F::Sigmoid => sigmoid64(x),
        F::Erf => libm::erf(x),
        F::GeluErf => x * cdf(),
        F::GeluTanh if x.abs() > 1e12 => x.max(-0.0),
        F::GeluTanh => x * s(),
        F::GeluErfGrad if x.abs() > 40.0 => cdf(),
        F::GeluErfGrad => cdf() + x * pdf(),
        F::GeluTanhGrad if x.abs() > 40.0 => cdf(),
        F::GeluTanhGrad => {
            let s = s();
            s + x * s * (1.0 - s) * 2.0 * K * (1.0 + 3.0 * C * x * x)
        }
    }
}

/// `|y - r|` in units of the `f32` ulp at `r` (subnormal spacing below 2^-126); 0 when
/// `y` is `r` rounded to `f32` (this covers overflow to infinity); infinite when exactly
/// one of them is NaN or infinite.
fn ulp_error(y: f32, r: f64) -> f64 {
    let rf = r as f32;
    if y == rf || (y.is_nan() && r.is_nan()) {
        return 0.0;
    }
    if y.is_nan() || r.is_nan() || y.is_infinite() || rf.is_infinite() {
        return f64::INFINITY;
    }
    let e = ((r.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let ulp = 2f64.powi(e.max(-126) - 23);
    (y as f64 - r).abs() / ulp
}

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    max_ulp: f64,
    worst_x: f32,
    /// Largest `|y - r|`, the useful figure where `r` crosses zero.
    max_abs: f64,
    /// Inputs where the widest path and the scalar path differ in bits.
    path_mismatches: u64,
    count: u64,
}

impl Stats {
    fn merge(self, o: Stats) -> Stats {
        let (max_ulp, worst_x) = if o.max_ulp > self.max_ulp { (o.max_ulp, o.worst_x) } else { (self.max_ulp, self.worst_x) };
        Stats {
            max_ulp,
            worst_x,
            max_abs: self.max_abs.max(o.max_abs),
            path_mismatches: self.path_mismatches + o.path_mismatches,
            count: self.count + o.count,
        }
    }
}

/// Measures `f` on the given inputs (finite only; padded to a multiple of 16).
fn measure_block(f: F, mut xs: Vec<f32>) -> Stats {
    xs.retain(|x| x.is_finite());
    let count = xs.len() as u64;
    xs.resize(xs.len().div_ceil(16) * 16, 0.0);
    let wide = eval(KernelPath::best(), f, &xs);
    let scalar = eval(KernelPath::Scalar, f, &xs);
    let mut s = Stats { count, ..Stats::default() };
    for ((&x, &y), &z) in xs.iter().zip(&wide).zip(&scalar) {
        if y.to_bits() != z.to_bits() {
            s.path_mismatches += 1;
        }
        let r = reference(f, x as f64);
        let e = ulp_error(z, r);
        if (r as f32).is_finite() {
            s.max_abs = s.max_abs.max((z as f64 - r).abs());
        }
        if e > s.max_ulp {
            s.max_ulp = e;
            s.worst_x = x;
        }
    }
    s
}

/// Every `step`-th bit pattern, in parallel blocks.
fn survey(f: F, step: u64) -> Stats {
    const BLOCK: u64 = 1 << 16;
    let total = (1u64 << 32).div_ceil(step);
    (0..total.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            let end = ((b + 1) * BLOCK).min(total);
            let xs = (b * BLOCK..end).map(|i| f32::from_bits((i * step) as u32)).collect();
            measure_block(f, xs)
        })
        .reduce(Stats::default, Stats::merge)
}

/// The accuracy promised in `docs/transcendentals.md`: `(max ulp, max absolute error)`.
/// The GELUs have no target; their bounds pin the exhaustive measurements of the doc
/// (rounded up in the second digit) so that a change making them worse fails. The slopes
/// cross zero near `x = −0.75`, where an ulp of the tiny result means nothing, so they are
/// pinned by their absolute error.
fn bound(f: F) -> (f64, f64) {
    match f {
        F::Exp | F::Log | F::Sin | F::Cos => (2.0, f64::INFINITY),
        F::Tanh | F::Sigmoid | F::Erf => (3.0, f64::INFINITY),
        F::GeluErf => (8.2, f64::INFINITY),         // exhaustive: 8.150 ulp
        F::GeluTanh => (214.0, f64::INFINITY),      // exhaustive: 213.9 ulp
        F::GeluErfGrad => (f64::INFINITY, 1.6e-7),  // exhaustive: 1.53e-7
        F::GeluTanhGrad => (f64::INFINITY, 2.2e-7), // exhaustive: 2.12e-7
    }
}

fn check(f: F, s: Stats) {
    println!(
        "{f:?}: max {:.3} ulp at x = {:e} ({:#010x}); max abs error {:.2e}; {} inputs; {} path mismatches",
        s.max_ulp,
        s.worst_x,
        s.worst_x.to_bits(),
        s.max_abs,
        s.count,
        s.path_mismatches
    );
    assert_eq!(s.path_mismatches, 0, "{f:?}: widest path differs from scalar");
    let (max_ulp, max_abs) = bound(f);
    assert!(s.max_ulp <= max_ulp, "{f:?}: {} ulp, bound {max_ulp}", s.max_ulp);
    assert!(s.max_abs <= max_abs, "{f:?}: absolute error {:e}, bound {max_abs:e}", s.max_abs);
}

#[test]
fn sampled_accuracy_and_path_equality() {
    for f in ALL {
        check(f, survey(f, 997));
    }
}

/// One ignored test per function, so they can be run one by one:
/// `cargo test --release exhaustive_erf -- --ignored --nocapture`.
macro_rules! exhaustive {
    ($($name:ident: $f:expr;)*) => {$(
        #[test]
        #[ignore = "exhaustive: all 2^32 inputs, minutes on 2 cores"]
        fn $name() {
            check($f, survey($f, 1));
        }
    )*};
}

exhaustive! {
    exhaustive_exp: F::Exp;
    exhaustive_log: F::Log;
    exhaustive_tanh: F::Tanh;
    exhaustive_sigmoid: F::Sigmoid;
    exhaustive_erf: F::Erf;
    exhaustive_gelu_erf: F::GeluErf;
    exhaustive_gelu_tanh: F::GeluTanh;
    exhaustive_gelu_erf_grad: F::GeluErfGrad;
    exhaustive_gelu_tanh_grad: F::GeluTanhGrad;
    exhaustive_sin: F::Sin;
    exhaustive_cos: F::Cos;
}

#[test]
fn special_values() {
    let inf = f32::INFINITY;
    let cases: &[(F, f32, f32)] = &[
        (F::Exp, -inf, 0.0),
        (F::Exp, inf, inf),
        (F::Exp, 89.0, inf),
        (F::Exp, -104.0, 0.0),
        (F::Exp, 0.0, 1.0),
        (F::Log, 0.0, -inf),
        (F::Log, -0.0, -inf),
        (F::Log, inf, inf),
        (F::Log, 1.0, 0.0),
        (F::Tanh, inf, 1.0),
        (F::Tanh, -inf, -1.0),
        (F::Tanh, -0.0, -0.0),
        (F::Sigmoid, inf, 1.0),
        (F::Sigmoid, -inf, 0.0),
        (F::Erf, inf, 1.0),
        (F::Erf, -inf, -1.0),
        (F::Erf, -0.0, -0.0),
        (F::GeluErf, inf, inf),
        (F::GeluErf, -inf, -0.0),
        (F::GeluTanh, inf, inf),
        (F::GeluTanh, -inf, -0.0),
        (F::GeluErfGrad, inf, 1.0),
        (F::GeluErfGrad, -inf, 0.0),
        (F::GeluTanhGrad, inf, 1.0),
        (F::GeluTanhGrad, -inf, 0.0),
        (F::Sin, 0.0, 0.0),
        (F::Sin, -0.0, -0.0),
        (F::Cos, 0.0, 1.0),
        (F::Cos, -0.0, 1.0),
    ];
    for path in KernelPath::supported() {
        for &(f, x, want) in cases {
            let mut xs = [x; 16];
            xs[0] = x;
            let y = eval(path, f, &xs)[0];
            assert_eq!(y.to_bits(), want.to_bits(), "{path} {f:?}({x}) = {y}, want {want}");
        }
        for f in ALL {
            assert!(eval(path, f, &[f32::NAN; 16])[0].is_nan(), "{path} {f:?}(NaN)");
        }
        for f in [F::Sin, F::Cos] {
            for x in [inf, -inf] {
                assert!(eval(path, f, &[x; 16])[0].is_nan(), "{path} {f:?}({x})");
            }
        }
        for x in [-1.0f32, -1e-30, -inf, -f32::MIN_POSITIVE] {
            assert!(eval(path, F::Log, &[x; 16])[0].is_nan(), "{path} log({x})");
        }
    }
}

#[test]
fn sqrt_is_identical_on_every_path() {
    struct Sqrt<'a>(&'a [f32], &'a mut [f32]);
    impl LaneTask for Sqrt<'_> {
        type Output = ();
        #[inline(always)]
        fn run<L: Lanes>(self, isa: L::Isa) {
            for (x, o) in self.0.chunks_exact(L::WIDTH).zip(self.1.chunks_exact_mut(L::WIDTH)) {
                L::load(isa, x).sqrt().store(o);
            }
        }
    }
    let xs: Vec<f32> = (0..1u32 << 16).map(|i| f32::from_bits(i.wrapping_mul(0x9e37_79b9) >> 1)).collect();
    for path in KernelPath::supported() {
        let mut out = vec![0.0; xs.len()];
        dispatch(path, Sqrt(&xs, &mut out));
        for (x, y) in xs.iter().zip(&out) {
            assert_eq!(y.to_bits(), x.sqrt().to_bits(), "{path} sqrt({x})");
        }
    }
}

/// Evaluates `pow` over `(x, y)` (lengths a multiple of 16) with lanes `L`.
struct EvalPow<'a> {
    x: &'a [f32],
    y: &'a [f32],
    out: &'a mut [f32],
}

impl LaneTask for EvalPow<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let w = L::WIDTH;
        for ((x, y), o) in self.x.chunks_exact(w).zip(self.y.chunks_exact(w)).zip(self.out.chunks_exact_mut(w)) {
            tr::pow(L::load(isa, x), L::load(isa, y)).store(o);
        }
    }
}

fn eval_pow(path: KernelPath, x: &[f32], y: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    dispatch(path, EvalPow { x, y, out: &mut out });
    out
}

/// A fixed pseudo-random 64-bit value of `i` (SplitMix64's finaliser).
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The exponents paired with base `x`: small integers and halves, one random bit pattern,
/// and six exponents aimed at results spread over the whole `f32` range (`y = t/ln|x|`
/// for `t` uniform in `[−105, 90]`, rounded to an integer for a negative base, whose
/// non-integer powers are NaN), so that most pairs give finite non-zero results.
fn pow_pairs(xbits: u32) -> Vec<(f32, f32)> {
    let x = f32::from_bits(xbits);
    let mut ys = vec![-3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 0.5, -0.5, 1.5, f32::from_bits(mix(xbits as u64) as u32)];
    let ln = (x.abs() as f64).ln();
    if ln != 0.0 && ln.is_finite() {
        for k in 0..6u64 {
            let t = -105.0 + 195.0 * (mix((xbits as u64) << 8 | k) >> 11) as f64 / (1u64 << 53) as f64;
            let y = (t / ln) as f32;
            ys.push(if x < 0.0 { y.round() } else { y });
        }
    }
    ys.into_iter().map(|y| (x, y)).collect()
}

#[derive(Clone, Copy, Debug, Default)]
struct PowStats {
    max_ulp: f64,
    worst: (f32, f32),
    /// Pairs where a path differs in bits from scalar.
    path_mismatches: u64,
    /// Pairs with a finite non-zero reference.
    finite: u64,
    count: u64,
}

impl PowStats {
    fn merge(self, o: PowStats) -> PowStats {
        let (max_ulp, worst) = if o.max_ulp > self.max_ulp { (o.max_ulp, o.worst) } else { (self.max_ulp, self.worst) };
        PowStats {
            max_ulp,
            worst,
            path_mismatches: self.path_mismatches + o.path_mismatches,
            finite: self.finite + o.finite,
            count: self.count + o.count,
        }
    }
}

/// Bases at every `step`-th bit pattern (both signs, NaN and ±∞ included), each with
/// [`pow_pairs`]; the reference is `f64::powf` of the widened operands.
fn survey_pow(step: u64) -> PowStats {
    const BLOCK: u64 = 1 << 12;
    let total = (1u64 << 32).div_ceil(step);
    let paths = KernelPath::supported();
    (0..total.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            let end = ((b + 1) * BLOCK).min(total);
            let pairs: Vec<(f32, f32)> = (b * BLOCK..end).flat_map(|i| pow_pairs((i * step) as u32)).collect();
            let mut xs: Vec<f32> = pairs.iter().map(|p| p.0).collect();
            let mut ys: Vec<f32> = pairs.iter().map(|p| p.1).collect();
            let padded = xs.len().div_ceil(16) * 16;
            xs.resize(padded, 1.0);
            ys.resize(padded, 1.0);
            let scalar = eval_pow(KernelPath::Scalar, &xs, &ys);
            let mut s = PowStats { count: pairs.len() as u64, ..PowStats::default() };
            for &path in &paths[1..] {
                let wide = eval_pow(path, &xs, &ys);
                s.path_mismatches += wide.iter().zip(&scalar).filter(|(a, b)| a.to_bits() != b.to_bits()).count() as u64;
            }
            for (&(x, y), &z) in pairs.iter().zip(&scalar) {
                let r = (x as f64).powf(y as f64);
                if r.is_finite() && r != 0.0 {
                    s.finite += 1;
                }
                let e = ulp_error(z, r);
                if e > s.max_ulp {
                    s.max_ulp = e;
                    s.worst = (x, y);
                }
            }
            s
        })
        .reduce(PowStats::default, PowStats::merge)
}

/// `pow`'s promised accuracy (`docs/transcendentals.md`): `0.5 + 2⁻¹⁶` ulp.
const POW_BOUND: f64 = 0.5 + 1.0 / 65536.0;

fn check_pow(s: PowStats) {
    let (x, y) = s.worst;
    println!(
        "pow: max {:.6} ulp at x = {x:e} ({:#010x}), y = {y:e} ({:#010x}); {} pairs ({} with a finite non-zero result); {} path mismatches",
        s.max_ulp,
        x.to_bits(),
        y.to_bits(),
        s.count,
        s.finite,
        s.path_mismatches
    );
    assert_eq!(s.path_mismatches, 0, "pow: a path differs from scalar");
    assert!(s.max_ulp <= POW_BOUND, "pow: {} ulp at ({x:e}, {y:e})", s.max_ulp);
}

#[test]
fn sampled_pow_accuracy_and_path_equality() {
    check_pow(survey_pow(4099));
}

#[test]
#[ignore = "dense: 1.1e9 pairs, minutes on 2 cores"]
fn dense_pow() {
    check_pow(survey_pow(61));
}
